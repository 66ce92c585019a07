// The cluster's Prometheus families (docs/formats.md "Prometheus metrics"):
// the coordinator's state and counters, the newest solution's offsets, the
// leader's solves. A pure rendering of one snapshot the cluster service
// hands over, as agent_metrics.h renders the agent's own.
#pragma once

#include <cstdint>

#include "agent/cluster/cluster_leader.h"
#include "agent/cluster/cluster_messages.h"
#include "agent/coord/coordinator.h"
#include "agent/export/prometheus_text.h"

namespace chronolink {

struct ClusterMetricsSnapshot {
  uint32_t node_id = 0;
  CoordinatorStatus status;
  const OffsetsSnapshot* latest = nullptr;  // the newest solution known; nullptr: none yet
  ClusterLeaderStats leader;
};

void AppendClusterMetrics(const ClusterMetricsSnapshot& s, PrometheusText& t);

}  // namespace chronolink
