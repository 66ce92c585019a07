// Encoder/decoder of probe wire format v1: fixed size, network byte order,
// authenticated with a keyed BLAKE2b MAC (libsodium crypto_generichash) under
// the cluster key. The decoder trusts nothing: every rejection is counted by
// reason. Layout in docs/protocol.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "agent/wire/cluster_key.h"
#include "agent/wire/probe_message.h"

namespace chronolink {

constexpr uint32_t kProbeMagic = 0x43484C4B;  // "CHLK"
constexpr uint8_t kProbeVersion = 1;
constexpr size_t kProbeWireSize = 144;
constexpr size_t kProbeMacSize = 16;
// The pilot: the first 16 bytes of a probe header with type 4 and no MAC,
// sent just before each forward pair so that the pair finds the path awake
// (docs/protocol.md "Pilot"). It carries nothing the receiver trusts or
// uses; the receiver only counts it.
constexpr size_t kPilotWireSize = 16;
constexpr uint8_t kPilotType = 4;

enum class DecodeResult : uint8_t {
  kOk = 0,
  kBadLength,
  kBadMagic,
  kBadVersion,
  kUnknownType,
  kWrongCluster,
  kBadMac,
  kBadField,  // authentic but inconsistent (index > 1, unknown stamp source, ...)
  kCount
};
std::string_view DecodeResultName(DecodeResult r);

struct DecodeStats {
  std::array<uint64_t, static_cast<size_t>(DecodeResult::kCount)> counts{};
  void Count(DecodeResult r) { ++counts[static_cast<size_t>(r)]; }
  uint64_t rejected() const;
};

// Test-only: recomputes the MAC of an encoded packet over bytes [0, 128)
// under `key`, so tests and the fuzzer can forge authentic packets with
// tampered content. Production code has no use for it.
void SealForTest(std::span<uint8_t, kProbeWireSize> packet, const ClusterKey& key);

class ProbeCodec {
 public:
  ProbeCodec(uint32_t cluster_id, const ClusterKey& key);

  // Writes all 144 bytes, MAC included. The cluster id on the wire is the
  // codec's (msg.cluster_id is ignored); reserved bytes are zero. Encode does
  // not validate msg: a message the decoder would refuse (index > 1, unknown
  // flag bits, bad stamp sources) encodes, and is refused at the receiver.
  void Encode(const ProbeMessage& msg, std::span<uint8_t, kProbeWireSize> out) const;
  // Checks in the order of DecodeResult; only kOk writes *out (which may be
  // null to validate only). Decoded cluster_id is the codec's.
  DecodeResult Decode(std::span<const uint8_t> in, ProbeMessage* out) const;

  // The pilot datagram of `sender_node` in this cluster.
  void EncodePilot(uint32_t sender_node, std::span<uint8_t, kPilotWireSize> out) const;
  // True, with the (unauthenticated) sender id, for a pilot of this
  // cluster: 16 bytes, magic, version, type 4, zero flags, this cluster id.
  // Anything else is for Decode to refuse.
  bool DecodePilot(std::span<const uint8_t> in, uint32_t* sender_node) const;

  uint32_t cluster_id() const { return cluster_id_; }

 private:
  uint32_t cluster_id_;
  ClusterKey key_;
};

}  // namespace chronolink
