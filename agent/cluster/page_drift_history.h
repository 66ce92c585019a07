// Each node's solved offsets on the fit clocks over the last span, and the
// drift of a line through them: the drift its clock page extrapolates with
// (docs/leader.md "The page's drift").
//
// A page reaches its agent 7-9 s after the instant it was solved for, and
// goes on 2 s more, so its error is the solution's drift error times ~10 s.
// One instant's drift comes from its edges' fit spans (12 s at most): on a
// loaded routed path the page erred by 0.7-1.4 µs at p99 against a solved
// p99 of 0.1-0.4 µs, drift errors of the order of 100 ppb (docs/PERFORMANCE.md
// §0a''). The fit clocks run free of every daemon, so their drifts hold
// for tens of seconds, and a line through the last 30 s of solved offsets
// with 40 ns of noise on each errs by a few ppb (solver_bench's PageDrift).
//
// No line crosses a clock step of the node (the leader's step markers, with
// a window either side), and a point off the line (or, before there is one,
// off the last point along the instant's drift) by more than 6 of its
// sigmas, at least 100 ns, starts the history again: the node's fit clock
// anchored again, the mean reference moved by a member joining or leaving.
// A solution whose sigma passes 1 µs is no point of a line (right after a
// step it can be hundreds of µs, and would pass any jump test). Until a
// line holds enough points again, the instant's own drift is used. Only
// the page reads this drift; offsets.jsonl keeps each instant's own.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "agent/solve/global_solver.h"

namespace chronolink {

struct PageDriftHistoryOptions {
  int64_t span_ns = 30'000'000'000;  // 0: off, every page uses its instant's drift
  size_t min_points = 5;             // and spanning at least a quarter of the span
  // Off the line by more than this many of the point's own sigma (and the
  // floor) starts the history again.
  double jump_sigmas = 6;
  double jump_floor_ns = 100;
  double max_sigma_ns = 1000;  // a solution less sure than this is no point of a line
};

class PageDriftHistory {
 public:
  explicit PageDriftHistory(PageDriftHistoryOptions options) : options_(options) {}

  // Records the solutions of instant `t_ns` (solved on the fit clocks, before
  // they are mapped to REALTIME) and sets each reachable node's page_drift
  // where its history gives a line. An instant solved again (late windows)
  // replaces what it had recorded.
  void Apply(int64_t t_ns, std::vector<NodeSolution>* nodes);
  // The node's clock stepped somewhere in [from_ns, to_ns] (on the instants'
  // clock, give or take the nodes' offsets: widen it): no line crosses it.
  void NoteStep(uint32_t node, int64_t from_ns, int64_t to_ns);

 private:
  using Points = std::map<int64_t, double>;  // offset by instant
  // The line's slope and its value at t_ns through the points before t_ns
  // within the span; false when they are too few or too close together.
  bool Line(const Points& points, int64_t t_ns, double* slope, double* at_t_ns) const;
  // Drops the points a step of the node separates from t_ns; false when
  // t_ns itself is within a step.
  bool KeepToStepsSideOf(uint32_t node, int64_t t_ns, Points* points) const;
  // Whether the new point is off what the points before it say.
  bool OffTheLine(const Points& points, int64_t t_ns, const NodeSolution& n) const;
  void Forget(int64_t before_ns);

  PageDriftHistoryOptions options_;
  std::map<uint32_t, Points> by_node_;
  std::map<uint32_t, std::map<int64_t, int64_t>> steps_;  // node -> step windows, from -> to
  int64_t newest_ns_ = INT64_MIN;
};

}  // namespace chronolink
