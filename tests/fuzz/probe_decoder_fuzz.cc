// libFuzzer target for the probe decoder (wire format v1).
//
// Each input is decoded twice:
//  1. as received: exercises length, magic, version, type, cluster and MAC
//     checks (a mutated packet almost never carries a valid MAC);
//  2. padded or cut to 144 bytes and re-MACed under the fuzz key
//     (SealForTest): the field checks behind the MAC, which an attacker
//     without the key never reaches but a buggy peer with the key does.
// Invariants: no crash or sanitizer report; the result is a known reason;
// whatever decodes kOk satisfies every field rule and re-encodes to exactly
// the same bytes (the encoding is canonical), which decode again to the same
// message. A pilot (16 bytes) that decodes re-encodes to its bytes. The
// input is also fed to ParseClusterKeyHex.
//
// Built with -DCHRONOLINK_FUZZ_CORPUS_GEN the same file is a small program
// that writes the seed corpus (valid packets under the fuzz key) into a
// directory: `probe_corpus_gen tests/fuzz/corpus/probe_decoder`.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "agent/wire/probe_codec.h"

namespace {

using chronolink::ClusterKey;
using chronolink::DecodeResult;
using chronolink::EchoedStamp;
using chronolink::kProbeWireSize;
using chronolink::MessageType;
using chronolink::ProbeCodec;
using chronolink::ProbeMessage;
using chronolink::ProbeStamp;
using chronolink::StampSource;

// Fixed fuzz key and cluster: the seed corpus is encoded under them.
constexpr uint32_t kFuzzCluster = 0x00C10C4B;

ClusterKey FuzzKey() {
  ClusterKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(0x5A ^ (i * 13));
  return k;
}

const ProbeCodec& Codec() {
  static const ProbeCodec codec(kFuzzCluster, FuzzKey());
  return codec;
}

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "probe_decoder_fuzz invariant violated: %s\n", what);
  std::abort();
}

bool SameStamp(const ProbeStamp& a, const ProbeStamp& b) {
  return a.ns == b.ns && a.source == b.source;
}

bool SameMessage(const ProbeMessage& a, const ProbeMessage& b) {
  bool same = a.type == b.type && a.flags == b.flags && a.cluster_id == b.cluster_id &&
              a.sender_node == b.sender_node && a.receiver_node == b.receiver_node &&
              a.sender_epoch == b.sender_epoch && a.echo_epoch == b.echo_epoch && a.seq == b.seq &&
              a.index == b.index && a.prev_tx_seq == b.prev_tx_seq && a.remap == b.remap;
  for (int i = 0; i < 2; ++i) {
    same = same && SameStamp(a.echo_rx[i].kernel, b.echo_rx[i].kernel) &&
           SameStamp(a.echo_rx[i].user, b.echo_rx[i].user) &&
           SameStamp(a.prev_tx[i].kernel, b.prev_tx[i].kernel) &&
           SameStamp(a.prev_tx[i].user, b.prev_tx[i].user);
  }
  return same;
}

void CheckStamp(const ProbeStamp& s, bool user_slot) {
  const auto v = static_cast<int>(s.source);
  if (v < 0 || v >= chronolink::kNumStampSources) Fail("stamp source out of range");
  if (s.source == StampSource::kNone && s.ns != 0) Fail("absent stamp with a time");
  if (user_slot && s.source != StampSource::kNone && s.source != StampSource::kUserspace)
    Fail("kernel source in a user slot");
  if (!user_slot && s.source == StampSource::kUserspace) Fail("userspace source in a kernel slot");
}

void CheckAccepted(std::span<const uint8_t> in, const ProbeMessage& m) {
  const auto t = static_cast<uint8_t>(m.type);
  if ((t < 1 || t > 3) && m.type != chronolink::MessageType::kClockRemap) Fail("unknown type accepted");
  if (m.type == chronolink::MessageType::kClockRemap) {
    // Only the header and the remap: no flag, no stamp, a numbered remap
    // whose rates stay within 10 %.
    if (m.flags != 0 || m.index != 0 || m.seq == 0 || m.prev_tx_seq != 0) Fail("clock remap with probe fields");
    for (const int64_t r : {m.remap.rate_before_fine, m.remap.rate_after_fine}) {
      if (r < -100'000'000'000'000 || r > 100'000'000'000'000) Fail("clock remap rate past 10 %");
    }
  }
  if (m.index > 1) Fail("index > 1 accepted");
  if ((m.flags & ~chronolink::kKnownFlags) != 0) Fail("unknown flag accepted");
  if (m.cluster_id != kFuzzCluster) Fail("foreign cluster accepted");
  for (int i = 0; i < 2; ++i) {
    CheckStamp(m.echo_rx[i].kernel, false);
    CheckStamp(m.echo_rx[i].user, true);
    CheckStamp(m.prev_tx[i].kernel, false);
    CheckStamp(m.prev_tx[i].user, true);
  }
  std::array<uint8_t, kProbeWireSize> again{};
  Codec().Encode(m, again);
  if (in.size() != again.size() || std::memcmp(in.data(), again.data(), again.size()) != 0)
    Fail("accepted packet does not re-encode to the same bytes");
  ProbeMessage m2;
  if (Codec().Decode(again, &m2) != DecodeResult::kOk) Fail("re-encoded packet refused");
  if (!SameMessage(m, m2)) Fail("re-encoded packet decodes differently");
}

