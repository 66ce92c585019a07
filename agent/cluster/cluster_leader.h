// What the leader does (docs/leader.md): it gathers every node's window
// summaries, and for a series of reference instants (one per window, at the
// windows' centres, where the estimates' x0 lie) solves every node's offset
// with the global solver once the windows around the instant have had time
// to arrive. Windows that arrive after their instant was solved (a
// coordination outage, a slow node) make it solve the instant again: the
// re-solve is marked `recomputed`. Every node seen within the retention is in
// every snapshot: one without edges at the instant (a dead agent) is there
// as unreachable, never silently missing. Pure logic: no I/O, no threads, no clock
// reads; the caller passes the time.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <vector>

#include "agent/cluster/cluster_messages.h"
#include "agent/cluster/fit_point_book.h"
#include "agent/cluster/instant_readiness.h"
#include "agent/cluster/page_drift_history.h"
#include "agent/solve/clock_step_barriers.h"
#include "agent/solve/global_solver.h"
#include "agent/solve/node_wander_meter.h"

namespace chronolink {

struct ClusterLeaderOptions {
  SolverOptions solver;
  int64_t step_ns = 2'000'000'000;  // the window: instants at k·step + step/2
  // An instant T is solved when the leader's clock passes T + ready_after_ns:
  // half a window, the agents' window grace and time for the summaries to
  // travel; or as soon as every edge of the last instant has sent its window
  // for T (instant_readiness.h), when solve_when_complete.
  int64_t ready_after_ns = 2'300'000'000;
  bool solve_when_complete = true;
  // Summaries whose x0 is older than now − retention are forgotten.
  int64_t retention_ns = 120'000'000'000;
  // Summaries whose x0 is later than now + this are refused: they would
  // never expire. The clocks of one cluster never disagree by a minute.
  int64_t max_future_ns = 60'000'000'000;
  // On taking office, instants back to now − backfill are solved too (those
  // the previous leader may have missed while it died).
  int64_t backfill_ns = 10'000'000'000;
  // A solved instant that receives late windows is solved again once none
  // has arrived for this long (bursts after an outage come in many batches).
  int64_t late_settle_ns = 1'000'000'000;
  // At most this many instants are solved per call (a leader that fell far
  // behind skips ahead rather than never catching up).
  int max_instants_per_call = 8;
  // The clock pages' drift: a line through each node's solved offsets over
  // this span (page_drift_history.h).
  PageDriftHistoryOptions page_drift;
  // Each node's wander, measured from the windows (node_wander_meter.h), at
  // the longest centred span the agents fit (0: the wander term is off and
  // a node's term is the stamping-bias floor alone, as before 2026-12-05).
  int64_t node_wander_fit_span_ns = 0;
};

struct ClusterLeaderStats {
  uint64_t windows_received = 0;
  uint64_t windows_duplicate = 0;  // resends (reconnects, failover) already held
  uint64_t windows_late = 0;       // arrived after an instant they serve was solved
  uint64_t windows_expired = 0;    // older than the retention on arrival
  uint64_t windows_future = 0;     // dated more than max_future_ns ahead: refused
  uint64_t clock_steps = 0;        // step and bend markers: an edge's estimates are not used across them
  uint64_t instants_solved = 0;
  uint64_t instants_recomputed = 0;
  uint64_t instants_solved_early = 0;  // of instants_solved: every edge of the last one was in before the timer
  uint64_t instants_skipped = 0;   // fell behind: never solved
  // Instants for which no estimate was held at all (a new leader before its
  // backlog, or every link down): not published; solved, as recomputed, if
  // a summary that serves one comes later.
  uint64_t instants_empty = 0;
  // Solved on the fit clocks, but no prober clock point near the instant to
  // map back to REALTIME with (fit_point_book.h): a node published
  // unreachable, or (the named reference's) an instant not published.
  uint64_t nodes_unmapped = 0;
  uint64_t instants_unmapped = 0;
  // How the solutions were mapped back: through the nodes' knots (exact), or
  // along a point's rate (no knots near the instant).
  uint64_t mapped_by_knots = 0;
  uint64_t mapped_by_point = 0;
  double last_solve_ms = 0;
  NodeWanderStats node_wander;  // the second differences the wander term took
};

class ClusterLeader {
 public:
  ClusterLeader(uint32_t leader_id, ClusterLeaderOptions options);

  // Starts leading at leader-clock now_ns: the first instant solved is the
  // first one at or after now − backfill (and not before the first window
  // held); with no window held yet, it waits for the backlog.
  void TakeOffice(int64_t now_ns);
  bool in_office() const { return in_office_; }
  void LeaveOffice() { in_office_ = false; }

  // New summaries (any order, duplicates welcome).
  void Add(std::span<const WindowSummary> windows, int64_t now_ns);

  // Solves every instant whose time has come and every recent one that got
  // late windows; snapshots in order of solving.
  std::vector<OffsetsSnapshot> SolveDue(int64_t now_ns);

  // The instant T of window k's centre, and the k whose centre is at or after t.
  int64_t InstantAt(int64_t k) const { return k * options_.step_ns + options_.step_ns / 2; }
  int64_t FirstIndexAtOrAfter(int64_t t_ns) const;

  const ClusterLeaderStats& stats() const { return stats_; }
  size_t windows_held() const { return by_x0_.size(); }

 private:
  using WindowId = std::tuple<uint32_t, uint32_t, int64_t, uint64_t>;  // node, peer, start, session
  std::optional<OffsetsSnapshot> SolveInstant(int64_t t_ns, bool recomputed);
  // No estimate of w's edge is used across [start, end) (a step's window,
  // a bend's instant).
  void AddClockBarrier(const WindowSummary& w, int64_t start, int64_t end, int64_t now_ns);
  // Instants solved in [from, to] are to be solved again; whether there were any.
  bool MarkLate(int64_t from_ns, int64_t to_ns, int64_t now_ns);
  void Expire(int64_t now_ns);
  // Awaits the instant at next_index_, going by the one before it when
  // that one was just solved in order.
  void AwaitNext(bool after_solve);
  // Solves the awaited instant in order (by its timer, or early) and moves on.
  void SolveNext(std::vector<OffsetsSnapshot>* out);

  uint32_t leader_id_;
  ClusterLeaderOptions options_;
  bool in_office_ = false;
  int64_t next_index_ = 0;
  uint64_t sequence_ = 0;
  std::set<WindowId> seen_;
  std::multimap<int64_t, std::pair<WindowId, EdgeEstimate>> by_x0_;
  std::map<uint32_t, int64_t> known_;       // node -> newest x0 that mentions it
  // Where the fit-point book was last expired: it is walked whole, so once a
  // step rather than on every turn.
  int64_t fit_points_expired_before_ = std::numeric_limits<int64_t>::min();
  ClockStepBarriers steps_;                 // step markers: estimates are not used across them
  std::optional<NodeWanderMeter> wander_;   // each node's wander, for its term in the solve
  PageDriftHistory page_drift_history_;     // each node's last solved offsets, for its page's drift
  FitPointBook fit_points_;                 // the probers' REALTIME against their fit clocks
  std::optional<SolveResult> last_solution_;  // the warm start of the next solve
  std::set<int64_t> solved_;                // instants solved, within the retention
  std::map<int64_t, int64_t> late_;         // instant -> when its last late window came
  InstantReadiness readiness_;              // whether the awaited instant has every edge it expects
  ClusterLeaderStats stats_;
};

}  // namespace chronolink
