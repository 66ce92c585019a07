// The agent's cluster side (docs/cluster.md, docs/leader.md): it owns the
// coordination backend, hands it this node's closed windows, runs the
// leader's solves on their own thread when this node leads (a 10k-node solve
// takes about 100 ms: never on the probe loop), writes offsets.jsonl, and
// keeps the shared-memory clock page up to date from the newest solution.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/cluster/cluster_leader.h"
#include "agent/cluster/timebase_knot_relay.h"
#include "agent/config/agent_config.h"
#include "agent/coord/coordinator.h"
#include "agent/estimate/edge_windows.h"
#include "agent/export/clock_mapping_publisher.h"
#include "agent/export/offsets_jsonl_writer.h"
#include "agent/export/prometheus_text.h"
#include "agent/export/timebase_jsonl_writer.h"
#include "clock/fit_clock.h"

namespace chronolink {

// The leader's options from the agent's config: instants at window
// centres, solved the solve's lag after them, and a takeover that solves
// back over its predecessor's gap (docs/leader.md).
ClusterLeaderOptions LeaderOptionsFor(const AgentConfig& config);

class ClusterService {
 public:
  ClusterService(const AgentConfig& config, const FitClock& clock);
  ~ClusterService();

  // Opens (creates) the clock page. The agent calls it before dropping its
  // privileges, so that a root-started agent's page stays root's and no
  // process of the unprivileged user can write it (docs/formats.md).
  bool OpenClockPage(std::string* error);
  // Opens the clock page if OpenClockPage has not, and starts the backend
  // and the leader thread. With coordination "none" only the page is opened.
  bool Start(std::string* error);
  void Stop();
  bool enabled() const { return coordinator_ != nullptr; }

  // Closed windows of this node, each with its fit clock (nullopt when
  // fitting in REALTIME): the estimated ones of the first configured source
  // class go to the leader, with our REALTIME at their centres.
  void OnWindowsClosed(std::span<const EdgeWindowRecord> records, std::span<const std::optional<FitWindowClock>> fits,
                       uint64_t session);

  // The member list, when it changed since the last call.
  std::optional<Membership> TakeMembershipChange();

  // Publishes the newest solution of this node to the clock page; between
  // solutions, the page follows this node's own discipline since the last
  // one (FollowOwnDiscipline). Call from the probe loop every 100 ms or so.
  void RefreshClockPage();
  // Our clock stepped from before_ns to after_ns: the page is withdrawn
  // now (its mapping would be off by the step) and comes back only from a
  // solution for an instant past the windows the step spoiled.
  void OnClockStep(int64_t before_ns, int64_t after_ns);

  void AppendMetrics(PrometheusText& t) const;
  nlohmann::ordered_json Stats() const;

 private:
  void PublishOnPage(ClockMapping m);
  void FollowOwnDisciplineOnPage();
  void LeaderLoop();
  void LeadOnce();
  void WriteClusterTimebase();
  FileRotation OutputRotation() const;

  const AgentConfig& config_;
  const FitClock& clock_;
  std::unique_ptr<Coordinator> coordinator_;
  ClockMappingPublisher page_;
  bool page_open_ = false;
  uint64_t members_version_ = 0;
  bool members_seen_ = false;
  uint64_t offsets_version_ = 0;
  std::optional<OffsetsSnapshot> latest_;  // probe-loop thread only
  int64_t page_held_until_ns_ = INT64_MIN;  // local clock; probe-loop thread only
  // The page's solved mapping and the discipline it was mapped with, which
  // the page follows until the next (probe-loop thread only).
  struct SolvedOnPage {
    ClockMapping mapping;
    FitDiscipline discipline;
  };
  std::optional<SolvedOnPage> solved_on_page_;

  // Leader thread state.
  ClusterLeader leader_;
  OffsetsJsonlWriter offsets_;
  // Every node's REALTIME/RAW knots from the summaries, beside offsets.jsonl.
  TimebaseKnotRelay timebase_relay_;
  // Whether cluster-timebase.jsonl goes as columns: the nodes of the last
  // snapshot (the leader's thread), and the members registered (the agent's).
  size_t solved_nodes_ = 0;
  std::atomic<size_t> members_count_{0};
  TimebaseJsonlWriter cluster_timebase_;
  std::thread leader_thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  mutable std::mutex stats_mutex_;
  ClusterLeaderStats leader_stats_;
  bool leading_ = false;
  std::atomic<bool> write_failed_{false};
};

}  // namespace chronolink
