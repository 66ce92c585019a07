#include "agent/cluster/cluster_leader.h"

#include <algorithm>
#include <chrono>

namespace chronolink {

namespace {
// Floor division for possibly negative instants.
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
}  // namespace

ClusterLeader::ClusterLeader(uint32_t leader_id, ClusterLeaderOptions options)
    : leader_id_(leader_id),
      options_(std::move(options)),
      page_drift_history_(options_.page_drift),
      fit_points_(options_.solver.validity_horizon_ns) {
  if (options_.step_ns <= 0) options_.step_ns = 2'000'000'000;
  if (options_.node_wander_fit_span_ns > 0) wander_.emplace(options_.step_ns, options_.node_wander_fit_span_ns);
}

int64_t ClusterLeader::FirstIndexAtOrAfter(int64_t t_ns) const {
  // Smallest k with k·step + step/2 >= t.
  const int64_t shifted = t_ns - options_.step_ns / 2;
  const int64_t k = FloorDiv(shifted, options_.step_ns);
  return k * options_.step_ns == shifted ? k : k + 1;
}

void ClusterLeader::TakeOffice(int64_t now_ns) {
  if (in_office_) return;
  in_office_ = true;
  next_index_ = FirstIndexAtOrAfter(now_ns - options_.backfill_ns);
  late_.clear();
  AwaitNext(false);
}

void ClusterLeader::AwaitNext(bool after_solve) {
  const int64_t next = InstantAt(next_index_);
  const int64_t last = after_solve ? InstantAt(next_index_ - 1) : std::numeric_limits<int64_t>::min();
  readiness_.Await(next, last);
  for (const int64_t t : {last, next}) {
    const auto [from, to] = by_x0_.equal_range(t);
    for (auto it = from; it != to; ++it) readiness_.Arrived(t, {it->second.second.node, it->second.second.peer});
  }
}

void ClusterLeader::Add(std::span<const WindowSummary> windows, int64_t now_ns) {
  // A window serves, above all, the instant at its centre: only that one is
  // re-solved when it comes late (its neighbours' own windows serve them).
  const int64_t half = options_.step_ns / 2;
  for (const WindowSummary& w : windows) {
    ++stats_.windows_received;
    if (w.estimate.x0_ns < now_ns - options_.retention_ns) {
      ++stats_.windows_expired;
      continue;
    }
    if (w.estimate.x0_ns > now_ns && w.estimate.x0_ns - now_ns > options_.max_future_ns) {
      ++stats_.windows_future;
      continue;
    }
    if (w.estimator == kClockStepMarker) {
      // No point of its clock (it would read as the identity): around a
      // step the clock is what the windows on either side say.
      AddClockBarrier(w, w.window_start_ns, w.window_start_ns + options_.step_ns, now_ns);
      continue;
    }
    if (w.estimator == kClockBendMarker) {
      // The bend's instant alone: the windows on either side, its own
      // among them, stand for their own side.
      AddClockBarrier(w, w.estimate.x0_ns, w.estimate.x0_ns + 1, now_ns);
      continue;
    }
    fit_points_.Add(w, options_.step_ns);
    const WindowId id{w.estimate.node, w.estimate.peer, w.window_start_ns, w.session};
    if (!seen_.insert(id).second) {
      ++stats_.windows_duplicate;
      continue;
    }
    by_x0_.emplace(w.estimate.x0_ns, std::make_pair(id, w.estimate));
    if (wander_) wander_->Add(w.estimate, FloorDiv(w.window_start_ns, options_.step_ns));
    readiness_.Arrived(w.estimate.x0_ns, {w.estimate.node, w.estimate.peer});
    for (uint32_t n : {w.estimate.node, w.estimate.peer}) {
      int64_t& newest = known_[n];
      newest = std::max(newest, w.estimate.x0_ns);
    }
    // Instants already solved that this window would have served.
    if (MarkLate(w.estimate.x0_ns - half, w.estimate.x0_ns + half, now_ns)) ++stats_.windows_late;
  }
}

void ClusterLeader::AddClockBarrier(const WindowSummary& w, int64_t start, int64_t end, int64_t now_ns) {
  // Kept apart from the estimates: after a step back, a window start is
  // reused, and its marker must not pass for a resend of the estimate.
  if (!steps_.Add(w.estimate.node, w.estimate.peer, start, end)) return;
  ++stats_.clock_steps;
  if (wander_) wander_->ResetEdge(w.estimate.node, w.estimate.peer);
  // Either end's clock may have stepped; a window either side covers the
  // nodes' offsets between their clocks and the instants'.
  for (uint32_t node : {w.estimate.node, w.estimate.peer}) {
    page_drift_history_.NoteStep(node, start - options_.step_ns, end + options_.step_ns);
  }
  // Instants already solved may have used estimates across it: solve them again.
  const int64_t horizon = options_.solver.validity_horizon_ns;
  MarkLate(start - horizon, end + horizon, now_ns);
}

bool ClusterLeader::MarkLate(int64_t from_ns, int64_t to_ns, int64_t now_ns) {
  bool any = false;
  for (auto it = solved_.lower_bound(from_ns); it != solved_.end() && *it <= to_ns; ++it) {
    late_[*it] = now_ns;
    any = true;
  }
  return any;
}


void ClusterLeader::Expire(int64_t now_ns) {
  const int64_t oldest = now_ns - options_.retention_ns;
  auto end = by_x0_.lower_bound(oldest);
  for (auto it = by_x0_.begin(); it != end; ++it) seen_.erase(it->second.first);
  by_x0_.erase(by_x0_.begin(), end);
  steps_.ExpireBefore(oldest);
  solved_.erase(solved_.begin(), solved_.lower_bound(oldest));
  late_.erase(late_.begin(), late_.lower_bound(oldest));
  std::erase_if(known_, [&](const auto& kv) { return kv.second < oldest; });
  // The fit-point book walks every node's points and knots (4 % of a
  // 3 000-node leader's CPU when done on every turn). Its entries a step
  // past the retention map no instant that is still solved.
  if (fit_points_expired_before_ != std::numeric_limits<int64_t>::min() &&
      oldest < fit_points_expired_before_ + options_.step_ns) {
    return;
  }
  fit_points_expired_before_ = oldest;
  fit_points_.ExpireBefore(oldest);
}

std::optional<OffsetsSnapshot> ClusterLeader::SolveInstant(int64_t t_ns, bool recomputed) {
  const int64_t horizon = options_.solver.validity_horizon_ns;
  std::vector<EdgeEstimate> edges;
  for (auto it = by_x0_.lower_bound(t_ns - horizon); it != by_x0_.end() && it->first <= t_ns + horizon;
       ++it) {
    if (!steps_.Crosses(it->second.second, t_ns)) edges.push_back(it->second.second);
  }
  // No estimate at all: nothing is known of this instant, and a snapshot of
  // every node unreachable would replace what another leader solved (a
  // leader before its backlog comes, a departing one). A summary that
  // serves it later solves it (MarkLate finds it in solved_).
  solved_.insert(t_ns);
  if (edges.empty()) {
    ++stats_.instants_empty;
    return std::nullopt;
  }
  const auto started = std::chrono::steady_clock::now();
  // The last solution starts the solver near this one (a cheaper solve, the
  // same result to its tolerance).
  if (wander_) {
    options_.solver.node_shared_sigma_ns = wander_->SharedSigmas();
    stats_.node_wander = wander_->stats();
  }
  SolveResult r = Solve(edges, t_ns, options_.solver, last_solution_ ? &*last_solution_ : nullptr);
  last_solution_ = r;
  stats_.last_solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  OffsetsSnapshot s;
  s.leader = leader_id_;
  s.sequence = ++sequence_;
  s.reference_instant_ns = t_ns;
  s.reference_node = options_.solver.reference_node;
  s.recomputed = recomputed;
  std::set<uint32_t> solved_nodes;
  for (const NodeSolution& n : r.nodes) solved_nodes.insert(n.node);
  s.nodes = std::move(r.nodes);
  for (const auto& [node, newest] : known_) {
    if (solved_nodes.count(node) != 0) continue;
    NodeSolution missing;
    missing.node = node;  // reachable = false: no edge at this instant
    s.nodes.push_back(missing);
  }
  std::sort(s.nodes.begin(), s.nodes.end(),
            [](const NodeSolution& a, const NodeSolution& b) { return a.node < b.node; });
  page_drift_history_.Apply(t_ns, &s.nodes);  // on the fit clocks, before they are mapped
  const bool mapped = fit_points_.ToRealtime(&s);
  stats_.nodes_unmapped = fit_points_.stats().nodes_unmapped;
  stats_.instants_unmapped = fit_points_.stats().instants_unmapped;
  stats_.mapped_by_knots = fit_points_.stats().mapped_by_knots;
  stats_.mapped_by_point = fit_points_.stats().mapped_by_point;
  if (!mapped) return std::nullopt;
  if (recomputed) {
    ++stats_.instants_recomputed;
  } else {
    ++stats_.instants_solved;
  }
  return s;
}

void ClusterLeader::SolveNext(std::vector<OffsetsSnapshot>* out) {
  if (auto s = SolveInstant(InstantAt(next_index_), false)) out->push_back(std::move(*s));
  ++next_index_;
  AwaitNext(true);
}

std::vector<OffsetsSnapshot> ClusterLeader::SolveDue(int64_t now_ns) {
  std::vector<OffsetsSnapshot> out;
  if (!in_office_) return out;
  Expire(now_ns);
  // Nothing to solve before a window is held (no empty snapshots). A new
  // leader's backlog comes a few turns after it takes office (etcd reads it
  // once the election is won), so the backfill's instants wait for it
  // rather than being passed by; and none before the first window held,
  // which nothing could serve.
  if (by_x0_.empty()) return out;
  next_index_ = std::max(next_index_, FirstIndexAtOrAfter(by_x0_.begin()->first));
  // The last index whose instant is ready: k·step + step/2 + ready <= now.
  const int64_t last_due =
      FloorDiv(now_ns - options_.ready_after_ns - options_.step_ns / 2, options_.step_ns);
  if (last_due - next_index_ + 1 > options_.max_instants_per_call) {
    const int64_t skip = last_due - next_index_ + 1 - options_.max_instants_per_call;
    stats_.instants_skipped += static_cast<uint64_t>(skip);
    next_index_ += skip;
    AwaitNext(false);
  }
  while (next_index_ <= last_due) SolveNext(&out);
  // The next instant before its time, once every edge the last one had is in.
  while (options_.solve_when_complete && readiness_.Ready(InstantAt(next_index_)) &&
         static_cast<int>(out.size()) < options_.max_instants_per_call) {
    ++stats_.instants_solved_early;
    SolveNext(&out);
  }
  for (auto it = late_.begin(); it != late_.end();) {
    if (now_ns - it->second < options_.late_settle_ns) {
      ++it;
      continue;
    }
    if (auto s = SolveInstant(it->first, true)) out.push_back(std::move(*s));
    it = late_.erase(it);
  }
  return out;
}

}  // namespace chronolink
