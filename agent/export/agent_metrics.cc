#include "agent/export/agent_metrics.h"

#include <algorithm>
#include <limits>
#include <string>

namespace chronolink {

void AppendAgentMetrics(const AgentMetricsSnapshot& s, PrometheusText& t) {
  const std::string node = std::to_string(s.node_id);
  const EngineCounters& c = s.counters;
  // One group per family (the text format requires it), one sample per
  // (peer, source class) from the latest closed window.
  auto edge_family = [&](const char* name, const char* help, auto value) {
    t.Family(name, help, "gauge");
    for (const auto& [key, r] : *s.last_records) {
      PrometheusText::Labels l = {{"node", node},
                                  {"peer", std::to_string(r.peer)},
                                  {"source", std::string(SourceClassName(r.source_class))},
                                  {"estimator", std::string(EstimatorKindName(r.estimate.estimator))}};
      value(r, l);
    }
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto fitted = [](const EdgeWindowRecord& r) {
    return r.estimate.estimator != EstimatorKind::kNone && r.estimate.fit.ok;
  };
  edge_family("chronolink_edge_offset_ns", "Offset peer - node at the latest window's x0 (ns)",
              [&](const EdgeWindowRecord& r, const PrometheusText::Labels& l) {
                t.Sample("chronolink_edge_offset_ns", l, fitted(r) ? r.estimate.fit.beta_ns : nan);
              });
  edge_family("chronolink_edge_drift_ppm", "Drift d(peer - node)/d(node) of the latest window (ppm)",
              [&](const EdgeWindowRecord& r, const PrometheusText::Labels& l) {
                t.Sample("chronolink_edge_drift_ppm", l, fitted(r) ? r.estimate.fit.alpha * 1e6 : nan);
              });
  edge_family("chronolink_edge_uncertainty_ns", "Uncertainty of the latest window's offset (ns)",
              [&](const EdgeWindowRecord& r, const PrometheusText::Labels& l) {
                t.Sample("chronolink_edge_uncertainty_ns", l,
                         fitted(r) ? r.estimate.fit.uncertainty_ns : nan);
              });
  edge_family("chronolink_edge_sigma_ns",
              "One-sigma error of the latest window's offset, what the cluster solve weights by (ns; NaN until "
              "the edge has the history for it)",
              [&](const EdgeWindowRecord& r, const PrometheusText::Labels& l) {
                t.Sample("chronolink_edge_sigma_ns", l, fitted(r) && r.sigma_ns > 0 ? r.sigma_ns : nan);
              });
  edge_family("chronolink_edge_fit_span_seconds",
              "Span of the probes the latest window's fit took (s): chosen per edge, or --fit-span-s",
              [&](const EdgeWindowRecord& r, const PrometheusText::Labels& l) {
                t.Sample("chronolink_edge_fit_span_seconds", l,
                         fitted(r) ? static_cast<double>(r.fit_end_ns - r.fit_start_ns) / 1e9 : nan);
              });
  edge_family("chronolink_edge_pure_pair_ratio", "Pure pairs / pairs sent in the latest window",
              [&](const EdgeWindowRecord& r, PrometheusText::Labels l) {
                const double sent = static_cast<double>(std::max<int64_t>(1, r.counts.pairs_sent));
                l.emplace_back("direction", "forward");
                t.Sample("chronolink_edge_pure_pair_ratio", l, r.estimate.pure_forward / sent);
                l.back().second = "reverse";
                t.Sample("chronolink_edge_pure_pair_ratio", l, r.estimate.pure_reverse / sent);
              });
  edge_family("chronolink_edge_window_end_seconds", "End of the latest window, node clock (s)",
              [&](const EdgeWindowRecord& r, const PrometheusText::Labels& l) {
                t.Sample("chronolink_edge_window_end_seconds", l,
                         static_cast<double>(r.window_end_ns / 1'000'000) / 1e3);
              });
  auto peer_family = [&](const char* name, const char* help, auto field) {
    t.Family(name, help, "counter");
    for (const auto& [peer, pc] : s.peers) {
      t.Sample(name, {{"node", node}, {"peer", std::to_string(peer)}}, static_cast<double>(field(pc)));
    }
  };
  t.Family("chronolink_probe_interval_seconds", "Current probe interval of each probed edge (adaptive cadence)",
           "gauge");
  for (const auto& [peer, interval] : s.probe_interval_ns) {
    if (interval > 0) {
      t.Sample("chronolink_probe_interval_seconds", {{"node", node}, {"peer", std::to_string(peer)}},
               static_cast<double>(interval) / 1e9);
    }
  }
  peer_family("chronolink_packets_sent_total", "Probe packets sent, by peer",
              [](const PeerCounters& pc) { return pc.packets_sent; });
  peer_family("chronolink_packets_received_total", "Authentic probe packets received, by peer",
              [](const PeerCounters& pc) { return pc.packets_received; });
  peer_family("chronolink_pilots_sent_total", "Pilot datagrams sent ahead of forward pairs, by peer",
              [](const PeerCounters& pc) { return pc.pilots_sent; });
  peer_family("chronolink_send_errors_total", "Failed sends, by peer",
              [](const PeerCounters& pc) { return pc.send_errors; });
  peer_family("chronolink_peer_clock_remaps_total",
              "New rates of the peer's fit clock without a step (ClockRemap), once each, by peer",
              [](const PeerCounters& pc) { return pc.peer_clock_remaps; });
  t.Family("chronolink_datagrams_dropped_total", "Datagrams dropped by the decoder or the engine, by reason", "counter");
  for (size_t i = 1; i < c.decode.counts.size(); ++i) {
    t.Sample("chronolink_datagrams_dropped_total",
             {{"node", node}, {"reason", std::string(DecodeResultName(static_cast<DecodeResult>(i)))}},
             static_cast<double>(c.decode.counts[i]));
  }
  t.Sample("chronolink_datagrams_dropped_total", {{"node", node}, {"reason", "not_for_us"}}, static_cast<double>(c.not_for_us));
  t.Sample("chronolink_datagrams_dropped_total", {{"node", node}, {"reason", "unknown_sender"}}, static_cast<double>(c.unknown_sender));
  t.Sample("chronolink_datagrams_dropped_total", {{"node", node}, {"reason", "stale_session"}}, static_cast<double>(c.stale_session));
  t.Sample("chronolink_datagrams_dropped_total", {{"node", node}, {"reason", "retired_session"}}, static_cast<double>(c.retired_session));
  t.Sample("chronolink_datagrams_dropped_total", {{"node", node}, {"reason", "duplicate"}}, static_cast<double>(c.duplicate_datagrams));
  t.Family("chronolink_tap_records_unused_total", "eBPF tap records not used as stamps, by reason", "counter");
  for (const auto& [reason, n] : {std::pair{"unrouted", c.tap_stamps_unrouted},
                                  std::pair{"rx_own_sender", c.tap_rx_own_sender},
                                  std::pair{"tx_not_sent", c.tap_tx_not_sent},
                                  std::pair{"rx_unverified", c.tap_rx_unverified},
                                  std::pair{"rx_late", c.tap_rx_late},
                                  std::pair{"duplicate", c.tap_duplicates},
                                  std::pair{"bucket_full", c.tap_bucket_full}}) {
    t.Sample("chronolink_tap_records_unused_total", {{"node", node}, {"reason", reason}},
             static_cast<double>(n));
  }
  t.Family("chronolink_stamps_total", "Timestamps received, by direction and source", "counter");
  for (int dir = 0; dir < 2; ++dir) {
    for (int src = 1; src < kNumStampSources; ++src) {
      t.Sample("chronolink_stamps_total",
               {{"node", node}, {"direction", dir == 0 ? "rx" : "tx"},
                {"source", std::string(StampSourceName(static_cast<StampSource>(src)))}},
               static_cast<double>(c.stamps[dir][src]));
    }
  }
  t.Family("chronolink_windows_written_total", "Lines written to edges.jsonl", "counter");
  t.Sample("chronolink_windows_written_total", {{"node", node}}, static_cast<double>(s.windows_written));
  t.Family("chronolink_clock_steps_total", "Steps of this node's clock seen (their windows are discarded)", "counter");
  t.Sample("chronolink_clock_steps_total", {{"node", node}}, static_cast<double>(s.clock_steps));
  if (!s.metrics_requests_refused.empty()) {
    t.Family("chronolink_metrics_requests_refused_total",
             "Connections to the metrics port refused (no metrics served), by reason", "counter");
    for (const auto& [reason, n] : s.metrics_requests_refused) {
      t.Sample("chronolink_metrics_requests_refused_total", {{"node", node}, {"reason", reason}},
               static_cast<double>(n));
    }
  }
}

}  // namespace chronolink
