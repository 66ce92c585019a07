// When the leader may solve an instant before its timer: once every
// directed edge that the last instant solved in order had has sent its
// window for this one (docs/leader.md "Latency"). The timer
// (ClusterLeaderOptions::ready_after_ns) stays the bound, for an edge that
// went quiet and for the first instant, which has no last one to go by:
// it waits for summaries in transit, and most of that wait, a second by
// default, is idle once every summary is in. An edge that is new since
// the last instant is not waited for; its window, if it comes after the
// solve, makes the instant be solved again (late), as any late window does.
// Pure: no clock, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>

namespace chronolink {

class InstantReadiness {
 public:
  using Edge = std::pair<uint32_t, uint32_t>;  // node, peer

  // The instant just solved in order had windows of `edges`; `next` is the
  // instant now awaited, of which the windows of `held` are in already.
  void AfterSolve(std::set<Edge> edges, int64_t next, const std::set<Edge>& held) {
    expected_ = std::move(edges);
    Await(next, held);
  }
  // The leader skipped to `next` (it took office, or fell behind).
  void Await(int64_t next, const std::set<Edge>& held) {
    next_ = next;
    arrived_.clear();
    for (const Edge& e : held) Arrived(next, e);
  }
  // A window of edge e at instant x0 came in.
  void Arrived(int64_t x0, const Edge& e) {
    if (x0 == next_ && expected_.count(e) != 0) arrived_.insert(e);
  }
  // Whether `instant`, the one awaited, has every expected edge's window.
  bool Ready(int64_t instant) const {
    return instant == next_ && !expected_.empty() && arrived_.size() == expected_.size();
  }
  size_t expected() const { return expected_.size(); }

 private:
  std::set<Edge> expected_;
  std::set<Edge> arrived_;
  int64_t next_ = INT64_MIN;
};

}  // namespace chronolink
