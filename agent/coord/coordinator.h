// The coordination layer (docs/cluster.md): one interface, two backends that
// differ in membership and election (static: the cluster file, the lowest
// live id; etcd: leased keys, a transaction election, watches) and share
// the data plane (leader_exchange.h: the authenticated TCP channel to the
// leader). It answers three questions for the agent -- who is in the
// cluster (or, where the leader decides the probe graph, whom this node
// probes), who leads, what did the leader solve for this node -- and
// carries every node's window summaries to the leader. Each backend runs
// its own thread; every method here is thread-safe and never blocks on the
// network, so the probe loop never waits for coordination.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agent/cluster/cluster_messages.h"
#include "agent/coord/coordination_options.h"

namespace chronolink {

struct Membership {
  std::vector<Member> members;  // sorted by id, this node included
  // False: every live member (the agent builds the probe graph from them).
  // True: this node and its neighbours in the probe graph the leader built
  // from every member (etcd: peer_list.h); it probes them all.
  bool neighbours_only = false;
  size_t cluster_size = 0;  // every live member, where known here (0: not known)
};

struct CoordinatorStatus {
  std::string backend;            // "static" or "etcd"
  bool connected = false;         // static: the leader is reachable (or we lead); etcd: etcd answers
  bool is_leader = false;
  std::optional<uint32_t> leader;
  uint64_t leader_changes = 0;
  uint64_t windows_published = 0; // handed to PublishWindows
  uint64_t windows_delivered = 0; // accepted by the leader / stored in etcd
  uint64_t windows_pending = 0;   // waiting for the leader or for etcd
  uint64_t windows_dropped = 0;   // beyond the retention while undeliverable
  uint64_t offsets_received = 0;  // snapshots from the leader
  uint64_t peers_received = 0;    // peer lists from the leader (etcd)
  uint64_t errors = 0;            // backend errors (connection, request, decode)
  // Values or messages refused as unauthenticated, not their writer's,
  // stale or out of date (docs/security.md), in all and by reason.
  uint64_t refused = 0;
  std::map<std::string, uint64_t> refused_by_reason;
  // The coordination channel's connection, handshake and byte counters
  // (docs/coordination-channel.md), by name; both backends.
  std::map<std::string, uint64_t> channel;
};

class Coordinator {
 public:
  virtual ~Coordinator() = default;

  // Starts the backend's thread. Fails only on a local problem (a port in
  // use, a bad endpoint); an unreachable leader or etcd is retried forever.
  virtual bool Start(std::string* error) = 0;
  virtual void Stop() = 0;

  // The members this node needs to know, and a version that changes
  // whenever they do.
  virtual Membership Members(uint64_t* version) const = 0;

  // Closed windows of this node, for the leader. Never blocks; delivery is
  // retried until the retention passes.
  virtual void PublishWindows(std::span<const WindowSummary> windows) = 0;

  virtual bool IsLeader() const = 0;
  // Leader only: every summary received since the last call (this node's
  // own included; duplicates possible).
  virtual std::vector<WindowSummary> TakeLeaderInbox() = 0;
  // Leader only: a solved instant, for every member.
  virtual void PublishOffsets(const OffsetsSnapshot& snapshot) = 0;

  // The newest snapshot known, and a version that changes with it: from the
  // leader, this node's row only; our own, whole, when leading.
  virtual std::optional<OffsetsSnapshot> LatestOffsets(uint64_t* version) const = 0;

  virtual CoordinatorStatus Status() const = 0;
};

// The backend the options name, or nullptr for "none".
std::unique_ptr<Coordinator> MakeCoordinator(const CoordinationOptions& options);

}  // namespace chronolink
