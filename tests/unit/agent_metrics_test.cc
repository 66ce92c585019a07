// The agent's Prometheus families rendered from one snapshot: what a
// scrape shows for a fitted window, an unfitted one, and the counters.
#include "agent/export/agent_metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace chronolink {
namespace {

EdgeWindowRecord Window(uint32_t peer, bool fitted) {
  EdgeWindowRecord r;
  r.node = 1;
  r.peer = peer;
  r.window_end_ns = 1'795'000'002'000'000'000;
  r.fit_start_ns = r.window_end_ns - 7'000'000'000;
  r.fit_end_ns = r.window_end_ns + 5'000'000'000;
  r.counts.pairs_sent = 40;
  r.estimate.estimator = fitted ? EstimatorKind::kMaxMargin : EstimatorKind::kNone;
  r.estimate.fit.ok = fitted;
  r.estimate.fit.beta_ns = 3'700'012.5;
  r.estimate.fit.alpha = 45e-6;
  r.estimate.pure_forward = 10;
  r.estimate.pure_reverse = 30;
  r.sigma_ns = fitted ? 7.5 : 0;
  return r;
}

std::string Render(const AgentMetricsSnapshot& s) {
  PrometheusText t;
  AppendAgentMetrics(s, t);
  return t.str();
}

TEST(AgentMetrics, AFittedWindowShowsItsEstimateAndAnUnfittedOneNaN) {
  std::map<std::pair<uint32_t, SourceClass>, EdgeWindowRecord> last;
  last[{2, SourceClass::kKernel}] = Window(2, true);
  last[{3, SourceClass::kKernel}] = Window(3, false);
  AgentMetricsSnapshot s;
  s.node_id = 1;
  s.last_records = &last;
  const std::string text = Render(s);
  const std::string edge2 = "{node=\"1\",peer=\"2\",source=\"kernel\",estimator=\"max_margin\"}";
  EXPECT_NE(text.find("chronolink_edge_offset_ns" + edge2 + " 3700012.5"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_edge_drift_ppm" + edge2 + " 45"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_edge_sigma_ns" + edge2 + " 7.5"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_edge_fit_span_seconds" + edge2 + " 12"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_edge_pure_pair_ratio{node=\"1\",peer=\"2\",source=\"kernel\",estimator="
                      "\"max_margin\",direction=\"reverse\"} 0.75"),
            std::string::npos)
      << text;
  const std::string edge3 = "{node=\"1\",peer=\"3\",source=\"kernel\",estimator=\"none\"}";
  EXPECT_NE(text.find("chronolink_edge_offset_ns" + edge3 + " NaN"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_edge_sigma_ns" + edge3 + " NaN"), std::string::npos) << text;
}

TEST(AgentMetrics, OnlyProbedPeersHaveAnIntervalAndEveryPeerItsCounters) {
  std::map<std::pair<uint32_t, SourceClass>, EdgeWindowRecord> none;
  AgentMetricsSnapshot s;
  s.node_id = 4;
  s.last_records = &none;
  s.peers[5].packets_sent = 100;
  s.peers[6].packets_received = 7;
  s.peers[6].peer_clock_remaps = 1;
  s.probe_interval_ns[5] = 50'000'000;
  s.probe_interval_ns[6] = 0;  // answers 6, does not probe it
  s.counters.not_for_us = 3;
  s.windows_written = 12;
  s.clock_steps = 1;
  const std::string text = Render(s);
  EXPECT_NE(text.find("chronolink_probe_interval_seconds{node=\"4\",peer=\"5\"} 0.05"), std::string::npos) << text;
  EXPECT_EQ(text.find("chronolink_probe_interval_seconds{node=\"4\",peer=\"6\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_packets_sent_total{node=\"4\",peer=\"5\"} 100"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_packets_received_total{node=\"4\",peer=\"6\"} 7"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_peer_clock_remaps_total{node=\"4\",peer=\"6\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_peer_clock_remaps_total{node=\"4\",peer=\"5\"} 0"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_datagrams_dropped_total{node=\"4\",reason=\"not_for_us\"} 3"), std::string::npos)
      << text;
  EXPECT_NE(text.find("chronolink_windows_written_total{node=\"4\"} 12"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_clock_steps_total{node=\"4\"} 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("chronolink_edge_offset_ns{"), std::string::npos) << "no window closed yet: no sample";
}

}  // namespace
}  // namespace chronolink