void DecodeOne(std::span<const uint8_t> in) {
  ProbeMessage m;
  const DecodeResult r = Codec().Decode(in, &m);
  if (static_cast<size_t>(r) >= static_cast<size_t>(DecodeResult::kCount))
    Fail("result out of range");
  if (chronolink::DecodeResultName(r) == "unknown") Fail("unnamed result");
  if (r == DecodeResult::kOk) CheckAccepted(in, m);
}

#ifdef CHRONOLINK_FUZZ_CORPUS_GEN

EchoedStamp Stamp(int64_t k, StampSource ks, int64_t u) {
  EchoedStamp e;
  e.kernel = {k, ks};
  e.user = {u, StampSource::kUserspace};
  return e;
}

bool WriteSeed(const std::string& dir, const char* name, const ProbeMessage& m) {
  std::array<uint8_t, kProbeWireSize> p{};
  Codec().Encode(m, p);
  ProbeMessage check;
  if (Codec().Decode(p, &check) != DecodeResult::kOk) return false;
  DecodeOne(p);  // the fuzzer's invariants hold for every seed
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(p.data(), 1, p.size(), f) == p.size();
  return std::fclose(f) == 0 && ok;
}

#endif

}  // namespace

#ifdef CHRONOLINK_FUZZ_CORPUS_GEN

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t t0 = 1'700'000'000'000'000'000;

  ProbeMessage first;  // first forward pair of a session: nothing to echo yet
  first.type = MessageType::kForward;
  first.sender_node = 1;
  first.receiver_node = 2;
  first.sender_epoch = 0x1111222233334444ull;
  first.seq = 1;

  ProbeMessage fwd = first;  // forward index 1 with the previous pair's tx stamps
  fwd.flags = chronolink::kFlagHasPrevTx;
  fwd.echo_epoch = 0x5555666677778888ull;
  fwd.seq = 42;
  fwd.index = 1;
  fwd.prev_tx_seq = 41;
  fwd.prev_tx[0] = Stamp(t0, StampSource::kSocketSoftware, t0 - 3'000);
  fwd.prev_tx[1] = Stamp(t0 + 100'000, StampSource::kSocketSched, t0 + 97'000);

  ProbeMessage rev;  // reverse index 0: rx of forward 42 at B, B's previous tx
  rev.type = MessageType::kReverse;
  rev.flags = chronolink::kFlagHasEchoRx | chronolink::kFlagHasPrevTx;
  rev.sender_node = 2;
  rev.receiver_node = 1;
  rev.sender_epoch = 0x5555666677778888ull;
  rev.echo_epoch = 0x1111222233334444ull;
  rev.seq = 42;
  rev.index = 0;
  rev.echo_rx[0] = Stamp(t0 + 5'000, StampSource::kHardware, t0 + 9'000);
  rev.echo_rx[1] = EchoedStamp{};  // index 1 never arrived
  rev.prev_tx_seq = 41;
  rev.prev_tx[0] = Stamp(t0 - 900'000, StampSource::kBpfTc, t0 - 903'000);
  rev.prev_tx[1] = Stamp(-5, StampSource::kBpfXdp, -8);

  ProbeMessage fin = rev;  // follow-up at shutdown
  fin.type = MessageType::kFollowUp;
  fin.flags = chronolink::kFlagHasPrevTx | chronolink::kFlagFinal;
  fin.echo_rx[0] = EchoedStamp{};
  fin.prev_tx_seq = 42;

  ProbeMessage remap;  // a fit clock's new rate, told to the peer
  remap.type = MessageType::kClockRemap;
  remap.sender_node = 1;
  remap.receiver_node = 2;
  remap.sender_epoch = 0x1111222233334444ull;
  remap.seq = 1;
  remap.remap = {t0, -9'123'456'789, -46'530'000'001};

  const bool ok = WriteSeed(dir, "clock_remap.bin", remap) && WriteSeed(dir, "forward_first.bin", first) &&
                  WriteSeed(dir, "forward_prev_tx.bin", fwd) && WriteSeed(dir, "reverse_echo.bin", rev) &&
                  WriteSeed(dir, "followup_final.bin", fin);
  if (!ok) {
    std::fprintf(stderr, "cannot write the seed corpus to %s\n", dir.c_str());
    return 1;
  }
  return 0;
}

#else

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  DecodeOne(in);
  // A pilot is 16 bytes and never a probe message; one that decodes
  // re-encodes to exactly its bytes.
  uint32_t pilot_sender = 0;
  if (Codec().DecodePilot(in, &pilot_sender)) {
    if (size != chronolink::kPilotWireSize) Fail("a pilot of the wrong size decoded");
    std::array<uint8_t, chronolink::kPilotWireSize> again{};
    Codec().EncodePilot(pilot_sender, again);
    if (std::memcmp(again.data(), data, size) != 0) Fail("a pilot does not re-encode to its bytes");
    if (Codec().Decode(in, nullptr) == DecodeResult::kOk) Fail("a pilot decoded as a probe message");
  }

  std::array<uint8_t, kProbeWireSize> sealed{};
  std::memcpy(sealed.data(), data, size < sealed.size() ? size : sealed.size());
  chronolink::SealForTest(sealed, FuzzKey());
  DecodeOne(sealed);

  ClusterKey key{};
  std::string error;
  if (!chronolink::ParseClusterKeyHex(
          std::string_view(reinterpret_cast<const char*>(data), size), &key, &error) &&
      error.empty())
    Fail("key parse failed without a message");
  return 0;
}

#endif
