// Six agents in six network namespaces behind a router, each with its own
// injected clock (offsets over ±50 ms, drifts over ±100 ppm, test-only
// virtual clocks), coordinated through the static backend or a real
// etcd-server running in the router's namespace. The leader's offsets.jsonl
// must match the exact truth within 5 us once 5 windows have passed, and so
// must every node's clock page, read several times over two windows; a
// killed agent must be reported unreachable; a killed leader must be
// replaced; an etcd outage must lose no edge window.
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/integration/cluster_fixture.h"

namespace chronolink::testing {
namespace {

constexpr int kNodes = kMaxNodes;

class ClusterTest : public ClusterFixture {};
class EtcdClusterTest : public EtcdClusterFixture {};

// ---------------------------------------------------------------------------
// Static backend.

TEST_F(ClusterTest, StaticBackendSolvesSixNodesWithinFiveMicroseconds) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(SetUpCluster());
  const double duration = 24;
  StartAll(duration, {"--reference", "1", "--metrics", "127.0.0.1:9319"});
  SleepS(14);
  ASSERT_NO_FATAL_FAILURE(CheckClockPages({2, 3, 4, 5, 6}, 1));  // until about 18.5 s of 24
  // Every agent exports the leader it follows and its own newest solution
  // (the leader sends each node its own); the leader exports every node's.
  const std::string metrics = ScrapeMetrics(3);
  EXPECT_NE(metrics.find("chronolink_cluster_leader{node=\"3\",backend=\"static\"} 0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("chronolink_cluster_leader_id{node=\"3\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("chronolink_node_reachable{node=\"3\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("chronolink_offset_ns{node=\"3\"} "), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("chronolink_offset_ns{node=\"5\"} "), std::string::npos) << metrics;
  const std::string leader_metrics = ScrapeMetrics(1);
  EXPECT_NE(leader_metrics.find("chronolink_cluster_leader{node=\"1\",backend=\"static\"} 1"), std::string::npos);
  EXPECT_NE(leader_metrics.find("chronolink_offset_ns{node=\"5\"} "), std::string::npos) << leader_metrics;
  ASSERT_TRUE(WaitAgents(duration + 20)) << Logs();

  // Node 1 has the lowest id: it leads. (When it stops a moment before the
  // others, node 2 takes over for that moment: a clean handover.)
  EXPECT_TRUE(std::filesystem::exists(OutputDir(1) / "offsets.jsonl")) << Logs();
  const SolvedByInstant solved = ReadOffsets({OutputDir(1) / "offsets.jsonl"});
  const int64_t after_five_windows = NodeClockAt(1, t0_) + 5 * kWindow;
  double worst = 0;
  const int checked = CheckInstants(solved, 1, after_five_windows, INT64_MAX, AllNodes(), {}, &worst);
  EXPECT_GE(checked, 3) << Logs();
  for (const auto& [t, nodes] : solved) {
    for (const auto& [n, s] : nodes) EXPECT_EQ(s.leader, 1u);
  }
  std::printf("static: %d instants after 5 windows, worst |error| %.0f ns\n", checked, worst);
  // The summaries brought every node's timebase knots: the leader mapped
  // back through them, and wrote them beside offsets.jsonl.
  std::set<uint32_t> knots_of;
  for (const nlohmann::json& k : ReadJsonl(OutputDir(1) / "cluster-timebase.jsonl")) {
    EXPECT_EQ(k.at("schema"), "chronolink.timebase.v1");
    knots_of.insert(k.at("node").get<uint32_t>());
  }
  EXPECT_EQ(knots_of.size(), static_cast<size_t>(kNodes)) << "a knot of every node";
  const auto stats = nlohmann::json::parse(std::ifstream(OutputDir(1) / "agent_stats.json"));
  EXPECT_GT(stats["cluster"]["leader_mapped_by_knots"].get<uint64_t>(),
            stats["cluster"]["leader_mapped_by_point"].get<uint64_t>()) << stats["cluster"].dump();
}

TEST_F(ClusterTest, StaticBackendReportsAKilledAgentUnreachable) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(SetUpCluster());
  const double duration = 26;
  StartAll(duration, {"--reference", "1"});
  SleepS(10);
  const int64_t killed_at = RealtimeNowNs();
  KillAgent(pids_by_node_[4]);
  ASSERT_TRUE(WaitAgents(duration + 20)) << Logs();

  const SolvedByInstant solved = ReadOffsets({OutputDir(1) / "offsets.jsonl"});
  const int64_t kill_t = NodeClockAt(1, killed_at);
  std::set<uint32_t> alive = AllNodes();
  alive.erase(4);
  double worst = 0;
  // Before: everyone. After its last windows have aged out of the validity
  // horizon (two windows) and one more: node 4 unreachable, the rest solved.
  EXPECT_GE(CheckInstants(solved, 1, NodeClockAt(1, t0_) + 2 * kWindow, kill_t - kWindow, AllNodes(), {}, &worst), 1);
  const int after = CheckInstants(solved, 1, kill_t + 3 * kWindow + kSecond, INT64_MAX, alive, {4}, &worst);
  EXPECT_GE(after, 2) << Logs();
  std::printf("static, node 4 killed: %d instants after, worst |error| %.0f ns\n", after, worst);
}

TEST_F(ClusterTest, StaticBackendElectsANewLeaderWhenTheLeaderDies) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(SetUpCluster());
  const double duration = 28;
  StartAll(duration, {"--reference", "mean"});
  SleepS(10);
  const int64_t killed_at = RealtimeNowNs();
  KillAgent(pids_by_node_[1]);
  ASSERT_TRUE(WaitAgents(duration + 20)) << Logs();

  const SolvedByInstant before = ReadOffsets({OutputDir(1) / "offsets.jsonl"});
  const SolvedByInstant after = ReadOffsets({OutputDir(2) / "offsets.jsonl"});
  ASSERT_FALSE(before.empty()) << Logs();
  ASSERT_FALSE(after.empty()) << "node 2 never led: " << Logs();
  for (const auto& [t, nodes] : after) {
    for (const auto& [n, s] : nodes) EXPECT_EQ(s.leader, 2u);
  }
  ExpectNoInstantMissing(before, after);
  // Within a few lease periods the mean of the survivors is solved again.
  const int64_t kill_t = NodeClockAt(2, killed_at);  // node 2's clock is within 100 ms of the mean's
  std::set<uint32_t> alive = AllNodes();
  alive.erase(1);
  double worst = 0;
  const int checked = CheckInstants(after, 0, kill_t + 3 * kWindow + kSecond, INT64_MAX, alive, {1}, &worst);
  EXPECT_GE(checked, 2) << Logs();
  std::printf("static, leader killed: node 2 solved %zu instants, %d checked, worst |error| %.0f ns\n",
              after.size(), checked, worst);
}

// ---------------------------------------------------------------------------
// etcd backend: a real etcd-server in the router's namespace, reachable from
// every node through the router.

TEST_F(EtcdClusterTest, EtcdBackendSolvesSixNodesWithinFiveMicroseconds) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(SetUpCluster());
  if (!StartEtcd()) return;
  const double duration = 24;
  StartAll(duration, EtcdArgs("1"));
  SleepS(14);
  ASSERT_NO_FATAL_FAILURE(CheckClockPages(AllNodes(), 1));  // until about 18.5 s of 24
  ASSERT_TRUE(WaitAgents(duration + 20)) << Logs();

