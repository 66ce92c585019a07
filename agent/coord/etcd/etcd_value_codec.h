// Every value the etcd backend keeps under its prefix, written sealed
// (etcd_value_seal.h) and read back only when it proves who wrote it, under
// which lease, and that it is not stale (docs/security.md "etcd"):
//   members/<id>   writer = id; bound to the writer's member lease (term)
//   leader         body = writer; bound to the leader's member lease (term)
//   graph          sealed by the leader (for people; no agent reads it)
// (Window summaries and offsets travel over the coordination channel, not
// through etcd: leader_exchange.h.)
// A value bound to the lease it names dies with that lease: an old value
// replayed after its writer left can only be put back without it, and is
// refused. What is refused is counted by reason and logged (EtcdRefusalLog).
//
// Thread-safe: sealing takes a sequence from an atomic counter; opening is
// const.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "agent/coord/coordinator.h"
#include "agent/coord/etcd/etcd_gateway.h"
#include "agent/coord/etcd/etcd_value_seal.h"

namespace chronolink {

enum class EtcdRefusal : uint8_t {
  kUnsealed = 0,  // not sealed: written by something that is not chronolink with the key
  kBadMac,        // sealed, but the MAC fails: forged, damaged, or another cluster's key
  kWrongWriter,   // authentic, but its writer may not write this key
  kNotLeaseBound, // authentic, but not bound to the lease it names (a replay)
  kMalformed,     // authentic, but the body does not decode
  kCount
};
std::string_view EtcdRefusalName(EtcdRefusal r);

// Who leads, as the leader key proves it.
struct LeaderClaim {
  uint32_t id = 0;
  int64_t term = 0;  // the leader's member lease
  friend bool operator==(const LeaderClaim&, const LeaderClaim&) = default;
};

class EtcdValueCodec {
 public:
  // prefix: the backend's key prefix; self: this node's id (the writer).
  EtcdValueCodec(const ClusterKey& key, std::string prefix, uint32_t self);

  std::string MembersPrefix() const { return prefix_ + "members/"; }
  std::string MemberKey(uint32_t id) const { return MembersPrefix() + std::to_string(id); }
  std::string LeaderKey() const { return prefix_ + "leader"; }
  std::string GraphKey() const { return prefix_ + "graph"; }
  // The id a members/<id> key names; nullopt for any other key.
  std::optional<uint32_t> MemberIdOf(std::string_view key) const;

  // Values of this node, bound to `lease` (the term they name); now_ns is
  // CLOCK_REALTIME.
  std::string SealMember(const Member& self, int64_t lease, int64_t now_ns);
  std::string SealLeader(int64_t lease, int64_t now_ns);
  std::string SealGraph(std::string_view body, int64_t lease, int64_t now_ns);

  // Readers: nullopt when the value is accepted (and *out filled).
  std::optional<EtcdRefusal> OpenMember(const EtcdKeyValue& kv, uint32_t id, Member* out) const;
  std::optional<EtcdRefusal> OpenLeader(const EtcdKeyValue& kv, LeaderClaim* out) const;

 private:
  std::string SealNow(const std::string& key, int64_t lease, uint64_t seq, int64_t now_ns, std::string_view body);
  // Opens a value that must be bound to the lease it names.
  std::optional<EtcdRefusal> OpenBound(const EtcdKeyValue& kv, SealHeader* header, std::string_view* body) const;

  const EtcdValueSeal seal_;
  const std::string prefix_;
  const uint32_t self_;
  std::atomic<uint64_t> seq_{0};
};

// Counts refusals by reason and logs them, at most once a minute per
// reason (an attacker can write many values; the log must stay readable).
// Thread-safe.
class EtcdRefusalLog {
 public:
  void Note(EtcdRefusal reason, std::string_view key, int64_t now_ns);
  std::array<uint64_t, static_cast<size_t>(EtcdRefusal::kCount)> counts() const;
  uint64_t total() const;

 private:
  mutable std::mutex mutex_;
  std::array<uint64_t, static_cast<size_t>(EtcdRefusal::kCount)> counts_{};
  std::array<int64_t, static_cast<size_t>(EtcdRefusal::kCount)> last_logged_ns_{};
  std::array<uint64_t, static_cast<size_t>(EtcdRefusal::kCount)> unlogged_{};
};

}  // namespace chronolink
