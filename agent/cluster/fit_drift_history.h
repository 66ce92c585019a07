// Each node's solved offsets on the fit clocks over the last span, and the
// drift of a line through them: the drift its clock page extrapolates with
// (docs/leader.md "The page's drift").
//
// A page reaches its agent 7-9 s after the instant it was solved for, and
// goes on 2 s more, so its error is the solution's drift error times ~10 s.
// One instant's drift comes from its edges' fit spans (12 s at most), and
// on a loaded routed path it erred by 9 ppb at the median and 130-165 ppb
// at p99: page errors of 1-1.3 µs at p99 against a solved p99 of 0.1-0.15 µs
// (docs/PERFORMANCE.md §0a''). The fit clocks run free of every daemon, so
// their drifts hold for tens of seconds, and a line through the last 30 s
// of solved offsets errs by 1-3 ppb there.
//
// A point off the line by more than a step's worth (the node's fit clock
// anchored again, the mean reference moved by a member joining or leaving)
// starts the history again from that point: until it holds enough points
// again, the instant's own drift is used. Only the page reads this drift;
// offsets.jsonl keeps each instant's own.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "agent/solve/global_solver.h"

namespace chronolink {

struct FitDriftHistoryOptions {
  int64_t span_ns = 30'000'000'000;  // 0: off, every page uses its instant's drift
  size_t min_points = 5;             // and spanning at least a quarter of the span
  // Off the line by more than this many of the point's own sigma (and the
  // floor) starts the history again.
  double jump_sigmas = 6;
  double jump_floor_ns = 100;
};

class FitDriftHistory {
 public:
  explicit FitDriftHistory(FitDriftHistoryOptions options) : options_(options) {}

  // Records the solutions of instant `t_ns` (solved on the fit clocks, before
  // they are mapped to REALTIME) and sets each reachable node's page_drift
  // where its history gives a line. An instant solved again (late windows)
  // replaces what it had recorded.
  void Apply(int64_t t_ns, std::vector<NodeSolution>* nodes);

 private:
  using Points = std::map<int64_t, double>;  // offset by instant
  // The line's slope and its value at t_ns through the points before t_ns
  // within the span; false when they are too few or too close together.
  bool Line(const Points& points, int64_t t_ns, double* slope, double* at_t_ns) const;
  void Forget(int64_t before_ns);

  FitDriftHistoryOptions options_;
  std::map<uint32_t, Points> by_node_;
  int64_t newest_ns_ = INT64_MIN;
};

}  // namespace chronolink