  std::vector<std::filesystem::path> files;
  for (int n = 1; n <= kNodes; ++n) {
    if (std::filesystem::exists(OutputDir(n) / "offsets.jsonl")) files.push_back(OutputDir(n) / "offsets.jsonl");
  }
  // One leader while they run; at the end, the agents stopping one after
  // the other hand leadership on (a stopping leader revokes its lease), and
  // the next one may solve the last instants again: every file is checked.
  // Such a leader holds nothing of the nodes already gone, not their knots
  // either, so it cannot map them back to REALTIME and says so
  // (unreachable); the nodes it does map must be right.
  ASSERT_GE(files.size(), 1u) << "no leader: " << Logs();
  const SolvedByInstant solved = ReadOffsets(files);
  const uint32_t running_leader = solved.begin()->second.begin()->second.leader;
  SolvedByInstant by_running_leader, after_it;
  for (const auto& [t, nodes] : solved) {
    for (const auto& [node, s] : nodes) {
      if (s.leader == running_leader) {
        by_running_leader[t][node] = s;
      } else if (s.reachable) {
        after_it[t][node] = s;
      }
    }
  }
  double worst = 0;
  const int64_t from = NodeClockAt(1, t0_) + 5 * kWindow;
  const int checked = CheckInstants(by_running_leader, 1, from, INT64_MAX, AllNodes(), {}, &worst);
  for (const auto& [t, nodes] : after_it) {
    std::set<uint32_t> mapped;
    for (const auto& [node, s] : nodes) mapped.insert(node);
    CheckInstants({{t, nodes}}, 1, from, INT64_MAX, mapped, {}, &worst);
  }
  EXPECT_GE(checked, 3) << Logs();
  std::printf("etcd: %d instants after 5 windows, worst |error| %.0f ns\n", checked, worst);
}

TEST_F(EtcdClusterTest, EtcdBackendElectsANewLeaderWhenTheLeaderDies) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(SetUpCluster());
  if (!StartEtcd()) return;
  const double duration = 30;
  StartAll(duration, EtcdArgs("mean"));
  SleepS(9);
  const std::optional<uint32_t> first = LeaderId();
  ASSERT_TRUE(first.has_value()) << "no leader after 9 s: " << Logs();
  const int64_t killed_at = RealtimeNowNs();
  KillAgent(pids_by_node_[static_cast<int>(*first)]);
  // SIGKILL: no goodbye; the leader key goes when its lease (3 s) expires.
  std::optional<uint32_t> second;
  for (int i = 0; i < 60 && (!second || second == first); ++i) {
    SleepS(0.25);
    second = LeaderId();
  }
  const double took_s = static_cast<double>(RealtimeNowNs() - killed_at) / 1e9;
  ASSERT_TRUE(second.has_value() && second != first) << "no new leader: " << Logs();
  EXPECT_LT(took_s, 4 * 3.0) << "a new leader within a few lease periods";
  ASSERT_TRUE(WaitAgents(duration + 20)) << Logs();

