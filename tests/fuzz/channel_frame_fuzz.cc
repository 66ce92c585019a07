// libFuzzer target for the coordination channel's decoders
// (agent/coord/channel_frame.h): the frame stream, the hello and the
// handshake of a ChannelSession. The first byte picks what the rest is:
//  0  a raw frame stream, decoded under the fuzz key: whole and in pieces
//     of input-derived sizes, which must agree; every frame it accepts
//     reseals (FrameSealer at its sequence number) to exactly the bytes it
//     was read from; an error is sticky. A mutated stream almost never
//     carries valid MACs, so this mostly exercises lengths and the limit.
//  1  frames (type, payload) that a FrameSealer seals, then one byte of the
//     stream flipped (or none): without the flip every frame comes back
//     as sealed; with it, the frames before the flipped one come back and
//     the stream then fails (bad MAC, oversize or truncated), never
//     delivering an altered frame. This reaches the checks behind the MAC.
//  2  bytes a peer sends to a responder session: a hello that decodes
//     re-encodes to its bytes (reserved bytes aside), the session answers
//     a good hello with its 32-byte MAC, and raw bytes never establish a
//     session (that would be a forged handshake MAC).
// Invariants also: no crash, hang or sanitizer report; every result is a
// named one.
//
// Built with -DCHRONOLINK_FUZZ_CORPUS_GEN the same file writes the seed
// corpus: `channel_frame_corpus_gen tests/fuzz/corpus/channel_frame`.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/coord/channel_frame.h"

namespace {

using chronolink::ChannelEvent;
using chronolink::ChannelFrame;
using chronolink::ChannelHello;
using chronolink::ChannelIdentity;
using chronolink::ChannelKey;
using chronolink::ChannelResult;
using chronolink::ChannelRole;
using chronolink::ChannelSession;
using chronolink::FrameDecoder;
using chronolink::FrameSealer;

constexpr size_t kMaxPayload = 4096;  // small, so that the oversize check is reachable
constexpr uint32_t kFuzzCluster = 0x00C10C4B;
constexpr uint32_t kFuzzNode = 7;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "channel_frame_fuzz invariant violated: %s\n", what);
  std::abort();
}

ChannelKey FuzzFrameKey() {
  ChannelKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(0xA5 ^ (i * 29));
  return k;
}

void CheckNamed(ChannelResult r) {
  if (static_cast<size_t>(r) >= static_cast<size_t>(ChannelResult::kCount)) Fail("result out of range");
  if (chronolink::ChannelResultName(r) == "unknown") Fail("unnamed result");
}

std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

struct Decoded {
  struct Frame {
    uint64_t seq;
    uint16_t type;
    std::string payload;
    bool operator==(const Frame&) const = default;
  };
  std::vector<Frame> frames;
  ChannelResult last = ChannelResult::kNeedMore;  // what ended the last Next loop
  ChannelResult finish = ChannelResult::kOk;
};

// Drains every frame the decoder has; checks each against a reseal.
void Drain(FrameDecoder* decoder, Decoded* out) {
  for (;;) {
    ChannelFrame f;
    const ChannelResult r = decoder->Next(&f);
    CheckNamed(r);
    if (r != ChannelResult::kOk) {
      out->last = r;
      if (r != ChannelResult::kNeedMore && decoder->Next(&f) != r) Fail("an error is not sticky");
      return;
    }
    if (f.seq != out->frames.size()) Fail("frame sequence not consecutive from 0");
    if (f.payload.size() > kMaxPayload) Fail("payload above the limit accepted");
    out->frames.push_back({f.seq, f.type, std::string(f.payload)});
  }
}

// Pieces of 1..64 bytes, from a generator seeded by the stream itself.
Decoded DecodeStream(std::string_view stream, bool in_pieces) {
  FrameDecoder decoder(FuzzFrameKey(), kMaxPayload);
  Decoded out;
  uint32_t state = 0x9E3779B9u ^ static_cast<uint32_t>(stream.size());
  size_t pos = 0;
  while (pos < stream.size()) {
    size_t n = stream.size() - pos;
    if (in_pieces) {
      state = state * 1664525u + 1013904223u;
      n = std::min<size_t>(n, 1 + (state >> 26));
    }
    decoder.Feed(AsBytes(stream.substr(pos, n)));
    pos += n;
    Drain(&decoder, &out);
    if (out.last != ChannelResult::kNeedMore) break;
  }
  if (stream.empty()) Drain(&decoder, &out);
  out.finish = decoder.Finish();
  CheckNamed(out.finish);
  if (out.last != ChannelResult::kNeedMore && out.finish != out.last) Fail("Finish forgets the error");
  if (out.last == ChannelResult::kNeedMore &&
      (out.finish == ChannelResult::kTruncated) != (decoder.buffered() > 0))
    Fail("Finish disagrees with what is buffered");
  return out;
}

std::string Reseal(const std::vector<Decoded::Frame>& frames) {
  FrameSealer sealer(FuzzFrameKey());
  std::string out;
  for (const auto& f : frames) {
    if (sealer.next_seq() != f.seq) Fail("reseal out of step");
    if (!sealer.Seal(f.type, f.payload, &out)) Fail("reseal refused");
  }
  return out;
}

void RawStream(std::string_view stream) {
  const Decoded whole = DecodeStream(stream, false);
  const Decoded pieces = DecodeStream(stream, true);
  if (whole.frames != pieces.frames || whole.finish != pieces.finish)
    Fail("decoding in pieces differs from decoding whole");
  const std::string again = Reseal(whole.frames);
  if (stream.substr(0, again.size()) != again) Fail("accepted frames do not reseal to their bytes");
}

