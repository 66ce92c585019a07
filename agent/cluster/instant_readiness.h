// When the leader may solve an instant before its timer: once every
// directed edge that the last instant solved in order has (its windows
// then, and any that came for it since) has sent its window for this one
// (docs/leader.md "Latency"). The timer (ClusterLeaderOptions::
// ready_after_ns) stays the bound, for an edge that went quiet and for the
// first instant, which has no last one to go by: it waits for summaries in
// transit, and most of that wait, a second by default, is idle once every
// summary is in. An edge late for the last instant is waited for in this
// one: a node whose summaries always come a little after the others' is
// not solved without each time. An edge new since the last instant is not
// waited for; its window, if it comes after the solve, makes the instant be
// solved again (late), as any late window does. Pure: no clock, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>

namespace chronolink {

class InstantReadiness {
 public:
  using Edge = std::pair<uint32_t, uint32_t>;  // node, peer

  // Awaits instant `next`, going by `last`, the instant just solved in
  // order before it; by none (the default: the leader took office, or
  // skipped ahead) only its timer solves it. The caller then passes every
  // window already held for either to Arrived.
  void Await(int64_t next, int64_t last = std::numeric_limits<int64_t>::min()) {
    last_ = last;
    next_ = next;
    expected_.clear();
    in_next_.clear();
    matched_ = 0;
  }
  // A window of edge e at instant x0 came in.
  void Arrived(int64_t x0, const Edge& e) {
    if (x0 == last_) {
      if (expected_.insert(e).second && in_next_.count(e) != 0) ++matched_;
    } else if (x0 == next_) {
      if (in_next_.insert(e).second && expected_.count(e) != 0) ++matched_;
    }
  }
  // Whether `instant`, the one awaited, has every expected edge's window.
  bool Ready(int64_t instant) const { return instant == next_ && !expected_.empty() && matched_ == expected_.size(); }

 private:
  int64_t last_ = std::numeric_limits<int64_t>::min();
  int64_t next_ = std::numeric_limits<int64_t>::min();
  std::set<Edge> expected_;  // the edges of the last instant
  std::set<Edge> in_next_;   // the edges whose window for the next one is in
  size_t matched_ = 0;       // of expected_, those in in_next_
};

}  // namespace chronolink