  const SolvedByInstant before = ReadOffsets({OutputDir(static_cast<int>(*first)) / "offsets.jsonl"});
  const SolvedByInstant after = ReadOffsets({OutputDir(static_cast<int>(*second)) / "offsets.jsonl"});
  ASSERT_FALSE(before.empty()) << Logs();
  ASSERT_FALSE(after.empty()) << Logs();
  ExpectNoInstantMissing(before, after);
  std::set<uint32_t> alive = AllNodes();
  alive.erase(*first);
  double worst = 0;
  const int64_t kill_t = NodeClockAt(static_cast<int>(*second), killed_at);
  const int checked = CheckInstants(after, 0, kill_t + 3 * kWindow + kSecond, INT64_MAX, alive, {*first}, &worst);
  EXPECT_GE(checked, 3) << Logs();
  std::printf("etcd, leader %u killed: node %u led after %.1f s; %d instants checked, worst |error| %.0f ns\n",
              *first, *second, took_s, checked, worst);
}

TEST_F(EtcdClusterTest, EtcdOutageLosesNoEdgeWindow) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(SetUpCluster());
  if (!StartEtcd()) return;
  const double duration = 30;
  StartAll(duration, EtcdArgs("1"));
  SleepS(8);
  std::string why;
  etcd_->Stop();
  const int64_t down_at = RealtimeNowNs();
  SleepS(8);  // longer than the lease: every node must rejoin
  ASSERT_TRUE(etcd_->Restart(&why)) << why;
  const int64_t up_at = RealtimeNowNs();
  ASSERT_TRUE(WaitAgents(duration + 20)) << Logs();

  // etcd carries no data: every estimated window went to the leader over
  // the channel, the outage's among them, and none was dropped.
  int windows = 0, during_outage = 0;
  for (int n = 1; n <= kNodes; ++n) {
    for (const auto& r : ReadJsonl(OutputDir(n) / "edges.jsonl")) {
      if (r["timestamp_source"] != "kernel" || r["estimator"] == "none" || r["beta_ns"].is_null()) continue;
      ++windows;
      const int64_t end_real = VirtualClock(clocks_[n - 1]).Invert(r["window_end_ns"].get<int64_t>());
      if (end_real > down_at && end_real < up_at) ++during_outage;
    }
    std::ifstream in(OutputDir(n) / "agent_stats.json");
    const nlohmann::json stats = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(stats.is_discarded()) << "node " << n << ": agent_stats.json";
    const nlohmann::json& cluster = stats["cluster"];
    EXPECT_EQ(cluster.value("windows_dropped", 1u), 0u) << "node " << n << ": " << cluster.dump();
  }
  EXPECT_GE(during_outage, kNodes * 2) << "the outage should span windows of every node";
  // The outage's instants were solved, every node in them: each one's
  // windows reached the leader while etcd was down.
  // The leader solved the outage's instants again once the windows came.
  std::vector<std::filesystem::path> files;
  for (int n = 1; n <= kNodes; ++n) {
    if (std::filesystem::exists(OutputDir(n) / "offsets.jsonl")) files.push_back(OutputDir(n) / "offsets.jsonl");
  }
  ASSERT_FALSE(files.empty()) << Logs();
  const SolvedByInstant solved = ReadOffsets(files);
  double worst = 0;
  const int64_t from = NodeClockAt(1, down_at) + kWindow, to = NodeClockAt(1, up_at) - kWindow;
  const int checked = CheckInstants(solved, 1, from, to, AllNodes(), {}, &worst);
  EXPECT_GE(checked, 2) << Logs();
  std::printf("etcd outage of %.1f s: %d windows (%d during), none dropped; %d outage instants solved, "
              "worst |error| %.0f ns\n",
              static_cast<double>(up_at - down_at) / 1e9, windows, during_outage, checked, worst);
}

}  // namespace
}  // namespace chronolink::testing