void SealedStream(FuzzedDataProvider* in) {
  const size_t flip_at = in->ConsumeIntegral<uint16_t>();
  const uint8_t flip_mask = in->ConsumeIntegral<uint8_t>();
  std::vector<Decoded::Frame> frames;
  while (in->remaining_bytes() > 0 && frames.size() < 64) {
    const uint16_t type = in->ConsumeIntegral<uint16_t>();
    std::string payload = in->ConsumeRandomLengthString(kMaxPayload);
    frames.push_back({frames.size(), type, std::move(payload)});
  }
  std::string stream = Reseal(frames);
  const bool flipped = flip_mask != 0 && flip_at < stream.size();
  if (flipped) stream[flip_at] = static_cast<char>(stream[flip_at] ^ flip_mask);
  const Decoded got = DecodeStream(stream, true);
  if (!flipped) {
    if (got.frames != frames || got.last != ChannelResult::kNeedMore || got.finish != ChannelResult::kOk)
      Fail("an intact sealed stream does not decode to its frames");
    return;
  }
  // The frame the flipped byte is in, and where it starts.
  size_t start = 0, hit = 0;
  while (start + chronolink::kChannelFrameOverhead + frames[hit].payload.size() <= flip_at) {
    start += chronolink::kChannelFrameOverhead + frames[hit].payload.size();
    ++hit;
  }
  if (got.frames.size() != hit) Fail("a frame with a flipped byte was delivered, or one before it lost");
  for (size_t i = 0; i < hit; ++i)
    if (got.frames[i] != frames[i]) Fail("a frame before the flip decodes differently");
  const ChannelResult end = got.last == ChannelResult::kNeedMore ? got.finish : got.last;
  if (end != ChannelResult::kBadMac && end != ChannelResult::kOversize && end != ChannelResult::kTruncated)
    Fail("a flipped stream ends without an error");
}

void PeerBytes(std::string_view bytes) {
  ChannelIdentity self;
  self.cluster_id = kFuzzCluster;
  self.node_id = kFuzzNode;
  for (size_t i = 0; i < self.key.size(); ++i) self.key[i] = static_cast<uint8_t>(i * 7 + 1);

  if (bytes.size() >= chronolink::kChannelHelloSize) {
    ChannelHello hello;
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    const ChannelResult r = chronolink::DecodeChannelHello(
        std::span<const uint8_t, chronolink::kChannelHelloSize>(p, chronolink::kChannelHelloSize), &hello);
    CheckNamed(r);
    if (r == ChannelResult::kOk) {
      std::string again = chronolink::EncodeChannelHello(hello);
      std::string got(bytes.substr(0, chronolink::kChannelHelloSize));
      std::memset(got.data() + 5, 0, 3);  // reserved, ignored
      if (again != got) Fail("a decoded hello does not re-encode to its bytes");
    }
  }

  ChannelSession session(self, ChannelRole::kResponder, std::nullopt, kMaxPayload);
  std::string to_send;
  ChannelResult last = ChannelResult::kNeedMore;
  for (size_t pos = 0; pos < bytes.size() && last == ChannelResult::kNeedMore;) {
    const size_t n = std::min<size_t>(bytes.size() - pos, 1 + (static_cast<uint8_t>(bytes[pos]) % 61));
    session.Feed(AsBytes(bytes.substr(pos, n)));
    pos += n;
    ChannelEvent event;
    last = session.Next(&event, &to_send);
    CheckNamed(last);
    if (last == ChannelResult::kOk || session.established()) Fail("raw bytes established a session");
  }
  if (!to_send.empty() && to_send.size() != chronolink::kChannelAuthSize) Fail("handshake answer not 32 bytes");
  if (!to_send.empty() && !session.peer()) Fail("answered a hello without a peer");
  CheckNamed(session.Finish());
}

}  // namespace

#ifdef CHRONOLINK_FUZZ_CORPUS_GEN

namespace {

bool WriteSeed(const std::string& dir, const char* name, const std::string& bytes) {
  FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  // Mode 0: a stream of three frames (a ping, a window batch, an empty one).
  std::vector<Decoded::Frame> frames = {
      {0, chronolink::kChannelPingType, ""},
      {1, 16, R"([{"node":1,"peer":2,"session":"7","window_start_ns":1,"x0_ns":2,"beta_ns":3.5,)"
              R"("alpha":1e-06,"uncertainty_ns":40.0,"estimator":"max_margin"}])"},
      {2, 17, std::string(3, '\0')}};
  const std::string stream = std::string(1, '\0') + Reseal(frames);
  // Mode 1: two frames to seal, a flip in the second.
  std::string sealed = "\x01";
  sealed += std::string("\x00\x30\x40", 3);  // flip at 48, mask 0x40
  sealed += std::string("\x00\x10\x05" "hello" "\x00\x11\x03" "abc", 15);
  // Mode 2: a peer's hello for our cluster, then its (wrong) MAC.
  ChannelHello hello;
  hello.cluster_id = kFuzzCluster;
  hello.node_id = 3;
  for (size_t i = 0; i < hello.nonce.size(); ++i) hello.nonce[i] = static_cast<uint8_t>(i);
  const std::string peer = "\x02" + chronolink::EncodeChannelHello(hello) + std::string(32, 'm');
  const bool ok = WriteSeed(dir, "stream_three_frames.bin", stream) &&
                  WriteSeed(dir, "sealed_flip.bin", sealed) && WriteSeed(dir, "peer_hello.bin", peer);
  if (!ok) {
    std::fprintf(stderr, "cannot write the seed corpus to %s\n", dir.c_str());
    return 1;
  }
  return 0;
}

#else

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: RawStream(rest); break;
    case 1: {
      FuzzedDataProvider in(data + 1, size - 1);
      SealedStream(&in);
      break;
    }
    default: PeerBytes(rest); break;
  }
  return 0;
}

#endif
