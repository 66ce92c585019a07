// Every value the etcd backend keeps under its prefix, written sealed
// (etcd_value_seal.h) and read back only when it proves who wrote it, under
// which lease, and that it is not stale (docs/security.md "etcd"):
//   members/<id>   writer = id; bound to the writer's member lease (term)
//   leader         body = writer; bound to the leader's member lease (term)
//   offsets/latest writer = the current leader, under its term; its lease
//                  too; reference instant and t_ns near local time
//   windows/<node>/<peer>/<start>/<session>
//                  writer = node = the summary's node; the key is the
//                  summary's own; bound to a lease; x0 near local time
//   graph          sealed by the leader (for people; no agent reads it)
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

#include "agent/cluster/cluster_messages.h"
#include "agent/coord/coordinator.h"
#include "agent/coord/etcd/etcd_gateway.h"
#include "agent/coord/etcd/etcd_value_seal.h"

namespace chronolink {

enum class EtcdRefusal : uint8_t {
  kUnsealed = 0,  // not sealed: written by something that is not chronolink with the key
  kBadMac,        // sealed, but the MAC fails: forged, damaged, or another cluster's key
  kWrongWriter,   // authentic, but its writer may not write this key
  kNotLeaseBound, // authentic, but not bound to the lease it names (a replay)
  kNotLeader,     // authentic offsets from a node that is not the leader of the current term
  kStale,         // authentic, but older than what is held (a replay)
  kOutOfDate,     // dated far from local time (past the retention, or in the future)
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

struct EtcdDateLimits {
  int64_t max_future_ns = 60'000'000'000;  // clocks of one cluster never disagree by a minute
  int64_t max_age_ns = 120'000'000'000;    // windows: the retention
  // Offsets: no older than a clock page would use them (5 windows): an
  // authentic snapshot replayed later is refused, not extrapolated.
  int64_t offsets_max_age_ns = 10'000'000'000;
};

class EtcdValueCodec {
 public:
  // prefix: the backend's key prefix; self: this node's id (the writer).
  EtcdValueCodec(const ClusterKey& key, std::string prefix, uint32_t self, EtcdDateLimits limits);

  std::string MembersPrefix() const { return prefix_ + "members/"; }
  std::string WindowsPrefix() const { return prefix_ + "windows/"; }
  std::string MemberKey(uint32_t id) const { return MembersPrefix() + std::to_string(id); }
  std::string LeaderKey() const { return prefix_ + "leader"; }
  std::string OffsetsKey() const { return prefix_ + "offsets/latest"; }
  std::string WindowKey(const WindowSummary& w) const { return WindowsPrefix() + w.Key(); }
  std::string GraphKey() const { return prefix_ + "graph"; }
  // The id a members/<id> key names; nullopt for any other key.
  std::optional<uint32_t> MemberIdOf(std::string_view key) const;

  // Values of this node, bound to `lease` (the term they name); now_ns is
  // CLOCK_REALTIME.
  std::string SealMember(const Member& self, int64_t lease, int64_t now_ns);
  std::string SealLeader(int64_t lease, int64_t now_ns);
  std::string SealOffsets(const OffsetsSnapshot& s, int64_t lease, int64_t now_ns);
  std::string SealWindow(const WindowSummary& w, int64_t lease, int64_t now_ns);
  std::string SealGraph(std::string_view body, int64_t lease, int64_t now_ns);

  // Readers: nullopt when the value is accepted (and *out filled).
  std::optional<EtcdRefusal> OpenMember(const EtcdKeyValue& kv, uint32_t id, Member* out) const;
  std::optional<EtcdRefusal> OpenLeader(const EtcdKeyValue& kv, LeaderClaim* out) const;
  // `leader`: the current term as the leader key proves it.
  std::optional<EtcdRefusal> OpenOffsets(const EtcdKeyValue& kv, const LeaderClaim& leader, int64_t now_ns,
                                         OffsetsSnapshot* out, SealHeader* header) const;
  std::optional<EtcdRefusal> OpenWindow(const EtcdKeyValue& kv, int64_t now_ns, WindowSummary* out) const;

 private:
  std::string SealNow(const std::string& key, int64_t lease, uint64_t seq, int64_t now_ns, std::string_view body);
  // Opens a value that must be bound to the lease it names.
  std::optional<EtcdRefusal> OpenBound(const EtcdKeyValue& kv, SealHeader* header, std::string_view* body) const;
  bool InDate(int64_t t_ns, int64_t now_ns, int64_t max_age_ns) const;

  const EtcdValueSeal seal_;
  const std::string prefix_;
  const uint32_t self_;
  const EtcdDateLimits limits_;
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
