// Coordination channel v1 on the wire. Fields are written byte by byte in
// network order; the offsets are the contract of
// docs/coordination-channel.md. Every MAC comparison is constant time.
#include "agent/coord/channel_frame.h"

#include <sodium.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace chronolink {
namespace {

// Hello.
constexpr size_t kOffMagic = 0;      // u32
constexpr size_t kOffVersion = 4;    // u8, then 3 reserved bytes (zero, ignored)
constexpr size_t kOffCluster = 8;    // u32
constexpr size_t kOffNode = 12;      // u32
constexpr size_t kOffNonce = 16;     // 32 bytes
static_assert(kOffNonce + kChannelNonceSize == kChannelHelloSize);

// Frame header; the payload follows, then the MAC over header and payload.
constexpr size_t kOffLength = 0;     // u32: payload bytes
constexpr size_t kOffSeq = 4;        // u64
constexpr size_t kOffType = 12;      // u16
static_assert(kOffType + 2 == kChannelFrameHeaderSize);

// Domain separation: the cluster key also authenticates probes, so the
// channel's master key hashes a label no probe packet starts with.
constexpr std::string_view kMasterLabel = "chronolink coordination channel v1";
constexpr char kKdfContext[crypto_kdf_CONTEXTBYTES] = {'C', 'L', 'C', 'H', 'A', 'N', 'v', '1'};
enum SubkeyId : uint64_t {
  kInitiatorFrames = 1,
  kResponderFrames = 2,
  kInitiatorAuth = 3,
  kResponderAuth = 4,
};

static_assert(kChannelKeySize == crypto_kdf_KEYBYTES);
static_assert(kClusterKeySize >= crypto_generichash_KEYBYTES_MIN);
static_assert(kChannelFrameMacSize == crypto_verify_16_BYTES);
static_assert(kChannelAuthSize == crypto_verify_32_BYTES);

void EnsureSodium() {
  // Idempotent and thread-safe; fails only without a randomness source.
  static const int rc = sodium_init();
  if (rc < 0) std::abort();
}

void PutU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
uint16_t GetU16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

const uint8_t* Bytes(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// MAC of a frame whose header and payload lie in two places (sealing) or one
// (decoding); streaming avoids copying multi-megabyte payloads.
void FrameMac(const ChannelKey& key, const uint8_t* header, const uint8_t* payload,
              size_t payload_len, uint8_t* mac) {
  crypto_generichash_state st;
  crypto_generichash_init(&st, key.data(), key.size(), kChannelFrameMacSize);
  crypto_generichash_update(&st, header, kChannelFrameHeaderSize);
  crypto_generichash_update(&st, payload, payload_len);
  crypto_generichash_final(&st, mac, kChannelFrameMacSize);
}

}  // namespace

std::string_view ChannelResultName(ChannelResult r) {
  switch (r) {
    case ChannelResult::kOk: return "ok";
    case ChannelResult::kNeedMore: return "need_more";
    case ChannelResult::kBadMagic: return "bad_magic";
    case ChannelResult::kBadVersion: return "bad_version";
    case ChannelResult::kWrongCluster: return "wrong_cluster";
    case ChannelResult::kSelfConnect: return "self_connect";
    case ChannelResult::kUnexpectedPeer: return "unexpected_peer";
    case ChannelResult::kBadAuth: return "bad_auth";
    case ChannelResult::kBadMac: return "bad_mac";
    case ChannelResult::kOversize: return "oversize";
    case ChannelResult::kBadSequence: return "bad_sequence";
    case ChannelResult::kTruncated: return "truncated";
    case ChannelResult::kCount: break;
  }
  return "unknown";
}

std::string EncodeChannelHello(const ChannelHello& hello) {
  std::string out(kChannelHelloSize, '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  PutU32(p + kOffMagic, kChannelMagic);
  p[kOffVersion] = kChannelVersion;
  PutU32(p + kOffCluster, hello.cluster_id);
  PutU32(p + kOffNode, hello.node_id);
  std::memcpy(p + kOffNonce, hello.nonce.data(), kChannelNonceSize);
  return out;
}

ChannelResult DecodeChannelHello(std::span<const uint8_t, kChannelHelloSize> in,
                                 ChannelHello* out) {
  const uint8_t* p = in.data();
  if (GetU32(p + kOffMagic) != kChannelMagic) return ChannelResult::kBadMagic;
  if (p[kOffVersion] != kChannelVersion) return ChannelResult::kBadVersion;
  out->cluster_id = GetU32(p + kOffCluster);
  out->node_id = GetU32(p + kOffNode);
  std::memcpy(out->nonce.data(), p + kOffNonce, kChannelNonceSize);
  return ChannelResult::kOk;
}

ChannelKeys DeriveChannelKeys(const ClusterKey& cluster_key, std::string_view initiator_hello,
                              std::string_view responder_hello, ChannelRole role) {
  EnsureSodium();
  // Master key: both hellos (so both nonces) under the cluster key; every
  // connection and every replayed hello ends up with unrelated keys.
  ChannelKey master{};
  crypto_generichash_state st;
  crypto_generichash_init(&st, cluster_key.data(), cluster_key.size(), master.size());
  crypto_generichash_update(&st, Bytes(kMasterLabel), kMasterLabel.size());
  crypto_generichash_update(&st, Bytes(initiator_hello), initiator_hello.size());
  crypto_generichash_update(&st, Bytes(responder_hello), responder_hello.size());
  crypto_generichash_final(&st, master.data(), master.size());

  auto subkey = [&](uint64_t id) {
    ChannelKey k{};
    crypto_kdf_derive_from_key(k.data(), k.size(), id, kKdfContext, master.data());
    return k;
  };
  const bool initiator = role == ChannelRole::kInitiator;
  ChannelKeys keys;
  keys.send_frame = subkey(initiator ? kInitiatorFrames : kResponderFrames);
  keys.recv_frame = subkey(initiator ? kResponderFrames : kInitiatorFrames);
  keys.send_auth = subkey(initiator ? kInitiatorAuth : kResponderAuth);
  keys.recv_auth = subkey(initiator ? kResponderAuth : kInitiatorAuth);
  sodium_memzero(master.data(), master.size());
  return keys;
}

std::array<uint8_t, kChannelAuthSize> ChannelHandshakeMac(const ChannelKey& auth_key,
                                                          std::string_view initiator_hello,
                                                          std::string_view responder_hello) {
  EnsureSodium();
  std::array<uint8_t, kChannelAuthSize> mac{};
  crypto_generichash_state st;
  crypto_generichash_init(&st, auth_key.data(), auth_key.size(), mac.size());
  crypto_generichash_update(&st, Bytes(initiator_hello), initiator_hello.size());
  crypto_generichash_update(&st, Bytes(responder_hello), responder_hello.size());
  crypto_generichash_final(&st, mac.data(), mac.size());
  return mac;
}

bool FrameSealer::Seal(uint16_t type, std::string_view payload, std::string* out) {
  if (payload.size() > std::numeric_limits<uint32_t>::max()) return false;
  EnsureSodium();
  uint8_t header[kChannelFrameHeaderSize];
  PutU32(header + kOffLength, static_cast<uint32_t>(payload.size()));
  PutU64(header + kOffSeq, next_seq_++);
  PutU16(header + kOffType, type);
  uint8_t mac[kChannelFrameMacSize];
  FrameMac(key_, header, Bytes(payload), payload.size(), mac);
  out->reserve(out->size() + kChannelFrameOverhead + payload.size());
  out->append(reinterpret_cast<const char*>(header), sizeof(header));
  out->append(payload);
  out->append(reinterpret_cast<const char*>(mac), sizeof(mac));
  return true;
}

FrameDecoder::FrameDecoder(const ChannelKey& key, size_t max_payload_bytes)
    : key_(key),
      max_payload_(std::min<size_t>(max_payload_bytes, std::numeric_limits<uint32_t>::max())) {
  EnsureSodium();
}

void FrameDecoder::Feed(std::span<const uint8_t> bytes) {
  if (error_ != ChannelResult::kOk) return;  // a dead stream buffers nothing
  // Drop consumed frames first: this moves only the partial frame after
  // them, so each byte is moved at most once per frame it follows.
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

ChannelResult FrameDecoder::Next(ChannelFrame* out) {
  if (error_ != ChannelResult::kOk) return error_;
  const size_t avail = buf_.size() - pos_;
  if (avail < kChannelFrameHeaderSize) return ChannelResult::kNeedMore;
  const auto* p = reinterpret_cast<const uint8_t*>(buf_.data()) + pos_;
  const uint32_t len = GetU32(p + kOffLength);
  // Before buffering the payload, so a hostile length costs no memory.
  if (len > max_payload_) return Fail(ChannelResult::kOversize);
  const size_t total = kChannelFrameOverhead + len;
  if (avail < total) {
    buf_.reserve(pos_ + total);
    return ChannelResult::kNeedMore;
  }
  const uint8_t* payload = p + kChannelFrameHeaderSize;
  uint8_t mac[kChannelFrameMacSize];
  FrameMac(key_, p, payload, len, mac);
  if (crypto_verify_16(mac, payload + len) != 0) return Fail(ChannelResult::kBadMac);
  // Authentic but not the next one: a frame of this connection replayed or
  // moved by someone who can splice the stream.
  const uint64_t seq = GetU64(p + kOffSeq);
  if (seq != expected_seq_) return Fail(ChannelResult::kBadSequence);
  ++expected_seq_;
  out->seq = seq;
  out->type = GetU16(p + kOffType);
  out->payload = std::string_view(reinterpret_cast<const char*>(payload), len);
  pos_ += total;
  return ChannelResult::kOk;
}

ChannelResult FrameDecoder::Fail(ChannelResult r) {
  error_ = r;
  std::string().swap(buf_);  // the stream is dead: free its bytes now
  pos_ = 0;
  return r;
}

ChannelResult FrameDecoder::Finish() const {
  if (error_ != ChannelResult::kOk) return error_;
  return buffered() > 0 ? ChannelResult::kTruncated : ChannelResult::kOk;
}

ChannelSession::ChannelSession(const ChannelIdentity& self, ChannelRole role,
                               std::optional<uint32_t> expected_peer, size_t max_payload_bytes)
    : self_(self), role_(role), expected_peer_(expected_peer), max_payload_(max_payload_bytes) {
  EnsureSodium();
  ChannelHello hello;
  hello.cluster_id = self.cluster_id;
  hello.node_id = self.node_id;
  randombytes_buf(hello.nonce.data(), hello.nonce.size());
  own_hello_ = EncodeChannelHello(hello);
}

void ChannelSession::Feed(std::span<const uint8_t> bytes) {
  switch (state_) {
    case State::kFailed: return;
    case State::kEstablished: decoder_->Feed(bytes); return;
    default:
      handshake_buf_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
}

ChannelResult ChannelSession::Fail(ChannelResult r) {
  state_ = State::kFailed;
  error_ = r;
  handshake_buf_.clear();
  decoder_.reset();
  return r;
}

ChannelResult ChannelSession::CheckHello(const ChannelHello& hello) const {
  if (hello.cluster_id != self_.cluster_id) return ChannelResult::kWrongCluster;
  if (hello.node_id == self_.node_id) return ChannelResult::kSelfConnect;
  if (expected_peer_ && hello.node_id != *expected_peer_) return ChannelResult::kUnexpectedPeer;
  return ChannelResult::kOk;
}

ChannelResult ChannelSession::OnHello(std::string* to_send) {
  const auto* p = reinterpret_cast<const uint8_t*>(handshake_buf_.data());
  ChannelHello hello;
  ChannelResult r = DecodeChannelHello(std::span<const uint8_t, kChannelHelloSize>(p, kChannelHelloSize), &hello);
  if (r == ChannelResult::kOk) r = CheckHello(hello);
  if (r != ChannelResult::kOk) return r;
  peer_hello_ = handshake_buf_.substr(0, kChannelHelloSize);
  peer_ = hello.node_id;
  const bool initiator = role_ == ChannelRole::kInitiator;
  const std::string& ih = initiator ? own_hello_ : peer_hello_;
  const std::string& rh = initiator ? peer_hello_ : own_hello_;
  keys_ = DeriveChannelKeys(self_.key, ih, rh, role_);
  sealer_ = FrameSealer(keys_.send_frame);
  const auto mac = ChannelHandshakeMac(keys_.send_auth, ih, rh);
  to_send->append(reinterpret_cast<const char*>(mac.data()), mac.size());
  state_ = State::kAwaitAuth;
  return ChannelResult::kOk;
}

ChannelResult ChannelSession::OnAuth(ChannelEvent* event) {
  const bool initiator = role_ == ChannelRole::kInitiator;
  const std::string& ih = initiator ? own_hello_ : peer_hello_;
  const std::string& rh = initiator ? peer_hello_ : own_hello_;
  const auto expected = ChannelHandshakeMac(keys_.recv_auth, ih, rh);
  const auto* got = reinterpret_cast<const uint8_t*>(handshake_buf_.data()) + kChannelHelloSize;
  if (crypto_verify_32(expected.data(), got) != 0) return Fail(ChannelResult::kBadAuth);
  decoder_.emplace(keys_.recv_frame, max_payload_);
  // Frames may have arrived in the same read as the handshake.
  const auto* rest = got + kChannelAuthSize;
  const size_t rest_len = handshake_buf_.size() - kChannelHelloSize - kChannelAuthSize;
  decoder_->Feed(std::span<const uint8_t>(rest, rest_len));
  handshake_buf_.clear();
  handshake_buf_.shrink_to_fit();
  state_ = State::kEstablished;
  event->kind = ChannelEvent::Kind::kEstablished;
  event->peer = *peer_;
  return ChannelResult::kOk;
}

ChannelResult ChannelSession::Next(ChannelEvent* event, std::string* to_send) {
  if (state_ == State::kFailed) return error_;
  if (state_ == State::kAwaitHello) {
    if (handshake_buf_.size() < kChannelHelloSize) return ChannelResult::kNeedMore;
    const ChannelResult r = OnHello(to_send);
    if (r != ChannelResult::kOk) return Fail(r);
  }
  if (state_ == State::kAwaitAuth) {
    if (handshake_buf_.size() < kChannelHelloSize + kChannelAuthSize) return ChannelResult::kNeedMore;
    return OnAuth(event);
  }
  const ChannelResult r = decoder_->Next(&event->frame);
  if (r == ChannelResult::kOk) {
    event->kind = ChannelEvent::Kind::kFrame;
    event->peer = *peer_;
    return r;
  }
  return r == ChannelResult::kNeedMore ? r : Fail(r);
}

ChannelResult ChannelSession::Finish() const {
  switch (state_) {
    case State::kFailed: return error_;
    case State::kEstablished: return decoder_->Finish();
    default: return ChannelResult::kTruncated;
  }
}

bool ChannelSession::Seal(uint16_t type, std::string_view payload, std::string* out) {
  if (state_ != State::kAwaitAuth && state_ != State::kEstablished) return false;
  if (payload.size() > max_payload_) return false;
  return sealer_.Seal(type, payload, out);
}

}  // namespace chronolink
