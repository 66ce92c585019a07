#include "agent/export/cluster_metrics.h"

#include <limits>
#include <string>

namespace chronolink {

void AppendClusterMetrics(const ClusterMetricsSnapshot& s, PrometheusText& t) {
  const std::string node = std::to_string(s.node_id);
  const CoordinatorStatus& st = s.status;
  t.Family("chronolink_cluster_leader", "1 when this node leads the cluster", "gauge");
  t.Sample("chronolink_cluster_leader", {{"node", node}, {"backend", st.backend}}, st.is_leader ? 1 : 0);
  t.Family("chronolink_cluster_leader_id", "Id of the current leader as this node knows it (NaN: none)",
           "gauge");
  t.Sample("chronolink_cluster_leader_id", {{"node", node}},
           st.leader ? static_cast<double>(*st.leader) : std::numeric_limits<double>::quiet_NaN());
  t.Family("chronolink_cluster_connected", "1 when the coordination backend is reachable", "gauge");
  t.Sample("chronolink_cluster_connected", {{"node", node}}, st.connected ? 1 : 0);
  t.Family("chronolink_cluster_windows_total", "Window summaries by fate", "counter");
  t.Sample("chronolink_cluster_windows_total", {{"node", node}, {"state", "published"}},
           static_cast<double>(st.windows_published));
  t.Sample("chronolink_cluster_windows_total", {{"node", node}, {"state", "delivered"}},
           static_cast<double>(st.windows_delivered));
  t.Sample("chronolink_cluster_windows_total", {{"node", node}, {"state", "dropped"}},
           static_cast<double>(st.windows_dropped));
  t.Family("chronolink_cluster_refused_total",
           "Coordination values or messages refused: unauthenticated, not their writer's, stale or out of date",
           "counter");
  t.Sample("chronolink_cluster_refused_total", {{"node", node}}, static_cast<double>(st.refused));
  if (!st.refused_by_reason.empty()) {
    t.Family("chronolink_cluster_refused_by_reason_total", "Coordination values or messages refused, by reason",
             "counter");
  }
  for (const auto& [reason, count] : st.refused_by_reason) {
    t.Sample("chronolink_cluster_refused_by_reason_total", {{"node", node}, {"reason", reason}},
             static_cast<double>(count));
  }
  if (!st.channel.empty()) {
    t.Family("chronolink_channel_events_total",
             "Coordination channel connections, handshakes and bytes, by event", "counter");
    for (const auto& [event, count] : st.channel) {
      t.Sample("chronolink_channel_events_total", {{"node", node}, {"event", event}}, static_cast<double>(count));
    }
  }
  t.Family("chronolink_cluster_windows_pending", "Window summaries waiting for delivery", "gauge");
  t.Sample("chronolink_cluster_windows_pending", {{"node", node}}, static_cast<double>(st.windows_pending));
  if (s.latest != nullptr) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    t.Family("chronolink_offset_ns", "Solved offset node - reference at the newest instant (ns)", "gauge");
    for (const NodeSolution& n : s.latest->nodes) {
      t.Sample("chronolink_offset_ns", {{"node", std::to_string(n.node)}}, n.reachable ? n.offset_ns : nan);
    }
    t.Family("chronolink_offset_uncertainty_ns", "One-sigma uncertainty of the solved offset (ns)", "gauge");
    for (const NodeSolution& n : s.latest->nodes) {
      t.Sample("chronolink_offset_uncertainty_ns", {{"node", std::to_string(n.node)}},
               n.reachable ? n.uncertainty_ns : nan);
    }
    t.Family("chronolink_node_reachable", "1 when the node is connected to the reference", "gauge");
    for (const NodeSolution& n : s.latest->nodes) {
      t.Sample("chronolink_node_reachable", {{"node", std::to_string(n.node)}}, n.reachable ? 1 : 0);
    }
    t.Family("chronolink_offsets_instant_seconds", "Reference instant of the newest solution (s)", "gauge");
    t.Sample("chronolink_offsets_instant_seconds", {{"node", node}},
             static_cast<double>(s.latest->reference_instant_ns / 1'000'000) / 1e3);
  }
  t.Family("chronolink_leader_instants_total", "Instants solved by this node as leader", "counter");
  t.Sample("chronolink_leader_instants_total", {{"node", node}, {"kind", "on_time"}},
           static_cast<double>(s.leader.instants_solved));
  t.Sample("chronolink_leader_instants_total", {{"node", node}, {"kind", "recomputed"}},
           static_cast<double>(s.leader.instants_recomputed));
  t.Family("chronolink_leader_solve_seconds", "Duration of the latest solve (s)", "gauge");
  t.Sample("chronolink_leader_solve_seconds", {{"node", node}}, s.leader.last_solve_ms / 1e3);
}

}  // namespace chronolink
