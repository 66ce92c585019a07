// Probe wire format v1. Every field is written and read byte by byte in
// network order; no host struct ever touches the wire. The byte offsets below
// are the contract documented in docs/protocol.md (section "Byte layout").
#include "agent/wire/probe_codec.h"

#include <sodium.h>

#include <cstdlib>
#include <cstring>

namespace chronolink {
namespace {

// Header.
constexpr size_t kOffMagic = 0;          // u32
constexpr size_t kOffVersion = 4;        // u8
constexpr size_t kOffType = 5;           // u8
constexpr size_t kOffFlags = 6;          // u16
constexpr size_t kOffClusterId = 8;      // u32
constexpr size_t kOffSenderNode = 12;    // u32
constexpr size_t kOffReceiverNode = 16;  // u32
constexpr size_t kOffSenderEpoch = 20;   // u64
constexpr size_t kOffEchoEpoch = 28;     // u64
constexpr size_t kOffSeq = 36;           // u64
constexpr size_t kOffIndex = 44;         // u8
constexpr size_t kOffReserved = 45;      // 3 bytes, zero
constexpr size_t kReservedSize = 3;
constexpr size_t kOffPrevTxSeq = 48;     // u64
// Stamps: echo_rx[0], echo_rx[1], prev_tx[0], prev_tx[1], 18 bytes each.
constexpr size_t kOffEchoRx = 56;
constexpr size_t kOffPrevTx = 92;
constexpr size_t kEchoedStampSize = 18;  // kernel ns i64, source u8, user ns i64, source u8
// ClockRemap: at_fit_ns, rate_before_fine, rate_after_fine (i64 each) where
// the stamps go; prev_tx_seq and every byte after them zero.
constexpr size_t kOffRemapAt = 56;
constexpr size_t kOffRemapRateBefore = 64;
constexpr size_t kOffRemapRateAfter = 72;
constexpr size_t kOffRemapEnd = 80;
// A fit clock's rate is REALTIME's mean against RAW: 10 % is past any
// daemon's slew (chronyd's maxslewrate is 8.3 %) and keeps the map's
// arithmetic far from overflow.
constexpr int64_t kMaxRemapRateFine = 100'000'000'000'000;
constexpr size_t kAuthSize = 128;        // MAC covers [0, kAuthSize)
constexpr size_t kOffMac = kAuthSize;

static_assert(kOffPrevTx == kOffEchoRx + 2 * kEchoedStampSize);
static_assert(kOffPrevTx + 2 * kEchoedStampSize == kAuthSize);
static_assert(kAuthSize + kProbeMacSize == kProbeWireSize);
static_assert(kProbeMacSize >= crypto_generichash_BYTES_MIN &&
              kProbeMacSize <= crypto_generichash_BYTES_MAX);
static_assert(kClusterKeySize >= crypto_generichash_KEYBYTES_MIN &&
              kClusterKeySize <= crypto_generichash_KEYBYTES_MAX);


void EnsureSodium() {
  // sodium_init is thread-safe and idempotent; the static makes it once per
  // process. It fails only when the system has no usable randomness source.
  static const int rc = sodium_init();
  if (rc < 0) std::abort();
}

void PutU8(uint8_t* p, uint8_t v) { p[0] = v; }
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

void PutStamp(uint8_t* p, const ProbeStamp& s) {
  PutU64(p, static_cast<uint64_t>(s.ns));
  PutU8(p + 8, static_cast<uint8_t>(s.source));
}

void PutEchoed(uint8_t* p, const EchoedStamp& e) {
  PutStamp(p, e.kernel);
  PutStamp(p + 9, e.user);
}

enum class StampRole { kKernel, kUser };

// Reads one 9-byte stamp; false if it is not a valid stamp for `role`.
bool GetStamp(const uint8_t* p, StampRole role, ProbeStamp* out) {
  const int64_t ns = static_cast<int64_t>(GetU64(p));
  const uint8_t src = p[8];
  if (src >= kNumStampSources) return false;
  const auto source = static_cast<StampSource>(src);
  if (source == StampSource::kNone && ns != 0) return false;
  if (role == StampRole::kKernel && source == StampSource::kUserspace) return false;
  if (role == StampRole::kUser && source != StampSource::kNone &&
      source != StampSource::kUserspace)
    return false;
  out->ns = ns;
  out->source = source;
  // Every stamp on the wire was taken on its sender's node clock.
  out->domain = ClockDomain::kPeerRealtime;
  return true;
}

bool GetEchoed(const uint8_t* p, EchoedStamp* out) {
  return GetStamp(p, StampRole::kKernel, &out->kernel) &&
         GetStamp(p + 9, StampRole::kUser, &out->user);
}

// The body of a ClockRemap: no flag, index 0, zeros around the three fields.
bool DecodeRemap(const uint8_t* p, ProbeMessage* m) {
  if (m->flags != 0 || m->index != 0) return false;
  for (size_t i = kOffPrevTxSeq; i < kAuthSize; ++i) {
    if ((i < kOffRemapAt || i >= kOffRemapEnd) && p[i] != 0) return false;
  }
  m->remap.at_fit_ns = static_cast<int64_t>(GetU64(p + kOffRemapAt));
  m->remap.rate_before_fine = static_cast<int64_t>(GetU64(p + kOffRemapRateBefore));
  m->remap.rate_after_fine = static_cast<int64_t>(GetU64(p + kOffRemapRateAfter));
  for (const int64_t rate : {m->remap.rate_before_fine, m->remap.rate_after_fine}) {
    if (rate < -kMaxRemapRateFine || rate > kMaxRemapRateFine) return false;
  }
  return m->seq > 0;
}

void ComputeMac(const uint8_t* packet, const ClusterKey& key, uint8_t* mac) {
  EnsureSodium();
  crypto_generichash(mac, kProbeMacSize, packet, kAuthSize, key.data(), key.size());
}

}  // namespace

std::string_view DecodeResultName(DecodeResult r) {
  switch (r) {
    case DecodeResult::kOk: return "ok";
    case DecodeResult::kBadLength: return "bad_length";
    case DecodeResult::kBadMagic: return "bad_magic";
    case DecodeResult::kBadVersion: return "bad_version";
    case DecodeResult::kUnknownType: return "unknown_type";
    case DecodeResult::kWrongCluster: return "wrong_cluster";
    case DecodeResult::kBadMac: return "bad_mac";
    case DecodeResult::kBadField: return "bad_field";
    case DecodeResult::kCount: break;
  }
  return "unknown";
}

uint64_t DecodeStats::rejected() const {
  uint64_t sum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (i != static_cast<size_t>(DecodeResult::kOk)) sum += counts[i];
  }
  return sum;
}

