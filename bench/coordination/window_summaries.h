// Window summaries as agents send them, for the coordination load bench
// (docs/PERFORMANCE.md §15): each node sends one summary per probe-graph
// peer per window, carrying what a real agent's carries -- the estimate,
// the fit clock's point, its anchor and the window's timebase knots -- so
// that the bytes on the wire and the leader's decode, solve and mapping
// work are an agent's. The estimates are drawn around a known truth (each
// node's clock a fixed offset from this machine's REALTIME, noise of a few
// tens of ns): what is measured here is the coordination, not estimation
// (chronolink-sim measures that).
#pragma once

#include <cstdint>
#include <vector>

#include "agent/cluster/cluster_messages.h"
#include "agent/cluster/probe_graph.h"

namespace chronolink::bench {

class WindowSummarySource {
 public:
  // Offsets of the nodes' clocks uniform in ±offset_spread_ns.
  WindowSummarySource(const ProbeGraph& graph, uint64_t seed, double offset_spread_ns = 1e6);

  // Node `node`'s summaries of its window k (start k·window_ns on its own
  // clock), one per peer it probes.
  std::vector<WindowSummary> Window(uint32_t node, int64_t k, int64_t window_ns) const;
  // Node's clock minus REALTIME.
  int64_t OffsetOf(uint32_t node) const;
  const std::vector<uint32_t>& PeersOf(uint32_t node) const;

 private:
  std::vector<int64_t> offset_ns_;               // by node id
  std::vector<std::vector<uint32_t>> peers_;     // by node id
  uint64_t seed_;
};

}  // namespace chronolink::bench
