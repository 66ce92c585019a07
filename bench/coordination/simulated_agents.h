// Thousands of agents' coordination clients in one process, for the
// coordination load bench (docs/PERFORMANCE.md §15). Each simulated node
// does against etcd and the leader what an agent's EtcdCoordinator does,
// with the agent's own code where it matters:
// - registers members/<id> sealed by EtcdValueCodec under a lease of
//   --member-lease-ttl-s, and keeps it alive every half of it;
// - follows the leader key (one watch shared by all simulated nodes: a
//   watch costs etcd no writes, and thousands of watch streams would cost
//   this process threads, not etcd), reads the leader's registration once
//   per term, each node for itself (kLeaderReaders at a time), and only
//   then dials the leader;
// - runs its own SecureChannelHub (its own node id, its own source address
//   127.x.y.z, as separate hosts would) and its own LeaderExchange: window
//   summaries up, its own solution and its peers down, resent in full to a
//   new leader. Like an agent it watches no members: its peers come from
//   the leader, and are checked against the bench's probe graph.
// No probing: summaries come from WindowSummarySource at each window's
// close on the node's clock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/coord/etcd/etcd_value_codec.h"
#include "agent/coord/etcd/etcd_watcher.h"
#include "agent/coord/leader_exchange.h"
#include "agent/coord/secure_channel.h"
#include "bench/coordination/window_summaries.h"

namespace chronolink::bench {

// The bench's cluster, as its real agents are started into it.
inline constexpr char kBenchEtcdPrefix[] = "/bench/";
inline constexpr uint32_t kBenchClusterId = 7;
inline constexpr uint16_t kSimulatedProbePort = 7319;

// Each simulated node's own loopback address, as separate hosts have their
// own: the leader's channel bounds unauthenticated connections per address.
std::string AddressOf(uint32_t id);
// A simulated node as it registers in etcd (and as peer lists name it).
Member SimulatedMember(uint32_t id);

// The agent's own longest fit span unless told (--fit-span-max-s), in s.
double DefaultFitSpanMaxS();

// When an agent whose longest fit span is fit_span_max_s records a window:
// this long after the window's end, before its grace (docs/estimator.md §10).
inline int64_t RecordLagNs(double fit_span_max_s, int64_t window_ns) {
  const auto span = static_cast<int64_t>(fit_span_max_s * 1e9 + 0.5);
  return span > window_ns ? (span - window_ns) / 2 : 0;
}

struct SimulatedAgentsOptions {
  std::vector<uint32_t> ids;  // the simulated nodes
  ClusterKey key{};
  uint32_t cluster_id = 0;
  std::string etcd_url;
  std::string etcd_prefix;
  int64_t member_lease_ttl_s = 180;
  std::map<uint32_t, uint16_t> leader_ports;  // the real agents that may lead: their coordination ports
  int threads = 2;
  int64_t window_ns = 2'000'000'000;
  int64_t window_grace_ns = 300'000'000;  // the agent's --window-grace-ms
  // How long after its window's end an agent's record of it comes, before
  // the grace: half its longest fit span past the window (docs/estimator.md
  // §10). Every node's summaries come that late, so the leader's early
  // solve (instant_readiness.h) waits as long.
  int64_t record_lag_ns = RecordLagNs(DefaultFitSpanMaxS(), 2'000'000'000);
  int64_t retention_ns = 120'000'000'000;
  int64_t resend_ns = 0;  // to a new leader; 0: all that is kept
  int registrations_per_second = 2000;
  const WindowSummarySource* summaries = nullptr;
};

// Sets what every simulated node of the bench shares: the bench's cluster
// (id, etcd prefix), and what an agent with the default settings keeps and
// resends to a new leader.
void SetBenchDefaults(SimulatedAgentsOptions* options);

struct SimulatedAgentsTotals {
  uint64_t bytes_sent = 0, bytes_received = 0;  // on the channel, all nodes
  uint64_t links_up = 0;                        // nodes with their link to the leader up
  uint64_t windows_pending = 0;
  uint64_t peers_held = 0;   // nodes holding a peer list from the leader they follow
  uint64_t peers_wrong = 0;  // nodes whose list is not their neighbours in the bench's probe graph
  double pass_ms_max = 0;  // the slowest pass of a thread over its nodes (delays what they send and see)
};

// What the bench asks of its simulated nodes, wherever they run: in this
// process (SimulatedAgents) or split over processes of their own
// (SimulatedAgentProcesses, for more nodes than one process has file
// descriptors for).
class SimulatedNodes {
 public:
  virtual ~SimulatedNodes() = default;
  // Registers every node in etcd, paced; then follows the leader and starts
  // serving the nodes.
  virtual bool Start(std::string* error) = 0;
  // Revokes every lease (a clean stop: the members leave at once).
  virtual void Stop() = 0;
  virtual SimulatedAgentsTotals Totals() const = 0;
  // Per instant T, when (CLOCK_MONOTONIC) each node first held its row of T;
  // taken, so each call returns what came since the last.
  virtual std::map<int64_t, std::vector<int64_t>> TakeDeliveries() = 0;
  // How many nodes' newest solution is from each leader.
  virtual std::map<uint32_t, size_t> HoldingCounts() const = 0;
  virtual std::optional<LeaderClaim> leader() const = 0;

  // Nodes whose newest solution is from `leader`.
  size_t HoldingFrom(uint32_t leader) const {
    const std::map<uint32_t, size_t> counts = HoldingCounts();
    const auto it = counts.find(leader);
    return it == counts.end() ? 0 : it->second;
  }
};

class SimulatedAgents : public SimulatedNodes {
 public:
  explicit SimulatedAgents(SimulatedAgentsOptions options);
  ~SimulatedAgents() override;

  bool Start(std::string* error) override;
  void Stop() override;
  SimulatedAgentsTotals Totals() const override;
  std::map<int64_t, std::vector<int64_t>> TakeDeliveries() override;
  std::map<uint32_t, size_t> HoldingCounts() const override;
  std::optional<LeaderClaim> leader() const override;

 private:
  struct Node;
  void Run(size_t thread_index);
  void Step(Node& n, const std::optional<LeaderClaim>& leader, int64_t now_mono, int64_t now_real);
  int64_t DueNs(const Node& n, int64_t now_mono, int64_t now_real) const;
  void KeepLeasesAlive();
  // Each node's one read of the leader's members/<id> per term, as
  // EtcdCoordinator::LoadLeaderMember does.
  void ReadLeaderRegistrations();
  void OnLeaderEvents(const std::vector<EtcdEvent>& events);
  bool ReadLeader(std::string* error);
  // As EtcdCoordinator keeps its member lease: every half TTL.
  int64_t KeepalivePeriodNs() const;

  SimulatedAgentsOptions options_;
  EtcdValueCodec codec_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<EtcdWatcher> leader_watch_;
  std::atomic<int64_t> pass_ns_max_{0};

  mutable std::mutex mutex_;  // below
  std::optional<LeaderClaim> leader_;
  std::map<int64_t, std::vector<int64_t>> deliveries_;
};

}  // namespace chronolink::bench