void SealForTest(std::span<uint8_t, kProbeWireSize> packet, const ClusterKey& key) {
  ComputeMac(packet.data(), key, packet.data() + kOffMac);
}

ProbeCodec::ProbeCodec(uint32_t cluster_id, const ClusterKey& key)
    : cluster_id_(cluster_id), key_(key) {
  EnsureSodium();
}

void ProbeCodec::Encode(const ProbeMessage& msg, std::span<uint8_t, kProbeWireSize> out) const {
  uint8_t* p = out.data();
  PutU32(p + kOffMagic, kProbeMagic);
  PutU8(p + kOffVersion, kProbeVersion);
  PutU8(p + kOffType, static_cast<uint8_t>(msg.type));
  PutU16(p + kOffFlags, msg.flags);
  // The codec's cluster id, not msg.cluster_id: a codec only ever speaks for
  // its own cluster.
  PutU32(p + kOffClusterId, cluster_id_);
  PutU32(p + kOffSenderNode, msg.sender_node);
  PutU32(p + kOffReceiverNode, msg.receiver_node);
  PutU64(p + kOffSenderEpoch, msg.sender_epoch);
  PutU64(p + kOffEchoEpoch, msg.echo_epoch);
  PutU64(p + kOffSeq, msg.seq);
  PutU8(p + kOffIndex, msg.index);
  std::memset(p + kOffReserved, 0, kReservedSize);
  if (msg.type == MessageType::kClockRemap) {
    std::memset(p + kOffPrevTxSeq, 0, kAuthSize - kOffPrevTxSeq);
    PutU64(p + kOffRemapAt, static_cast<uint64_t>(msg.remap.at_fit_ns));
    PutU64(p + kOffRemapRateBefore, static_cast<uint64_t>(msg.remap.rate_before_fine));
    PutU64(p + kOffRemapRateAfter, static_cast<uint64_t>(msg.remap.rate_after_fine));
  } else {
    PutU64(p + kOffPrevTxSeq, msg.prev_tx_seq);
    for (int i = 0; i < 2; ++i) {
      PutEchoed(p + kOffEchoRx + i * kEchoedStampSize, msg.echo_rx[i]);
      PutEchoed(p + kOffPrevTx + i * kEchoedStampSize, msg.prev_tx[i]);
    }
  }
  ComputeMac(p, key_, p + kOffMac);
}

