// The cluster's Prometheus families, rendered from a snapshot.
#include "agent/export/cluster_metrics.h"

#include <gtest/gtest.h>

namespace chronolink {
namespace {

TEST(ClusterMetrics, RendersStatusSolutionAndLeaderCounters) {
  ClusterMetricsSnapshot s;
  s.node_id = 2;
  s.status.backend = "etcd";
  s.status.is_leader = true;
  s.status.leader = 2;
  s.status.refused_by_reason["bad_mac"] = 4;
  OffsetsSnapshot latest;
  latest.reference_instant_ns = 1'795'000'000'123'000'000;
  NodeSolution a;
  a.node = 1;
  a.reachable = true;
  a.offset_ns = -1500;
  NodeSolution b;
  b.node = 3;
  b.reachable = false;
  latest.nodes = {a, b};
  s.latest = &latest;
  s.leader.instants_solved = 9;
  PrometheusText t;
  AppendClusterMetrics(s, t);
  const std::string text = t.str();
  EXPECT_NE(text.find("chronolink_cluster_leader{node=\"2\",backend=\"etcd\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_cluster_refused_by_reason_total{node=\"2\",reason=\"bad_mac\"} 4"),
            std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_offset_ns{node=\"1\"} -1500"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_node_reachable{node=\"3\"} 0"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_leader_instants_total{node=\"2\",kind=\"on_time\"} 9"), std::string::npos) << text;
  s.latest = nullptr;
  PrometheusText none;
  AppendClusterMetrics(s, none);
  EXPECT_EQ(none.str().find("chronolink_offset_ns"), std::string::npos) << "no solution, no offsets";
}

}  // namespace
}  // namespace chronolink
