// The summaries that tell the leader where an edge's clocks changed
// (docs/formats.md "Coordination messages"): a step marker for a window
// discarded because a clock stepped, a bend marker where a fit clock took a
// new rate without a jump. Pure.
#pragma once

#include <cstdint>
#include <string>

#include "agent/cluster/cluster_messages.h"

namespace chronolink {

// The window [window_start_ns, + window) of node -> peer held a step: no
// estimate of that edge is used across it.
inline WindowSummary StepMarkerOf(uint32_t node, uint32_t peer, uint64_t session, int64_t window_start_ns,
                                  int64_t x0_ns) {
  WindowSummary w;
  w.estimate.node = node;
  w.estimate.peer = peer;
  w.estimate.x0_ns = x0_ns;
  w.session = session;
  w.window_start_ns = window_start_ns;
  w.estimator = std::string(kClockStepMarker);
  return w;
}

// A fit clock of the window's edge bent at bend_ns (the prober's clock,
// inside the window). The marker is the window's own estimate carried
// along its line to the bend, its point and knots with it: a leader that
// does not know the marker (before 2026-12-06) takes it for the window's
// estimate, which it is, at that instant (F keeps its value at a bend, so
// the line from x0's side holds there), and the window's own summary that
// follows for a resend of it. One that knows it bars that instant alone.
inline WindowSummary BendMarkerOf(const WindowSummary& estimate, int64_t bend_ns) {
  WindowSummary w = estimate;
  w.estimate.beta_ns += w.estimate.alpha * static_cast<double>(bend_ns - w.estimate.x0_ns);
  w.estimate.x0_ns = bend_ns;
  w.estimator = std::string(kClockBendMarker);
  return w;
}

}  // namespace chronolink