void ProbeCodec::EncodePilot(uint32_t sender_node, std::span<uint8_t, kPilotWireSize> out) const {
  uint8_t* p = out.data();
  PutU32(p + kOffMagic, kProbeMagic);
  PutU8(p + kOffVersion, kProbeVersion);
  PutU8(p + kOffType, kPilotType);
  PutU16(p + kOffFlags, 0);
  PutU32(p + kOffClusterId, cluster_id_);
  PutU32(p + kOffSenderNode, sender_node);
}

bool ProbeCodec::DecodePilot(std::span<const uint8_t> in, uint32_t* sender_node) const {
  static_assert(kOffSenderNode + 4 == kPilotWireSize);
  if (in.size() != kPilotWireSize) return false;
  const uint8_t* p = in.data();
  if (GetU32(p + kOffMagic) != kProbeMagic || p[kOffVersion] != kProbeVersion || p[kOffType] != kPilotType ||
      GetU16(p + kOffFlags) != 0 || GetU32(p + kOffClusterId) != cluster_id_) {
    return false;
  }
  *sender_node = GetU32(p + kOffSenderNode);
  return true;
}

DecodeResult ProbeCodec::Decode(std::span<const uint8_t> in, ProbeMessage* out) const {
  if (in.size() != kProbeWireSize) return DecodeResult::kBadLength;
  const uint8_t* p = in.data();
  if (GetU32(p + kOffMagic) != kProbeMagic) return DecodeResult::kBadMagic;
  if (p[kOffVersion] != kProbeVersion) return DecodeResult::kBadVersion;
  const uint8_t type = p[kOffType];
  const bool probe =
      type >= static_cast<uint8_t>(MessageType::kForward) && type <= static_cast<uint8_t>(MessageType::kFollowUp);
  if (!probe && type != static_cast<uint8_t>(MessageType::kClockRemap)) return DecodeResult::kUnknownType;
  if (GetU32(p + kOffClusterId) != cluster_id_) return DecodeResult::kWrongCluster;

  uint8_t mac[kProbeMacSize];
  ComputeMac(p, key_, mac);
  if (sodium_memcmp(mac, p + kOffMac, kProbeMacSize) != 0) return DecodeResult::kBadMac;

  // Authentic from here on, but still checked: a peer with the key may run
  // buggy or newer code.
  ProbeMessage m;
  m.type = static_cast<MessageType>(type);
  m.flags = GetU16(p + kOffFlags);
  if ((m.flags & ~kKnownFlags) != 0) return DecodeResult::kBadField;
  m.cluster_id = cluster_id_;
  m.sender_node = GetU32(p + kOffSenderNode);
  m.receiver_node = GetU32(p + kOffReceiverNode);
  m.sender_epoch = GetU64(p + kOffSenderEpoch);
  m.echo_epoch = GetU64(p + kOffEchoEpoch);
  m.seq = GetU64(p + kOffSeq);
  m.index = p[kOffIndex];
  if (m.index > 1) return DecodeResult::kBadField;
  for (size_t i = 0; i < kReservedSize; ++i) {
    if (p[kOffReserved + i] != 0) return DecodeResult::kBadField;
  }
  if (!probe) {
    if (!DecodeRemap(p, &m)) return DecodeResult::kBadField;
    if (out != nullptr) *out = m;
    return DecodeResult::kOk;
  }
  m.prev_tx_seq = GetU64(p + kOffPrevTxSeq);
  for (int i = 0; i < 2; ++i) {
    if (!GetEchoed(p + kOffEchoRx + i * kEchoedStampSize, &m.echo_rx[i]) ||
        !GetEchoed(p + kOffPrevTx + i * kEchoedStampSize, &m.prev_tx[i]))
      return DecodeResult::kBadField;
  }
  if (out != nullptr) *out = m;
  return DecodeResult::kOk;
}

}  // namespace chronolink
