// The agent's own Prometheus families (docs/formats.md "Prometheus
// metrics"): per edge the latest closed window's estimate, per peer the
// probe counters and cadence, and the node's drop, stamp and window
// counters. A pure rendering of one snapshot the runtime hands over; the
// cluster service appends its own families, and the runtime the tap's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/estimate/edge_windows.h"
#include "agent/export/prometheus_text.h"
#include "agent/probe/probe_engine.h"

namespace chronolink {

struct AgentMetricsSnapshot {
  uint32_t node_id = 0;
  // The latest closed window of each (peer, source class).
  const std::map<std::pair<uint32_t, SourceClass>, EdgeWindowRecord>* last_records = nullptr;
  EngineCounters counters;
  std::map<uint32_t, PeerCounters> peers;
  std::map<uint32_t, int64_t> probe_interval_ns;  // per probed peer; absent or 0: not probed
  int64_t windows_written = 0;
  uint64_t clock_steps = 0;
  // Requests the metrics HTTP server refused, by reason (MetricsRefusalName).
  std::vector<std::pair<std::string, uint64_t>> metrics_requests_refused;
};

void AppendAgentMetrics(const AgentMetricsSnapshot& s, PrometheusText& t);

}  // namespace chronolink
