// Tests of what the leader does (agent/cluster/cluster_leader.h) and of the
// messages it exchanges (agent/cluster/cluster_messages.h) and the outbox that
// carries them (agent/coord/window_outbox.h): instants at window centres,
// solved once ready, duplicates dropped, late windows re-solved, dead nodes
// reported unreachable, bad messages refused with a reason.
#include "agent/cluster/cluster_leader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "agent/cluster/clock_markers.h"
#include "agent/cluster/cluster_messages.h"
#include "agent/cluster/timebase_knot_relay.h"
#include "agent/coord/window_outbox.h"
#include "agent/export/clock_mapping_publisher.h"
#include "agent/export/offsets_jsonl_writer.h"
#include "agent/runtime/cluster_service.h"
#include "tests/support/property_cases.h"

namespace chronolink {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kStep = 2 * kSecond;
constexpr int64_t kBase = 1'795'324'430'000'000'000;  // an epoch-scale window boundary (multiple of 2 s)

// Constant offsets (no drift): every node's clock is truth + offset.
const std::map<uint32_t, double> kOffsets = {{1, 0.0}, {2, 1500.0}, {3, -700.0}, {4, 12000.0}};

WindowSummary Window(uint32_t a, uint32_t b, int64_t window_start, uint64_t session = 7) {
  WindowSummary w;
  w.estimate.node = a;
  w.estimate.peer = b;
  w.estimate.x0_ns = window_start + kStep / 2;
  w.estimate.beta_ns = kOffsets.at(b) - kOffsets.at(a);
  w.estimate.alpha = 0;
  w.estimate.uncertainty_ns = 10;
  w.session = session;
  w.window_start_ns = window_start;
  w.estimator = "max_margin";
  return w;
}

// Both directions of every edge of a 4-cycle with a chord, for one window.
std::vector<WindowSummary> AllWindows(int64_t window_start, uint32_t skip_node = 0) {
  const std::pair<uint32_t, uint32_t> edges[] = {{1, 2}, {2, 3}, {3, 4}, {4, 1}, {1, 3}};
  std::vector<WindowSummary> out;
  for (auto [a, b] : edges) {
    if (a == skip_node || b == skip_node) continue;
    out.push_back(Window(a, b, window_start));
    out.push_back(Window(b, a, window_start));
  }
  return out;
}

ClusterLeaderOptions Options() {
  ClusterLeaderOptions o;
  o.step_ns = kStep;
  o.ready_after_ns = kStep / 2 + kSecond;
  o.solver.reference_node = 1;
  o.solver.validity_horizon_ns = 2 * kStep;
  o.backfill_ns = 0;
  o.late_settle_ns = kSecond;
  return o;
}

TEST(ClusterLeader, InstantsAreWindowCentres) {
  ClusterLeader leader(1, Options());
  EXPECT_EQ(leader.InstantAt(0), kStep / 2);
  EXPECT_EQ(leader.FirstIndexAtOrAfter(kStep / 2), 0);
  EXPECT_EQ(leader.FirstIndexAtOrAfter(kStep / 2 + 1), 1);
  EXPECT_EQ(leader.FirstIndexAtOrAfter(-kStep), -1);  // -kStep/2 is the centre of window -1
  EXPECT_EQ(leader.InstantAt(leader.FirstIndexAtOrAfter(kBase)), kBase + kStep / 2);
}

// Each node's clock page gets the drift of a line through its solved
// offsets (page_drift_history.h) once five instants are solved, mapped to
// REALTIME with the rest; with a span of 0 it never does.
TEST(ClusterLeader, PagesGetTheDriftOfALineOnceFiveInstantsAreSolved) {
  for (const int64_t span : {int64_t{30} * kSecond, int64_t{0}}) {
    ClusterLeaderOptions o = Options();
    o.page_drift.span_ns = span;
    ClusterLeader leader(1, o);
    leader.TakeOffice(kBase);
    std::vector<OffsetsSnapshot> solved;
    for (int k = 0; k < 10; ++k) {
      leader.Add(AllWindows(kBase + k * kStep), kBase + (k + 1) * kStep);
      for (OffsetsSnapshot& s : leader.SolveDue(kBase + (k + 1) * kStep + kSecond)) solved.push_back(std::move(s));
    }
    ASSERT_EQ(solved.size(), 10u);
    for (size_t i = 0; i < solved.size(); ++i) {
      for (const NodeSolution& n : solved[i].nodes) {
        ASSERT_TRUE(n.reachable);
        EXPECT_EQ(n.page_drift.has_value(), span > 0 && i >= 4) << "instant " << i << " node " << n.node;
        if (n.page_drift) {
          EXPECT_NEAR(*n.page_drift, n.drift, 1e-12) << "clocks without drift";
        }
      }
    }
  }
}

TEST(ClusterLeader, SolvesEachInstantOnceWhenReady) {
  ClusterLeader leader(1, Options());
  leader.TakeOffice(kBase);
  leader.Add(AllWindows(kBase), kBase + kStep);
  const int64_t t = kBase + kStep / 2;
  // Not ready until T + ready_after.
  EXPECT_TRUE(leader.SolveDue(t + kStep / 2).empty());
  auto solved = leader.SolveDue(t + kStep / 2 + kSecond);
  ASSERT_EQ(solved.size(), 1u);
  const OffsetsSnapshot& s = solved[0];
  EXPECT_EQ(s.reference_instant_ns, t);
  EXPECT_FALSE(s.recomputed);
  EXPECT_EQ(s.leader, 1u);
  ASSERT_EQ(s.nodes.size(), 4u);
  for (const NodeSolution& n : s.nodes) {
    ASSERT_TRUE(n.reachable) << n.node;
    EXPECT_NEAR(n.offset_ns, kOffsets.at(n.node), 1e-3) << n.node;
  }
  // Nothing twice.
  EXPECT_TRUE(leader.SolveDue(t + kStep / 2 + kSecond + 10).empty());
  EXPECT_EQ(leader.stats().instants_solved, 1u);
}

// From the second instant on, an instant is solved as soon as every edge
// the last one had has sent its window for it, long before its timer; one
// edge missing makes it wait for the timer; a node gone quiet is not waited
// for after that; and with solve_when_complete off only the timer counts.
TEST(ClusterLeader, SolvesAnInstantOnceEveryEdgeOfTheLastIsIn) {
  ClusterLeader leader(1, Options());
  leader.TakeOffice(kBase);
  leader.Add(AllWindows(kBase), kBase + kStep);
  const int64_t t0 = kBase + kStep / 2;
  EXPECT_TRUE(leader.SolveDue(t0 + kStep / 2 + 1).empty()) << "the first instant has no last one to go by";
  ASSERT_EQ(leader.SolveDue(t0 + kStep / 2 + kSecond).size(), 1u);

  const int64_t t1 = t0 + kStep;  // its timer: t1 + kStep / 2 + kSecond
  std::vector<WindowSummary> next = AllWindows(kBase + kStep);
  const std::vector<WindowSummary> last = {next.back()};
  next.pop_back();
  leader.Add(next, t1 + kStep / 2);
  EXPECT_TRUE(leader.SolveDue(t1 + kStep / 2 + 1).empty()) << "one edge's window is still out";
  leader.Add(last, t1 + kStep / 2 + 2);
  const std::vector<OffsetsSnapshot> early = leader.SolveDue(t1 + kStep / 2 + 3);
  ASSERT_EQ(early.size(), 1u);
  EXPECT_EQ(early[0].reference_instant_ns, t1);
  EXPECT_FALSE(early[0].recomputed);
  EXPECT_EQ(leader.stats().instants_solved_early, 1u);
  EXPECT_TRUE(leader.SolveDue(t1 + kStep / 2 + kSecond).empty()) << "solved once";

  // Node 4 goes quiet: the next instant waits for its timer ...
  const int64_t t2 = t1 + kStep;
  leader.Add(AllWindows(kBase + 2 * kStep, 4), t2 + kStep / 2);
  EXPECT_TRUE(leader.SolveDue(t2 + kStep / 2 + 1).empty());
  ASSERT_EQ(leader.SolveDue(t2 + kStep / 2 + kSecond).size(), 1u);
  // ... and the one after goes by the edges that instant had.
  const int64_t t3 = t2 + kStep;
  leader.Add(AllWindows(kBase + 3 * kStep, 4), t3 + kStep / 2);
  ASSERT_EQ(leader.SolveDue(t3 + kStep / 2 + 1).size(), 1u);
  EXPECT_EQ(leader.stats().instants_solved_early, 2u);
  EXPECT_EQ(leader.stats().instants_solved, 4u);

  // Node 4 is back, its windows for t3 late: t4 waits for its windows too.
  const auto node4 = [](int64_t window_start) {
    std::vector<WindowSummary> out;
    for (const WindowSummary& w : AllWindows(window_start)) {
      if (w.estimate.node == 4 || w.estimate.peer == 4) out.push_back(w);
    }
    return out;
  };
  leader.Add(node4(kBase + 3 * kStep), t3 + kStep / 2 + 10);
  const int64_t t4 = t3 + kStep;
  leader.Add(AllWindows(kBase + 4 * kStep, 4), t4 + kStep / 2);
  for (const OffsetsSnapshot& s : leader.SolveDue(t4 + kStep / 2 + 1)) {
    EXPECT_TRUE(s.reference_instant_ns == t3 && s.recomputed) << "only t3 again, with node 4";
  }
  leader.Add(node4(kBase + 4 * kStep), t4 + kStep / 2 + 2);
  const std::vector<OffsetsSnapshot> with4 = leader.SolveDue(t4 + kStep / 2 + 3);
  ASSERT_EQ(with4.size(), 1u);
  EXPECT_EQ(with4[0].reference_instant_ns, t4);
  for (const NodeSolution& n : with4[0].nodes) EXPECT_TRUE(n.reachable) << n.node;
  EXPECT_EQ(leader.stats().instants_solved_early, 3u);

  ClusterLeaderOptions timer_only = Options();
  timer_only.solve_when_complete = false;
  ClusterLeader patient(1, timer_only);
  patient.TakeOffice(kBase);
  for (int k = 0; k < 3; ++k) patient.Add(AllWindows(kBase + k * kStep), kBase + (k + 1) * kStep);
  EXPECT_EQ(patient.SolveDue(t0 + kStep / 2 + kSecond).size(), 1u);
  EXPECT_TRUE(patient.SolveDue(t1 + kStep / 2 + 1).empty());
  EXPECT_EQ(patient.stats().instants_solved_early, 0u);
}

TEST(ClusterLeader, DropsDuplicatesAndExpiredWindows) {
  ClusterLeader leader(1, Options());
  leader.TakeOffice(kBase);
  const auto w = AllWindows(kBase);
  leader.Add(w, kBase + kStep);
  leader.Add(w, kBase + kStep);  // a resend after a reconnect
  EXPECT_EQ(leader.stats().windows_duplicate, w.size());
  EXPECT_EQ(leader.windows_held(), w.size());
  // The same window from a new session (a restart) is a different window.
  leader.Add(std::vector<WindowSummary>{Window(1, 2, kBase, 8)}, kBase + kStep);
  EXPECT_EQ(leader.windows_held(), w.size() + 1);
  // Far older than the retention: refused.
  leader.Add(AllWindows(kBase - 1000 * kSecond), kBase + kStep);
  EXPECT_EQ(leader.stats().windows_expired, w.size());
}

// A window dated far ahead of the leader's clock would never expire and
// would pull every solve it falls into: refused, counted, never held.
TEST(ClusterLeader, RefusesWindowsDatedFarInTheFuture) {
  ClusterLeader leader(1, Options());
  leader.TakeOffice(kBase);
  const auto w = AllWindows(kBase);
  leader.Add(w, kBase + kStep);
  leader.Add(AllWindows(kBase + 3600 * kSecond), kBase + kStep);
  leader.Add(std::vector<WindowSummary>{Window(1, 2, std::numeric_limits<int64_t>::max() - kStep)}, kBase + kStep);
  EXPECT_EQ(leader.stats().windows_future, w.size() + 1);
  EXPECT_EQ(leader.windows_held(), w.size());
  // Clocks of one cluster disagree by far less than a minute: a window a
  // little ahead (a node whose clock runs early) is taken.
  leader.Add(AllWindows(kBase + 10 * kSecond), kBase + kStep);
  EXPECT_EQ(leader.windows_held(), 2 * w.size());
}

TEST(ClusterLeader, LateWindowsMakeARecomputedInstant) {
  ClusterLeader leader(1, Options());
  leader.TakeOffice(kBase);
  const int64_t t = kBase + kStep / 2;
  // Node 4's windows are held up (a coordination outage): it is unreachable
  // at first ...
  leader.Add(AllWindows(kBase, /*skip_node=*/4), kBase + kStep);
  auto first = leader.SolveDue(t + kStep);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].Find(4), nullptr);  // never seen yet: not in the snapshot
  // ... then they arrive, and the instant is solved again once they settle.
  std::vector<WindowSummary> late;
  for (const WindowSummary& w : AllWindows(kBase)) {
    if (w.estimate.node == 4 || w.estimate.peer == 4) late.push_back(w);
  }
  const int64_t arrival = t + 2 * kStep;
  leader.Add(late, arrival);
  EXPECT_EQ(leader.stats().windows_late, late.size());
  auto again = leader.SolveDue(arrival + kSecond);
  const OffsetsSnapshot* recomputed = nullptr;
  for (const auto& s : again) {
    if (s.recomputed) recomputed = &s;
  }
  ASSERT_NE(recomputed, nullptr);
  EXPECT_EQ(recomputed->reference_instant_ns, t);
  const NodeSolution* n4 = recomputed->Find(4);
  ASSERT_NE(n4, nullptr);
  EXPECT_TRUE(n4->reachable);
  EXPECT_NEAR(n4->offset_ns, kOffsets.at(4), 1e-3);
  EXPECT_EQ(leader.stats().instants_recomputed, 1u);
}

// A leader that holds no estimate for an instant (its backlog not read yet,
// or leaving office before it comes) publishes nothing for it: a snapshot of
// every node unreachable would replace what another leader solved. The
// backlog, when it comes, solves the instant as recomputed.
TEST(ClusterLeader, AnInstantWithNoEstimateIsNotPublishedUntilOneComes) {
  ClusterLeader leader(1, Options());
  leader.TakeOffice(kBase);
  const int64_t t = kBase + 10 * kStep + kStep / 2;
  // Only windows far before t (beyond the validity horizon) are held.
  leader.Add(AllWindows(kBase), kBase + kStep);
  const auto due = leader.SolveDue(t + kStep);
  for (const OffsetsSnapshot& s : due) {
    for (const NodeSolution& n : s.nodes) {
      EXPECT_TRUE(n.reachable) << "node " << n.node << " published unreachable at " << s.reference_instant_ns;
    }
  }
  EXPECT_GT(leader.stats().instants_empty, 0u);
  // The windows around t come: t is solved, recomputed, every node reachable.
  const int64_t arrival = t + 2 * kStep;
  leader.Add(AllWindows(t - kStep / 2), arrival);
  const OffsetsSnapshot* at_t = nullptr;
  const auto later = leader.SolveDue(arrival + kSecond);
  for (const OffsetsSnapshot& s : later) {
    if (s.reference_instant_ns == t) at_t = &s;
  }
  ASSERT_NE(at_t, nullptr);
  EXPECT_TRUE(at_t->recomputed);
  for (uint32_t n : {1u, 2u, 3u, 4u}) {
    const NodeSolution* s = at_t->Find(n);
    ASSERT_NE(s, nullptr) << n;
    EXPECT_TRUE(s->reachable) << n;
  }
}

WindowSummary StepMarker(uint32_t a, uint32_t b, int64_t window_start) {
  return StepMarkerOf(a, b, 7, window_start, window_start + kStep / 2);
}

// Three windows of every edge; in the second, node 4's edges bring only
// `marker`'s summaries, and from the third on node 4's offset reads
// `change` more. The leader takes them, and solves each window's instant.
std::map<int64_t, const NodeSolution*> Node4ChangesInTheSecondWindow(
    ClusterLeader& leader, double change, const std::function<WindowSummary(uint32_t, uint32_t)>& marker,
    std::vector<OffsetsSnapshot>* snapshots) {
  std::vector<WindowSummary> all = AllWindows(kBase);
  for (const auto& w : AllWindows(kBase + kStep, /*skip_node=*/4)) all.push_back(w);
  for (auto [a, b] : {std::pair<uint32_t, uint32_t>{3, 4}, {4, 3}, {4, 1}, {1, 4}}) all.push_back(marker(a, b));
  for (const auto& w : AllWindows(kBase + 2 * kStep)) {
    WindowSummary after = w;
    if (after.estimate.node == 4) after.estimate.beta_ns -= change;
    if (after.estimate.peer == 4) after.estimate.beta_ns += change;
    all.push_back(after);
  }
  leader.Add(all, kBase + 3 * kStep);
  *snapshots = leader.SolveDue(kBase + 4 * kStep);
  std::map<int64_t, const NodeSolution*> n4;
  for (const auto& s : *snapshots) n4[s.reference_instant_ns] = s.Find(4);
  return n4;
}

// Node 4's clock steps by 1 ms in the second window: both ends discard
// the window (markers), and no instant uses an estimate of its edges from
// the other side of the step. Without markers, the instant after the step
// would lean on the windows before it (within the horizon) and solve node 4
// half-way between its two offsets.
TEST(ClusterLeader, EstimatesAreNotUsedAcrossAClockStep) {
  ClusterLeader leader(1, Options());
  leader.TakeOffice(kBase);
  const double step = 1'000'000;
  std::vector<OffsetsSnapshot> snapshots;
  std::map<int64_t, const NodeSolution*> n4 = Node4ChangesInTheSecondWindow(
      leader, step, [](uint32_t a, uint32_t b) { return StepMarker(a, b, kBase + kStep); }, &snapshots);
  EXPECT_EQ(leader.stats().clock_steps, 4u);
  ASSERT_EQ(n4.size(), 3u);
  ASSERT_TRUE(n4[kBase + kStep / 2] && n4[kBase + kStep / 2]->reachable);
  EXPECT_NEAR(n4[kBase + kStep / 2]->offset_ns, kOffsets.at(4), 1e-3) << "before the step";
  ASSERT_TRUE(n4[kBase + 5 * kStep / 2] && n4[kBase + 5 * kStep / 2]->reachable);
  EXPECT_NEAR(n4[kBase + 5 * kStep / 2]->offset_ns, kOffsets.at(4) + step, 1e-3) << "after the step";
  // The instant of the step's window: node 4 has no estimate there that
  // does not cross it.
  const NodeSolution* at_step = n4[kBase + 3 * kStep / 2];
  EXPECT_TRUE(at_step == nullptr || !at_step->reachable);
  // Resent markers count once.
  leader.Add(std::vector<WindowSummary>{StepMarker(3, 4, kBase + kStep)}, kBase + 4 * kStep);
  EXPECT_EQ(leader.stats().clock_steps, 4u);
}

// Node 4's fit clock bends a quarter into the second window, whose own
// estimates of node 4's edges are missing. A bend marker bars the bend's
// instant alone: the second window's instant (past the bend) takes the third
// window's estimate and not the first's, and the first's instant the
// first's, not the third's. (Node 4's estimates past the bend read
// `shift` more, as an offset carried along a slope the bend changed would
// err.) A step marker would leave the second instant without node 4.
TEST(ClusterLeader, ABendMarkerBarsTheBendsInstantAlone) {
  ClusterLeader leader(1, Options());
  leader.TakeOffice(kBase);
  const double shift = 10'000;
  const int64_t bend = kBase + kStep + kStep / 4;
  // The marker carries the window's own estimate: the leader bars the
  // instant and takes nothing else from it (were it an estimate at the
  // bend, the second instant would mix it with the third window's).
  std::vector<OffsetsSnapshot> snapshots;
  std::map<int64_t, const NodeSolution*> n4 = Node4ChangesInTheSecondWindow(
      leader, shift, [&](uint32_t a, uint32_t b) { return BendMarkerOf(Window(a, b, kBase + kStep), bend); },
      &snapshots);
  EXPECT_EQ(leader.stats().clock_steps, 4u);
  ASSERT_TRUE(n4[kBase + kStep / 2] && n4[kBase + kStep / 2]->reachable);
  EXPECT_NEAR(n4[kBase + kStep / 2]->offset_ns, kOffsets.at(4), 1e-3) << "before the bend: the first window's";
  const NodeSolution* past = n4[kBase + 3 * kStep / 2];
  ASSERT_TRUE(past && past->reachable) << "the bend's window's instant is solved";
  EXPECT_NEAR(past->offset_ns, kOffsets.at(4) + shift, 1e-3) << "past the bend: the third window's alone";
}

// A bend marker is its window's line at the bend, point and knots kept: a
// leader from before it takes it for the window's estimate at that instant
// (it decodes as one), and the window's own summary for a resend.
TEST(ClusterLeader, ABendMarkerIsItsWindowsLineAtTheBend) {
  WindowSummary w = Window(2, 3, kBase);
  w.estimate.alpha = 40e-6;
  w.prober_clock = FitPoint{w.estimate.x0_ns, w.estimate.x0_ns + 5'000, 100};
  const int64_t bend = w.estimate.x0_ns - 400'000'000;
  const WindowSummary m = BendMarkerOf(w, bend);
  EXPECT_EQ(m.estimator, kClockBendMarker);
  EXPECT_EQ(m.estimate.x0_ns, bend);
  EXPECT_DOUBLE_EQ(m.estimate.beta_ns, w.estimate.beta_ns - 40e-6 * 400'000'000);
  EXPECT_EQ(m.estimate.alpha, w.estimate.alpha);
  EXPECT_EQ(m.estimate.uncertainty_ns, w.estimate.uncertainty_ns);
  EXPECT_EQ(m.prober_clock, w.prober_clock);
  EXPECT_EQ(m.Key(), w.Key()) << "the same window: the estimate after it is a resend to an older leader";
  std::vector<WindowSummary> decoded;
  std::string error;
  ASSERT_TRUE(DecodeWindowBatch(EncodeWindowBatch(std::vector<WindowSummary>{m, w}), &decoded, &error)) << error;
  ASSERT_EQ(decoded.size(), 2u);
  EXPECT_EQ(decoded[0].estimator, kClockBendMarker);
  EXPECT_DOUBLE_EQ(decoded[0].estimate.beta_ns, m.estimate.beta_ns);
}

// A marker that arrives after the instants it concerns were solved makes
// them solved again.
TEST(ClusterLeader, ALateStepMarkerMakesInstantsRecomputed) {
  ClusterLeader leader(1, Options());
  leader.TakeOffice(kBase);
  std::vector<WindowSummary> all = AllWindows(kBase);
  for (const auto& w : AllWindows(kBase + 2 * kStep)) all.push_back(w);
  leader.Add(all, kBase + 3 * kStep);
  const auto first = leader.SolveDue(kBase + 4 * kStep);
  ASSERT_FALSE(first.empty());
  leader.Add(std::vector<WindowSummary>{StepMarker(4, 1, kBase + kStep)}, kBase + 4 * kStep);
  const auto again = leader.SolveDue(kBase + 4 * kStep + 2 * kSecond);
  int recomputed = 0;
  for (const auto& s : again) recomputed += s.recomputed ? 1 : 0;
  EXPECT_GE(recomputed, 2);
}

TEST(ClusterLeader, NodeWithoutEdgesIsUnreachableNotMissing) {
  ClusterLeader leader(1, Options());
  leader.TakeOffice(kBase);
  leader.Add(AllWindows(kBase), kBase + kStep);
  // Node 4 dies: later windows do not mention it.
  for (int k = 1; k <= 4; ++k) leader.Add(AllWindows(kBase + k * kStep, 4), kBase + (k + 1) * kStep);
  auto solved = leader.SolveDue(kBase + 5 * kStep + kSecond + kStep / 2);
  ASSERT_FALSE(solved.empty());
  const OffsetsSnapshot& last = solved.back();
  const NodeSolution* n4 = last.Find(4);
  ASSERT_NE(n4, nullptr) << "a node seen before must be reported";
  EXPECT_FALSE(n4->reachable);
  EXPECT_TRUE(last.Find(3)->reachable);
}

TEST(ClusterLeader, FallingBehindSkipsAheadBounded) {
  ClusterLeaderOptions o = Options();
  o.max_instants_per_call = 3;
  ClusterLeader leader(1, o);
  leader.TakeOffice(kBase);
  for (int k = 0; k < 20; ++k) leader.Add(AllWindows(kBase + k * kStep), kBase + kStep);
  const auto solved = leader.SolveDue(kBase + 20 * kStep);
  EXPECT_EQ(solved.size(), 3u);
  EXPECT_GT(leader.stats().instants_skipped, 0u);
}

// An old leader dies at D, having solved every instant up to D less the
// solve's lag; its successor takes office two lease periods later (the
// longest an etcd lease takes to expire and a campaign to win). With the
// agent's own options, its first turn solves from right after the old
// leader's last instant: no instant is lost, whatever the window, the
// longest fit span and the lease. (Counting the backfill from the takeover
// alone lost one instant at the defaults: a 7.3 s lag, two 5 s leases.
// Passing instants by while the backlog was still being read lost two in
// CI's etcd failover test.)
TEST(ClusterLeader, ATakeoverSolvesBackOverItsPredecessorsGap) {
  struct Setup {
    int64_t window_ns, fit_span_max_ns, lease_ttl_s, retention_s;
  };
  for (const Setup& setup : {Setup{kStep, 0, 5, 120}, Setup{kSecond, 0, 5, 120}, Setup{kStep, 8 * kSecond, 3, 120},
                             Setup{kSecond / 2, 0, 60, 300}}) {
    AgentConfig config;
    config.estimation.window_ns = setup.window_ns;
    config.estimation.fit_span_max_ns = setup.fit_span_max_ns;
    config.cluster_settings.lease_ttl_s = setup.lease_ttl_s;
    config.cluster_settings.retention_ns = setup.retention_s * kSecond;
    config.cluster_settings.reference_node = 1;
    const ClusterLeaderOptions options = LeaderOptionsFor(config);
    const int64_t w = setup.window_ns;
    const int64_t start = kBase - 150 * kSecond, death = kBase + w / 3;
    const int64_t takeover = death + 2 * setup.lease_ttl_s * kSecond;
    // Every window that has ended by `now` (the agents keep publishing).
    const auto windows_until = [&](int64_t from, int64_t now) {
      std::vector<WindowSummary> out;
      for (int64_t ws = from; ws + w <= now; ws += w) {
        for (WindowSummary s : AllWindows(ws)) {
          s.estimate.x0_ns = ws + w / 2;
          out.push_back(s);
        }
      }
      return out;
    };
    // The widest gap: an old leader that solved only by its timer (none of
    // its instants complete early), so up to its death less the solve's lag.
    ClusterLeaderOptions timer_only = options;
    timer_only.solve_when_complete = false;
    ClusterLeader old_leader(1, timer_only);
    old_leader.TakeOffice(start);
    int64_t last_old = 0;
    for (int64_t now = start; now <= death; now += w) {
      old_leader.Add(windows_until(now - w, now), now);
      for (const OffsetsSnapshot& s : old_leader.SolveDue(now)) last_old = s.reference_instant_ns;
    }
    for (const OffsetsSnapshot& s : old_leader.SolveDue(death)) last_old = s.reference_instant_ns;
    ASSERT_GT(last_old, 0);
    // As etcd does it: the election is won first, the backlog is read
    // after it, while the leader's loop turns every 100 ms.
    ClusterLeader new_leader(2, options);
    new_leader.TakeOffice(takeover);
    const int64_t backlog_at = takeover + kSecond / 2;
    for (int64_t now = takeover; now < backlog_at; now += kSecond / 10) {
      EXPECT_TRUE(new_leader.SolveDue(now).empty()) << "solved with no window held";
    }
    new_leader.Add(windows_until(start, backlog_at), backlog_at);
    std::map<int64_t, bool> first_turn;  // instant -> every node reachable
    for (const OffsetsSnapshot& s : new_leader.SolveDue(backlog_at)) {
      bool all = !s.nodes.empty();
      for (const NodeSolution& n : s.nodes) all = all && n.reachable;
      first_turn[s.reference_instant_ns] = all;
    }
    // Every instant after the old leader's last that is ready now, solved
    // on its windows.
    int checked = 0;
    for (int64_t t = last_old + w; t + options.ready_after_ns <= backlog_at; t += w, ++checked) {
      ASSERT_TRUE(first_turn.count(t)) << "window " << w << " ns, lease " << setup.lease_ttl_s
                                       << " s: instant " << t - last_old << " ns after the old leader's last lost";
      EXPECT_TRUE(first_turn[t]) << "instant " << t << " solved without its windows";
    }
    EXPECT_GE(checked, 2);
    EXPECT_EQ(new_leader.stats().instants_skipped, 0u);
  }
  // Never back past the windows the retention keeps: those instants would
  // be solved with every node unreachable.
  AgentConfig short_retention;
  short_retention.cluster_settings.retention_ns = 10 * kSecond;
  const ClusterLeaderOptions o = LeaderOptionsFor(short_retention);
  EXPECT_LE(o.backfill_ns + o.solver.validity_horizon_ns, o.retention_ns);
}

// A leader that starts with the cluster solves nothing before the first
// window it holds: no snapshot of nodes that no window could serve, however
// far back the backfill reaches.
TEST(ClusterLeader, AColdStartSolvesFromTheFirstWindowHeld) {
  ClusterLeaderOptions o = Options();
  o.backfill_ns = 20 * kSecond;
  ClusterLeader leader(1, o);
  leader.TakeOffice(kBase);
  for (int64_t now = kBase; now < kBase + 3 * kStep; now += kSecond / 10) EXPECT_TRUE(leader.SolveDue(now).empty());
  leader.Add(AllWindows(kBase + kStep), kBase + 3 * kStep);
  leader.Add(AllWindows(kBase + 2 * kStep), kBase + 3 * kStep);
  const auto solved = leader.SolveDue(kBase + 5 * kStep);
  ASSERT_FALSE(solved.empty());
  EXPECT_EQ(solved.front().reference_instant_ns, kBase + kStep + kStep / 2);
  for (const OffsetsSnapshot& s : solved) {
    for (const NodeSolution& n : s.nodes) EXPECT_TRUE(n.reachable) << n.node << " at " << s.reference_instant_ns;
  }
  EXPECT_EQ(leader.stats().instants_skipped, 0u);
}

// Every prober fits on its fit clock (F = REALTIME - d, d its own): the
// estimates are F offsets, and what the leader publishes is in REALTIME.
TEST(ClusterLeader, SolvesOnTheFitClocksAndPublishesREALTIME) {
  // d of each node at the window centre, and REALTIME's rate against F.
  const std::map<uint32_t, std::pair<int64_t, int64_t>> d = {
      {1, {2'500'000, 300'000'000}}, {2, {-40'000, -1'200'000'000}}, {3, {0, 0}}, {4, {987'654, 50'000'000}}};
  ClusterLeader leader(1, Options());
  std::vector<WindowSummary> windows = AllWindows(kBase);
  for (WindowSummary& w : windows) {
    // The F offset: the REALTIME offset less the two nodes' d.
    w.estimate.beta_ns -= static_cast<double>(d.at(w.estimate.peer).first - d.at(w.estimate.node).first);
    const int64_t centre = w.window_start_ns + kStep / 2;
    if (w.estimate.node != 3) {  // node 3 fits in REALTIME: its summaries carry no point
      w.prober_clock = FitPoint{centre, centre + d.at(w.estimate.node).first, d.at(w.estimate.node).second};
    }
  }
  leader.TakeOffice(kBase);
  leader.Add(windows, kBase);
  const auto snaps = leader.SolveDue(kBase + 5 * kSecond);
  ASSERT_FALSE(snaps.empty());
  const OffsetsSnapshot& s = snaps.front();
  EXPECT_EQ(s.reference_instant_ns, leader.InstantAt(kBase / kStep) + d.at(1).first) << "T on the reference's REALTIME";
  for (const NodeSolution& n : s.nodes) {
    ASSERT_TRUE(n.reachable) << n.node;
    // The node's own instant of T lies its F offset from the reference's: d there, along its rate.
    const double f_offset = kOffsets.at(n.node) - static_cast<double>(d.at(n.node).first - d.at(1).first);
    const double d_there = static_cast<double>(d.at(n.node).first) + f_offset * static_cast<double>(d.at(n.node).second) * 1e-15;
    EXPECT_NEAR(n.offset_ns, f_offset + d_there - static_cast<double>(d.at(1).first), 0.6) << n.node;
    EXPECT_NEAR(n.drift, (static_cast<double>(d.at(n.node).second) - static_cast<double>(d.at(1).second)) * 1e-15, 1e-12)
        << n.node;
  }
  EXPECT_EQ(leader.stats().nodes_unmapped, 0u);
}

TEST(ClusterLeader, WithoutTheReferencesPointNearTheInstantNothingIsPublished) {
  ClusterLeader leader(1, Options());
  std::vector<WindowSummary> windows = AllWindows(kBase);
  // Node 1, the reference, sent no summary: its REALTIME against its fit clock is unknown.
  for (WindowSummary& w : windows) w.prober_clock = FitPoint{w.window_start_ns + kStep / 2, w.window_start_ns + kStep / 2, 0};
  std::erase_if(windows, [](const WindowSummary& w) { return w.estimate.node == 1; });
  leader.TakeOffice(kBase);
  leader.Add(windows, kBase);
  EXPECT_TRUE(leader.SolveDue(kBase + 5 * kSecond).empty());
  EXPECT_GE(leader.stats().instants_unmapped, 1u);
}

// A step marker carries no point of its clock; it must not pass for the
// identity where the node's own windows say REALTIME is 5 ms from F.
TEST(ClusterLeader, AStepMarkerIsNoPointOfItsClock) {
  ClusterLeader leader(1, Options());
  std::vector<WindowSummary> windows = AllWindows(kBase);
  for (WindowSummary& w : windows) {
    const int64_t centre = w.window_start_ns + kStep / 2;
    const int64_t d = w.estimate.node == 2 ? 5'000'000 : 0;
    if (w.estimate.peer == 2) w.estimate.beta_ns -= 5'000'000;  // F offsets
    if (w.estimate.node == 2) w.estimate.beta_ns += 5'000'000;
    w.prober_clock = FitPoint{centre, centre + d, 0};
  }
  WindowSummary marker = Window(2, 4, kBase);  // node 2's edge to 4 stepped in this window (after 2's others came)
  marker.estimator = std::string(kClockStepMarker);
  // Its knots are for the cluster's timebase file only: across a re-anchor
  // F is two clocks, and the leader maps nothing with them.
  marker.prober_anchor = FitAnchor{1'000, kBase, 0};
  marker.prober_knots = TimebaseExcerpt{{{1'000, kBase + 9'000'000, false}, {1'000 + 3 * kStep, kBase + 9'000'000 + 3 * kStep, false}}, false};
  windows.push_back(marker);
  leader.TakeOffice(kBase);
  leader.Add(windows, kBase);
  const auto snaps = leader.SolveDue(kBase + 5 * kSecond);
  ASSERT_FALSE(snaps.empty());
  const NodeSolution* n2 = snaps.front().Find(2);
  ASSERT_NE(n2, nullptr);
  ASSERT_TRUE(n2->reachable);
  EXPECT_NEAR(n2->offset_ns, kOffsets.at(2), 1.0) << "REALTIME through node 2's own points, not the marker's";
}

TEST(FitPointBook, TheMeanReferenceIsTheMeanOfTheNodesPublished) {
  FitPointBook book(4 * kSecond);
  const int64_t t = kBase + kStep / 2;
  auto summary = [&](uint32_t node, int64_t d) {
    WindowSummary w = Window(node, node == 1 ? 2 : 1, kBase);
    w.prober_clock = FitPoint{t, t + d, 0};
    return w;
  };
  book.Add(summary(1, 1'000), kStep);
  book.Add(summary(2, -3'000), kStep);
  book.Add(summary(3, 500), kStep);
  OffsetsSnapshot s;
  s.reference_instant_ns = t;
  for (uint32_t n : {1u, 2u, 3u, 4u}) {
    NodeSolution sol;
    sol.node = n;
    sol.reachable = true;
    sol.offset_ns = n == 4 ? 30.0 : -10.0;  // F offsets against their mean
    s.nodes.push_back(sol);
  }
  ASSERT_TRUE(book.ToRealtime(&s));
  EXPECT_FALSE(s.nodes[3].reachable) << "node 4 sent no point: it cannot be said in REALTIME";
  EXPECT_EQ(book.stats().nodes_unmapped, 1u);
  double sum = 0;
  for (int i = 0; i < 3; ++i) sum += s.nodes[i].offset_ns;
  EXPECT_NEAR(sum, 0, 1e-9) << "against the mean of the nodes published";
  EXPECT_NEAR(s.nodes[0].offset_ns - s.nodes[1].offset_ns, 4'000, 1e-9);
  EXPECT_NEAR(s.nodes[2].offset_ns - s.nodes[0].offset_ns, -500, 1e-9);
}

// A node whose daemon swings REALTIME's rate every half second (a kernel
// PLL slewing, hundreds of ppm): its solution at an instant 0.8 s from the
// window's centre, mapped along the centre point's rate, is off by the
// swings; through the node's knots it is exact.
struct SwingingNode {
  static constexpr int64_t kRaw0 = 7'000'000'000;
  FitAnchor anchor{kRaw0, kBase, 20'000'000'000};  // F runs 20 ppm fast of RAW
  std::vector<TimebaseKnot> knots;                 // REALTIME over RAW, every 0.5 s
  std::vector<int64_t> rates_ppm{400, -300, 500, -200, 100};

  SwingingNode() {
    int64_t raw = kRaw0, realtime = kBase + 3'000;
    for (size_t i = 0; i < rates_ppm.size(); ++i) {
      knots.push_back({raw, realtime, false});
      realtime += kSecond / 2 + rates_ppm[i] * 500'000 / 1'000;  // ppm over 0.5 s, in ns
      raw += kSecond / 2;
    }
    knots.push_back({raw, realtime, false});
  }
  // REALTIME − F at fit instant f, from the exact trajectory (long double).
  long double D(int64_t f) const {
    const long double raw = kRaw0 + static_cast<long double>(f - kBase) / (1 + 20e-6L);
    for (size_t i = 0; i + 1 < knots.size(); ++i) {
      if (raw <= knots[i + 1].raw_ns) {
        return knots[i].realtime_ns + (raw - knots[i].raw_ns) * (1 + rates_ppm[i] * 1e-6L) - f;
      }
    }
    return 0;
  }
  // REALTIME's rate against F at fit instant f, less 1.
  long double Rate(int64_t f) const {
    const long double raw = kRaw0 + static_cast<long double>(f - kBase) / (1 + 20e-6L);
    for (size_t i = 0; i + 1 < knots.size(); ++i) {
      if (raw <= knots[i + 1].raw_ns) return (1 + rates_ppm[i] * 1e-6L) / (1 + 20e-6L) - 1;
    }
    return 0;
  }
  TimebaseExcerpt Excerpt(size_t from, size_t to, bool provisional = false) const {
    return {{knots.begin() + static_cast<long>(from), knots.begin() + static_cast<long>(to) + 1}, provisional};
  }
};

OffsetsSnapshot OneNodeAgainstTheReference(int64_t t, double offset_ns) {
  OffsetsSnapshot s;
  s.reference_instant_ns = t;
  s.reference_node = 1;
  s.nodes = {NodeSolution{.node = 1, .reachable = true}, NodeSolution{.node = 2, .reachable = true, .offset_ns = offset_ns}};
  return s;
}

TEST(FitPointBook, ThroughTheNodesKnotsTheMappingFollowsEveryRateChange) {
  const SwingingNode n;
  const int64_t centre = kBase + kSecond;
  const int64_t t = kBase + 1'800'000'000;  // 0.8 s from the centre
  const double offset = 1'234.0;            // node 2's F offset at T
  const long double exact = offset + n.D(t + 1'234);  // the reference is its own F
  FitPoint point{centre, centre + static_cast<int64_t>(std::llround(n.D(centre))), 0};
  point.rate_fine = 100'000'000'000 - 20'000'000'000;  // the rate at the centre against F: +100 − 20 ppm, roughly

  FitPointBook by_point(4 * kSecond);
  by_point.Add(1, FitPoint{centre, centre, 0});
  by_point.Add(2, point);
  OffsetsSnapshot s1 = OneNodeAgainstTheReference(t, offset);
  ASSERT_TRUE(by_point.ToRealtime(&s1));
  EXPECT_GT(std::fabs(s1.nodes[1].offset_ns - static_cast<double>(exact)), 50'000.0) << "the point alone misses the swings";

  FitPointBook book(4 * kSecond);
  book.Add(1, FitPoint{centre, centre, 0});
  book.Add(2, point);
  book.AddKnots(2, n.anchor, n.Excerpt(0, 2));
  book.AddKnots(2, n.anchor, n.Excerpt(2, 5));  // the next window's, overlapping at its first knot
  OffsetsSnapshot s2 = OneNodeAgainstTheReference(t, offset);
  ASSERT_TRUE(book.ToRealtime(&s2));
  EXPECT_NEAR(s2.nodes[1].offset_ns, static_cast<double>(exact), 1.0);
  EXPECT_NEAR(s2.nodes[1].drift, (n.rates_ppm[3] * 1e-6) / (1 + 20e-6) - 20e-6 / (1 + 20e-6), 1e-9)
      << "REALTIME's rate against F in the segment holding the instant";
  EXPECT_EQ(book.stats().mapped_by_knots, 1u);
  EXPECT_EQ(book.stats().mapped_by_point, 2u) << "the reference had a point only (as a node and as the reference)";
  // The solution says with what it was mapped, for the node's clock page.
  ASSERT_TRUE(s2.nodes[1].discipline.has_value());
  EXPECT_NEAR(static_cast<double>(s2.nodes[1].discipline->d_ns), static_cast<double>(n.D(t + 1'234)), 1.0);
  EXPECT_NEAR(s2.nodes[1].discipline->rate, static_cast<double>(n.Rate(t + 1'234)), 1e-12);
  // The page's drift is mapped as the drift is: the same F drift gives the same.
  OffsetsSnapshot s3 = OneNodeAgainstTheReference(t, offset);
  s3.nodes[1].page_drift = 0.0;
  ASSERT_TRUE(book.ToRealtime(&s3));
  ASSERT_TRUE(s3.nodes[1].page_drift.has_value());
  EXPECT_DOUBLE_EQ(*s3.nodes[1].page_drift, s3.nodes[1].drift);
}

TEST(FitPointBook, AGapBetweenWindowsKnotsIsNotBridged) {
  const SwingingNode n;
  FitPointBook book(4 * kSecond);
  book.AddKnots(2, n.anchor, n.Excerpt(0, 1));
  book.AddKnots(2, n.anchor, n.Excerpt(3, 5));  // the window in between never came
  const int64_t in_gap = n.anchor.FitOfRaw(n.knots[2].raw_ns);
  book.Add(1, FitPoint{in_gap, in_gap, 0});
  book.Add(2, FitPoint{in_gap - kSecond, in_gap - kSecond + 3'000, 0});  // a point a second away
  OffsetsSnapshot s = OneNodeAgainstTheReference(in_gap, 0);
  ASSERT_TRUE(book.ToRealtime(&s));
  EXPECT_FALSE(s.nodes[1].reachable) << "a node that sends knots, none across the gap: unmapped, not extrapolated";
  EXPECT_EQ(book.stats().nodes_unmapped, 1u);
  // A provisional end is replaced by the next window's knots.
  FitPointBook replaced(4 * kSecond);
  TimebaseExcerpt first = n.Excerpt(0, 2, /*provisional=*/true);
  first.knots.back().realtime_ns += 40;  // the open segment's newest sample, not yet its end
  replaced.AddKnots(2, n.anchor, first);
  replaced.AddKnots(2, n.anchor, n.Excerpt(1, 5));
  replaced.Add(1, FitPoint{in_gap, in_gap, 0});
  OffsetsSnapshot s2 = OneNodeAgainstTheReference(in_gap, 0);
  ASSERT_TRUE(replaced.ToRealtime(&s2));
  EXPECT_NEAR(s2.nodes[1].offset_ns, static_cast<double>(n.D(in_gap)), 1.0);
}

// A node whose fit clock was anchored again jumped back 26 ms (the demo's
// node 3): the fit instants just before the jump come twice, once on each
// anchor. Before, the new anchor's knots replaced the old one's there, and a
// recomputed instant solved on the old fit clock came out 26 ms off.
TEST(FitPointBook, WhereTwoAnchorsShareFitInstantsNothingIsMapped) {
  const SwingingNode n;  // anchor A: knots over fit [kBase, kBase + 2.5 s]
  FitAnchor jumped = n.anchor;
  jumped.raw_ns = n.knots[3].raw_ns;                        // anchored again at the fourth knot,
  jumped.realtime_ns = n.anchor.FitOfRaw(jumped.raw_ns) - 26'000'000;  // its F 26 ms back
  std::vector<TimebaseKnot> after;
  for (size_t i = 3; i < n.knots.size(); ++i) after.push_back(n.knots[i]);
  for (int i = 1; i <= 4; ++i) after.push_back({n.knots.back().raw_ns + i * kSecond / 2,
                                                 n.knots.back().realtime_ns + i * kSecond / 2, false});
  FitPointBook book(4 * kSecond);
  book.AddKnots(2, n.anchor, n.Excerpt(0, 3));
  book.AddKnots(2, jumped, TimebaseExcerpt{after, false});
  const int64_t shared = n.anchor.FitOfRaw(n.knots[3].raw_ns) - 10'000'000;  // on both anchors' F
  book.Add(1, FitPoint{shared, shared, 0});
  OffsetsSnapshot s = OneNodeAgainstTheReference(shared, 0);
  ASSERT_TRUE(book.ToRealtime(&s));
  EXPECT_FALSE(s.nodes[1].reachable) << "either anchor's F: unmapped, not off by the jump";
  EXPECT_EQ(book.stats().nodes_unmapped, 1u);
  // Past the old anchor's last knot the fit instant is the new anchor's only.
  const int64_t later = jumped.FitOfRaw(after[3].raw_ns);
  book.Add(1, FitPoint{later, later, 0});
  OffsetsSnapshot s2 = OneNodeAgainstTheReference(later, 0);
  ASSERT_TRUE(book.ToRealtime(&s2));
  ASSERT_TRUE(s2.nodes[1].reachable);
  EXPECT_NEAR(s2.nodes[1].offset_ns, static_cast<double>(after[3].realtime_ns - later), 1.0);
}

// The start's check bent node 2's fit clock (docs/clocks.md "A new rate at
// the start"): from 0.2 s past the third knot, F runs 60 ppm fast of RAW
// instead of 20, keeping its value there. The window before the bend came
// with the old anchor and ends on the first knot past the bend; the one
// holding it with the new anchor only, from the knot before. Each fit
// instant is mapped through the anchor that made it, on either side of
// the bend and across it, in whichever order the two came. Before, the two
// anchors' F overlapped there and the instants around the bend went
// unmapped (the 5-node run's two unsolved instants).
TEST(FitPointBook, AcrossABendEachFitInstantIsMappedThroughItsOwnAnchor) {
  const SwingingNode n;
  const FitAnchor& a = n.anchor;
  const int64_t raw_bend = n.knots[2].raw_ns + 200'000'000;
  const FitAnchor b{raw_bend, a.FitOfRaw(raw_bend), 60'000'000'000};
  const auto fit_of_raw = [&](int64_t raw) { return raw < raw_bend ? a.FitOfRaw(raw) : b.FitOfRaw(raw); };
  const auto realtime_of_raw = [&](int64_t raw) -> long double {
    for (size_t i = 0; i + 1 < n.knots.size(); ++i) {
      if (raw <= n.knots[i + 1].raw_ns) {
        return n.knots[i].realtime_ns +
               static_cast<long double>(raw - n.knots[i].raw_ns) * (1 + n.rates_ppm[i] * 1e-6L);
      }
    }
    return 0;
  };
  for (bool bend_first : {false, true}) {
    FitPointBook book(4 * kSecond);
    if (bend_first) book.AddKnots(2, b, n.Excerpt(2, 5));
    book.AddKnots(2, a, n.Excerpt(0, 3));
    if (!bend_first) book.AddKnots(2, b, n.Excerpt(2, 5));
    for (int64_t raw :
         {n.knots[1].raw_ns + 100'000'000, n.knots[2].raw_ns + 100'000'000, raw_bend - 1'000, raw_bend + 1'000,
          n.knots[3].raw_ns - 100'000'000, n.knots[3].raw_ns + 100'000'000, n.knots[4].raw_ns + 300'000'000}) {
      const int64_t f = fit_of_raw(raw);
      book.Add(1, FitPoint{f, f, 0});
      OffsetsSnapshot s = OneNodeAgainstTheReference(f, 0);
      ASSERT_TRUE(book.ToRealtime(&s));
      ASSERT_TRUE(s.nodes[1].reachable) << "raw " << raw - raw_bend << " ns from the bend, bend first " << bend_first;
      EXPECT_NEAR(s.nodes[1].offset_ns, static_cast<double>(realtime_of_raw(raw) - f), 1.0)
          << "raw " << raw - raw_bend << " ns from the bend, bend first " << bend_first;
    }
    EXPECT_EQ(book.stats().nodes_unmapped, 0u);
  }
}

TEST(TimebaseKnotRelay, EachKnotOnceInOrderProvisionalNeverAndGapsMarked) {
  const SwingingNode n;
  TimebaseKnotRelay relay;
  auto summary = [&](uint32_t peer, TimebaseExcerpt e) {
    WindowSummary w = Window(2, peer, kBase);
    w.prober_anchor = n.anchor;
    w.prober_knots = std::move(e);
    return w;
  };
  relay.Add(summary(1, n.Excerpt(0, 2, true)));
  relay.Add(summary(3, n.Excerpt(0, 2, true)));  // the same window on another edge
  auto got = relay.Take();
  ASSERT_EQ(got.size(), 2u) << "knots 0 and 1; knot 2 was the open segment's newest sample";
  EXPECT_EQ(got[0].knot, n.knots[0]);
  EXPECT_EQ(got[1].knot, n.knots[1]);
  EXPECT_FALSE(got[0].after_gap);
  relay.Add(summary(1, n.Excerpt(1, 3)));
  got = relay.Take();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].knot, n.knots[2]);
  EXPECT_FALSE(got[0].after_gap) << "the window started on a knot already sent";
  relay.Add(summary(1, n.Excerpt(4, 5)));
  got = relay.Take();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].after_gap) << "knot 3's segment never came";
  EXPECT_FALSE(got[1].after_gap);
  EXPECT_TRUE(relay.Take().empty());
}

TEST(ClusterLeader, NotInOfficeSolvesNothing) {
  ClusterLeader leader(1, Options());
  leader.Add(AllWindows(kBase), kBase + kStep);
  EXPECT_TRUE(leader.SolveDue(kBase + 10 * kStep).empty());
}

TEST(ClusterMessages, WindowSummaryRoundTrip) {
  WindowSummary w = Window(3, 4, kBase, 0xfedcba9876543210ULL);
  w.estimate.alpha = 3.5e-5;
  std::vector<WindowSummary> batch = {w, Window(4, 3, kBase)};
  std::vector<WindowSummary> back;
  std::string error;
  ASSERT_TRUE(DecodeWindowSummaries(EncodeWindowSummaries(batch), &back, &error)) << error;
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].session, 0xfedcba9876543210ULL);  // 64 bits survive JSON
  EXPECT_EQ(back[0].estimate.x0_ns, w.estimate.x0_ns);
  EXPECT_DOUBLE_EQ(back[0].estimate.alpha, 3.5e-5);
  EXPECT_EQ(back[0].Key(), w.Key());
  EXPECT_FALSE(back[0].estimate.shared_ns.has_value()) << "not stated: absent, as from an older agent";
  // The part of the sigma the link's other direction shares travels too.
  w.estimate.shared_ns = 0.25 * w.estimate.uncertainty_ns;
  WindowSummary one;
  ASSERT_TRUE(DecodeWindowSummary(EncodeWindowSummary(w), &one, &error)) << error;
  ASSERT_TRUE(one.estimate.shared_ns.has_value());
  EXPECT_DOUBLE_EQ(*one.estimate.shared_ns, 0.25 * w.estimate.uncertainty_ns);
  EXPECT_FALSE(one.prober_clock.has_value()) << "not stated: the prober fits in REALTIME";
  // The prober's REALTIME against its fit clock, in exact integers.
  w.prober_clock = FitPoint{kBase + kStep / 2, kBase + kStep / 2 + 123'456'789'012, -45'678'901'234};
  ASSERT_TRUE(DecodeWindowSummary(EncodeWindowSummary(w), &one, &error)) << error;
  ASSERT_TRUE(one.prober_clock.has_value());
  EXPECT_EQ(*one.prober_clock, *w.prober_clock);
  EXPECT_FALSE(one.prober_knots.has_value());
  // The anchor and the knots over the window, in exact integers.
  w.prober_anchor = FitAnchor{9'000'000'000'123, kBase - 77, -12'345'678'901};
  w.prober_knots = TimebaseExcerpt{{{9'000'000'000'200, kBase, false}, {9'000'700'000'201, kBase + 700'000'777, false},
                                    {9'002'000'000'200, kBase + 2'000'000'001, false}},
                                   true};
  ASSERT_TRUE(DecodeWindowSummary(EncodeWindowSummary(w), &one, &error)) << error;
  ASSERT_TRUE(one.prober_anchor.has_value());
  ASSERT_TRUE(one.prober_knots.has_value());
  EXPECT_EQ(*one.prober_anchor, *w.prober_anchor);
  EXPECT_EQ(*one.prober_knots, *w.prober_knots);
}

// The grouped form: what a node's summaries of one window share goes once,
// with the union of the edges' knots; every summary comes back with its own
// estimate, and at least its own knots.
TEST(ClusterMessages, AWindowBatchSendsWhatANodesWindowSharesOnce) {
  auto knots = [](std::initializer_list<int> at) {
    TimebaseExcerpt e;
    for (int i : at) e.knots.push_back(TimebaseKnot{9'000'000'000'000 + i * 700'000'000LL, kBase + i * 700'000'001LL, false});
    e.last_provisional = true;
    return e;
  };
  std::vector<WindowSummary> batch;
  for (uint32_t peer : {1u, 2u, 3u}) {
    WindowSummary w = Window(4, peer, kBase);
    w.estimate.shared_ns = 2.5;
    w.prober_clock = FitPoint{kBase + kStep / 2, kBase + kStep / 2 + 1234, -567};
    w.prober_anchor = FitAnchor{9'000'000'000'000, kBase - 77, -567};
    // Each edge's fit span: its own excerpt of one timebase.
    w.prober_knots = peer == 1 ? knots({0, 1, 2}) : peer == 2 ? knots({1, 2, 3}) : knots({2, 3});
    batch.push_back(w);
  }
  batch.push_back(Window(4, 1, kBase + kStep));  // the next window: a group of its own
  WindowSummary step = Window(4, 2, kBase + kStep);
  step.estimator = std::string(kClockStepMarker);
  batch.push_back(step);
  batch.push_back(Window(3, 4, kBase));  // another node
  WindowSummary conflicting = batch[0];  // a knot at the same RAW with another REALTIME
  conflicting.estimate.peer = 5;
  conflicting.prober_knots->knots[1].realtime_ns += 1;
  batch.push_back(conflicting);

  const std::string text = EncodeWindowBatch(batch);
  std::vector<WindowSummary> back;
  std::string error;
  ASSERT_TRUE(DecodeWindowBatch(text, &back, &error)) << error;
  ASSERT_EQ(back.size(), batch.size());
  std::map<std::string, const WindowSummary*> by_key;
  for (const WindowSummary& w : back) by_key[w.Key()] = &w;
  ASSERT_EQ(by_key.size(), batch.size());
  for (const WindowSummary& want : batch) {
    const WindowSummary& got = *by_key.at(want.Key());
    EXPECT_EQ(got.estimate.x0_ns, want.estimate.x0_ns) << want.Key();
    EXPECT_DOUBLE_EQ(got.estimate.beta_ns, want.estimate.beta_ns) << want.Key();
    EXPECT_EQ(got.estimate.shared_ns, want.estimate.shared_ns) << want.Key();
    EXPECT_EQ(got.estimator, want.estimator) << want.Key();
    EXPECT_EQ(got.prober_clock, want.prober_clock) << want.Key();
    EXPECT_EQ(got.prober_anchor, want.prober_anchor) << want.Key();
    ASSERT_EQ(got.prober_knots.has_value(), want.prober_knots.has_value()) << want.Key();
    if (!want.prober_knots) continue;
    for (const TimebaseKnot& k : want.prober_knots->knots) {
      EXPECT_NE(std::find(got.prober_knots->knots.begin(), got.prober_knots->knots.end(), k),
                got.prober_knots->knots.end())
          << want.Key() << ": a knot of its own excerpt is missing";
    }
  }
  // The three edges of node 4's first window share the union of their knots;
  // the conflicting one kept its own.
  EXPECT_EQ(by_key.at(batch[2].Key())->prober_knots->knots.size(), 4u);
  EXPECT_EQ(*by_key.at(conflicting.Key())->prober_knots, *conflicting.prober_knots);
  // Six peers as an agent sends them: about half the bytes of the array form.
  std::vector<WindowSummary> six;
  for (uint32_t peer = 5; peer <= 10; ++peer) {
    WindowSummary w = batch[0];
    w.estimate.peer = peer;
    six.push_back(w);
  }
  EXPECT_LT(EncodeWindowBatch(six).size() * 10, EncodeWindowSummaries(six).size() * 6)
      << EncodeWindowBatch(six).size() << " vs " << EncodeWindowSummaries(six).size();

  // Refused, with a reason: no windows, no edges, a window field in an edge.
  const std::string one_edge = EncodeWindowBatch({&batch[3], 1});
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"[]", "not a JSON object"},
           {R"({"windows":{}})", "not an array"},
           {R"({"windows":[{"node":4}]})", "edges"},
           {R"({"windows":[{"node":4,"edges":[]}]})", "non-empty"},
           {std::string(one_edge).replace(one_edge.find("\"edges\":[{}]"), 12, "\"edges\":[{\"node\":9}]"),
            "not a field of an edge"}}) {
    EXPECT_FALSE(DecodeWindowBatch(bad, &back, &error)) << bad;
    EXPECT_NE(error.find(why), std::string::npos) << bad << " -> " << error;
  }
}

// The simple reading of a grouped batch, from the public single-summary
// decoder: each edge merged over a copy of its window, then decoded whole
// (what DecodeWindowBatch did before it read the two in place).
bool ReferenceDecodeWindowBatch(const std::string& text, std::vector<WindowSummary>* out, std::string* error) {
  static const std::set<std::string> kEdgeFields = {"peer",           "x0_ns",     "beta_ns",  "alpha",
                                                    "uncertainty_ns", "shared_ns", "estimator"};
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("windows") || !doc["windows"].is_array()) {
    *error = "structure";
    return false;
  }
  out->clear();
  for (const nlohmann::json& g : doc["windows"]) {
    if (!g.is_object() || !g.contains("edges") || !g["edges"].is_array() || g["edges"].empty()) {
      *error = "structure";
      return false;
    }
    for (const nlohmann::json& e : g["edges"]) {
      if (!e.is_object()) {
        *error = "structure";
        return false;
      }
      nlohmann::json one = g;
      one.erase("edges");
      for (const auto& [k, v] : e.items()) {
        if (!kEdgeFields.count(k)) {
          *error = "\"" + k + "\" is not a field of an edge";
          return false;
        }
        one[k] = v;
      }
      WindowSummary w;
      if (!DecodeWindowSummary(one.dump(), &w, error)) return false;
      out->push_back(w);
    }
  }
  return true;
}

bool SameSummary(const WindowSummary& a, const WindowSummary& b) {
  const auto same_double = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  const bool same_knots = a.prober_knots.has_value() == b.prober_knots.has_value() &&
                          (!a.prober_knots || (a.prober_knots->knots == b.prober_knots->knots &&
                                               a.prober_knots->last_provisional == b.prober_knots->last_provisional));
  return a.estimate.node == b.estimate.node && a.estimate.peer == b.estimate.peer &&
         a.estimate.x0_ns == b.estimate.x0_ns && same_double(a.estimate.beta_ns, b.estimate.beta_ns) &&
         same_double(a.estimate.alpha, b.estimate.alpha) &&
         same_double(a.estimate.uncertainty_ns, b.estimate.uncertainty_ns) &&
         a.estimate.shared_ns == b.estimate.shared_ns && a.session == b.session &&
         a.window_start_ns == b.window_start_ns && a.estimator == b.estimator && a.prober_clock == b.prober_clock &&
         a.prober_anchor == b.prober_anchor && same_knots;
}

// A random value of any JSON type, some of them near what the fields take.
nlohmann::json RandomValue(std::mt19937_64& rng) {
  switch (rng() % 12) {
    case 0:
      return static_cast<int64_t>(rng() % 2000) - 1000;
    case 1:
      return static_cast<int64_t>(rng());
    case 2:
      return rng();
    case 3:
      return std::to_string(rng() % 100);
    case 4:
      return "x";
    case 5:
      return 1e300 * static_cast<double>(rng() % 3);
    case 6:
      return 0.5;
    case 7:
      return true;
    case 8:
      return nullptr;
    case 9:
      return nlohmann::json::object({{"fit_ns", 1}, {"realtime_ns", 2}, {"rate_fine", 0}});
    case 10:
      return nlohmann::json::array({nlohmann::json::array({1, 2}), nlohmann::json::array({3, 4})});
    default:
      return nlohmann::json::array();
  }
}

// The grouped batch read in place gives what the simple reading gives, on
// 400 generated batches (CHRONOLINK_PROPERTY_CASES) (with and without the prober's clock, knots, shared_ns,
// edge fields alike or not) and on mutations of them: the same summaries,
// or the same refusal with the same reason.
TEST(ClusterMessages, AGroupedBatchReadInPlaceIsWhatTheSimpleReadingGives) {
  std::mt19937_64 rng(11);
  const char* kFields[] = {"node",  "peer",      "session",        "window_start_ns", "x0_ns",        "beta_ns",
                           "alpha", "shared_ns", "uncertainty_ns", "estimator",       "prober_clock", "prober_timebase",
                           "edges", "zzz"};
  int valid = 0, refused = 0;
  const int64_t rounds = trace::testing::CasesFromEnvironment(400);  // 100 under qemu
  for (int64_t round = 0; round < rounds; ++round) {
    std::vector<WindowSummary> batch;
    const int windows = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < windows; ++k) {
      const int64_t start = kBase + k * kStep;
      const int edges = 1 + static_cast<int>(rng() % 7);
      for (int e = 0; e < edges; ++e) {
        WindowSummary w = Window(1, static_cast<uint32_t>(2 + e % 3), start, 7 + rng() % 2);
        w.estimate.x0_ns += rng() % 2 == 0 ? 0 : static_cast<int64_t>(rng() % 1000);
        w.estimate.beta_ns += static_cast<double>(rng() % 1000) / 8;
        if (rng() % 2 == 0) w.estimate.shared_ns = 5.0;
        if (rng() % 4 == 0) w.estimator = "min_delay";
        if (k % 2 == 0) {
          w.prober_clock = FitPoint{start, start + 1000, 5};
          w.prober_anchor = FitAnchor{start - 7, start - 7 + 900, 3};
          TimebaseExcerpt ex;
          ex.knots = {{start, start + 1000, false}, {start + kStep, start + kStep + 1000 + 10, false}};
          ex.last_provisional = rng() % 2 == 0;
          w.prober_knots = ex;
        }
        batch.push_back(w);
      }
    }
    nlohmann::json doc = nlohmann::json::parse(EncodeWindowBatch(batch));
    const int mutations = static_cast<int>(rng() % 3);
    for (int m = 0; m < mutations; ++m) {
      nlohmann::json& g = doc["windows"][rng() % doc["windows"].size()];
      nlohmann::json& target =
          rng() % 2 == 0 || !g["edges"].is_array() || g["edges"].empty() ? g : g["edges"][rng() % g["edges"].size()];
      if (!target.is_object()) continue;
      const char* field = kFields[rng() % std::size(kFields)];
      if (rng() % 3 == 0) {
        target.erase(field);
      } else {
        target[field] = RandomValue(rng);
      }
    }
    const std::string text = doc.dump();
    std::vector<WindowSummary> fast, simple;
    std::string fast_error, simple_error;
    const bool fast_ok = DecodeWindowBatch(text, &fast, &fast_error);
    const bool simple_ok = ReferenceDecodeWindowBatch(text, &simple, &simple_error);
    ASSERT_EQ(fast_ok, simple_ok) << text << "\n" << fast_error << " / " << simple_error;
    if (!fast_ok) {
      ++refused;
      if (simple_error != "structure") {
        EXPECT_EQ(fast_error, simple_error) << text;
      }
      continue;
    }
    ++valid;
    ASSERT_EQ(fast.size(), simple.size()) << text;
    for (size_t i = 0; i < fast.size(); ++i) EXPECT_TRUE(SameSummary(fast[i], simple[i])) << text << " #" << i;
  }
  // Both kinds were tried in numbers.
  EXPECT_GT(valid, rounds / 5);
  EXPECT_GT(refused, rounds / 5);
}

TEST(ClusterMessages, BadWindowSummariesAreRefusedWithAReason) {
  const std::string good = EncodeWindowSummary(Window(1, 2, kBase));
  WindowSummary w;
  std::string error;
  EXPECT_TRUE(DecodeWindowSummary(good, &w, &error)) << error;
  const std::pair<std::string, std::string> bad[] = {
      {"not json", "malformed"},
      {"[]", "not a JSON object"},
      {R"({"node":1})", "missing"},
      {R"({"node":1,"peer":1,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"estimator":"m"})",
       "same"},
      {R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0.5,"uncertainty_ns":1,"estimator":"m"})",
       "10000 ppm"},
      {R"({"node":1,"peer":2,"session":"x","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"estimator":"m"})",
       "session"},
      {R"({"node":-1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"estimator":"m"})",
       "out of range"},
      {R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0.5,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"estimator":"m"})",
       "not an integer"},
      {R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":-1,"estimator":"m"})",
       "negative"},
      {R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"shared_ns":2,"estimator":"m"})",
       "\"shared_ns\" is not within [0, uncertainty_ns]"},
      {R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"shared_ns":-0.5,"estimator":"m"})",
       "shared_ns"},
      {R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"shared_ns":"x","estimator":"m"})",
       "shared_ns"},
      {R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"estimator":"m","prober_clock":7})",
       "\"prober_clock\" is not a JSON object"},
      {R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"estimator":"m","prober_clock":{"fit_ns":1,"realtime_ns":2}})",
       "missing field \"rate_fine\""},
      {R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"estimator":"m","prober_clock":{"fit_ns":1,"realtime_ns":2,"rate_fine":300000000000000}})",
       "beyond 25 %"},
      {R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"estimator":"m","prober_clock":{"fit_ns":1.5,"realtime_ns":2,"rate_fine":0}})",
       "not an integer"},
  };
  const std::string head =
      R"({"node":1,"peer":2,"session":"1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"estimator":"m","prober_timebase":)";
  const std::string anchor = R"("anchor":{"raw_ns":5,"realtime_ns":9,"rate_fine":0})";
  const std::pair<std::string, std::string> bad_timebase[] = {
      {"[]", "\"prober_timebase\" is not a JSON object"},
      {R"({"knots":[[1,2],[3,4]],"last_provisional":false})", "missing field \"anchor\""},
      {"{" + anchor + R"(,"knots":[[1,2]],"last_provisional":false})", "2 to 64 knots"},
      {"{" + anchor + R"(,"knots":[[1,2],[3]],"last_provisional":false})", "pair of integers"},
      {"{" + anchor + R"(,"knots":[[1,2],[3,4.5]],"last_provisional":false})", "not an integer"},
      {"{" + anchor + R"(,"knots":[[1000,2000],[900,2100]],"last_provisional":false})", "increase in both clocks"},
      {"{" + anchor + R"(,"knots":[[1000,2000],[2000,4000]],"last_provisional":false})", "within 25 %"},
      {"{" + anchor + R"(,"knots":[[1000,2000],[2000,3000]]})", "missing field \"last_provisional\""},
      {"{" + anchor + R"(,"knots":[[1000,2000],[2000,3000]],"last_provisional":1})", "not a boolean"},
      {R"({"anchor":{"raw_ns":5,"realtime_ns":9,"rate_fine":300000000000000},"knots":[[1,2],[3,4]],"last_provisional":false})",
       "beyond 25 %"},
  };
  for (const auto& [timebase, why] : bad_timebase) {
    error.clear();
    EXPECT_FALSE(DecodeWindowSummary(head + timebase + "}", &w, &error)) << timebase;
    EXPECT_NE(error.find(why), std::string::npos) << timebase << " -> " << error;
  }
  std::string many = "{" + anchor + R"(,"knots":[)";
  for (int i = 0; i < 65; ++i) {
    const std::string v = std::to_string(1000 * (i + 1));
    many += (i ? ",[" : "[") + v + "," + v + "]";
  }
  error.clear();
  EXPECT_FALSE(DecodeWindowSummary(head + many + R"(],"last_provisional":false}})", &w, &error));
  EXPECT_NE(error.find("2 to 64 knots"), std::string::npos) << error;
  for (const auto& [text, why] : bad) {
    error.clear();
    EXPECT_FALSE(DecodeWindowSummary(text, &w, &error)) << text;
    EXPECT_NE(error.find(why), std::string::npos) << text << " -> " << error;
  }
  std::vector<WindowSummary> batch;
  EXPECT_FALSE(DecodeWindowSummaries("{}", &batch, &error));
  EXPECT_FALSE(DecodeWindowSummaries("[" + good + ",7]", &batch, &error));
}

TEST(ClusterMessages, OffsetsSnapshotRoundTrip) {
  ClusterLeader leader(2, Options());
  leader.TakeOffice(kBase);
  leader.Add(AllWindows(kBase), kBase + kStep);
  auto solved = leader.SolveDue(kBase + 4 * kStep);
  ASSERT_FALSE(solved.empty());
  OffsetsSnapshot s = solved[0];
  s.nodes.push_back(NodeSolution{.node = 9});  // an unreachable one
  OffsetsSnapshot back;
  std::string error;
  ASSERT_TRUE(DecodeOffsetsSnapshot(EncodeOffsetsSnapshot(s), &back, &error)) << error;
  EXPECT_EQ(back.leader, 2u);
  EXPECT_EQ(back.reference_node, std::optional<uint32_t>(1));
  EXPECT_EQ(back.reference_instant_ns, s.reference_instant_ns);
  ASSERT_EQ(back.nodes.size(), s.nodes.size());
  EXPECT_DOUBLE_EQ(back.Find(4)->offset_ns, s.Find(4)->offset_ns);
  EXPECT_FALSE(back.Find(9)->reachable);
  // Each node's discipline at T, as the leader mapped it, for its clock page.
  s.nodes[0].discipline = FitDiscipline{-12'345, 3.5e-4};
  ASSERT_TRUE(DecodeOffsetsSnapshot(EncodeOffsetsSnapshot(s), &back, &error)) << error;
  for (size_t i = 0; i < s.nodes.size(); ++i) EXPECT_EQ(back.nodes[i].discipline, s.nodes[i].discipline) << i;
  const std::string one_node =
      R"({"leader":1,"sequence":"1","t_ns":0,"reference":"mean","recomputed":false,"nodes":[{"node":1,"reachable":true,)"
      R"("offset_ns":0,"drift":0,"uncertainty_ns":1,"residual_ns":0,"component":0,"edges_used":1,"discipline":)";
  ASSERT_TRUE(DecodeOffsetsSnapshot(one_node + R"({"d_ns":-5,"rate":1e-4}}]})", &back, &error)) << error;
  EXPECT_EQ(back.nodes[0].discipline, (FitDiscipline{-5, 1e-4}));
  for (const char* bad : {R"({"d_ns":-5,"rate":0.3})", R"({"d_ns":"-5","rate":0})", R"({"d_ns":4000000000000,"rate":0})",
                          R"({"rate":0})", R"([1,2])"}) {
    error.clear();
    EXPECT_FALSE(DecodeOffsetsSnapshot(one_node + bad + "}]}", &back, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  // The page's drift, where the leader's line gave one (page_drift_history.h).
  s.nodes[0].page_drift = -2.5e-6;
  ASSERT_TRUE(DecodeOffsetsSnapshot(EncodeOffsetsSnapshot(s), &back, &error)) << error;
  for (size_t i = 0; i < s.nodes.size(); ++i) EXPECT_EQ(back.nodes[i].page_drift, s.nodes[i].page_drift) << i;
  const std::string with_discipline = one_node + R"({"d_ns":-5,"rate":1e-4},"page_drift":)";
  ASSERT_TRUE(DecodeOffsetsSnapshot(with_discipline + "3e-6}]}", &back, &error)) << error;
  EXPECT_EQ(back.nodes[0].page_drift, std::optional<double>(3e-6));
  for (const char* bad : {"0.3", "\"3e-6\"", "null", "1e400"}) {
    error.clear();
    EXPECT_FALSE(DecodeOffsetsSnapshot(with_discipline + bad + "}]}", &back, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  EXPECT_FALSE(DecodeOffsetsSnapshot(R"({"leader":1})", &back, &error));
  EXPECT_FALSE(DecodeOffsetsSnapshot(R"({"leader":1,"sequence":"1","t_ns":0,"reference":"median","recomputed":false,"nodes":[]})",
                                     &back, &error));
}

// The snapshot's sequence decides which snapshot is newest: "-1" must not
// read as 2^64 - 1 (std::stoull did), nor "12abc" as 12.
TEST(ClusterMessages, OffsetsSnapshotSequenceIsDigitsOnly) {
  auto with_sequence = [](const std::string& seq) {
    return R"({"leader":1,"sequence":)" + seq + R"(,"t_ns":0,"reference":"mean","recomputed":false,"nodes":[]})";
  };
  OffsetsSnapshot back;
  std::string error;
  ASSERT_TRUE(DecodeOffsetsSnapshot(with_sequence(R"("18446744073709551615")"), &back, &error)) << error;
  EXPECT_EQ(back.sequence, 18446744073709551615ULL);
  ASSERT_TRUE(DecodeOffsetsSnapshot(with_sequence(R"("0")"), &back, &error)) << error;
  EXPECT_EQ(back.sequence, 0u);
  const std::pair<std::string, std::string> bad[] = {
      {R"("-1")", "is not a decimal string"},  {R"("+1")", "is not a decimal string"},
      {R"(" 1")", "is not a decimal string"},  {R"("1 ")", "is not a decimal string"},
      {R"("12abc")", "is not a decimal string"}, {R"("0x10")", "is not a decimal string"},
      {R"("")", "is not a decimal string"},    {"7", "is not a decimal string"},
      {R"("18446744073709551616")", "is out of range"},
  };
  for (const auto& [seq, why] : bad) {
    error.clear();
    back.sequence = 42;
    EXPECT_FALSE(DecodeOffsetsSnapshot(with_sequence(seq), &back, &error)) << seq;
    EXPECT_NE(error.find("\"sequence\" " + why), std::string::npos) << seq << " -> " << error;
    EXPECT_EQ(back.sequence, 42u) << seq;
  }
  // Window summaries' sessions go through the same reader.
  WindowSummary w;
  error.clear();
  EXPECT_FALSE(DecodeWindowSummary(
      R"({"node":1,"peer":2,"session":"-1","window_start_ns":0,"x0_ns":0,"beta_ns":0,"alpha":0,"uncertainty_ns":1,"estimator":"m"})",
      &w, &error));
  EXPECT_NE(error.find("\"session\" is not a decimal string"), std::string::npos) << error;
}

TEST(WindowOutbox, KeepsUntilDeliveredRewindsAndExpires) {
  WindowOutbox box(10 * kSecond);
  const auto w = AllWindows(kBase);
  box.Add(w, 0);
  EXPECT_EQ(box.pending(), w.size());
  const auto first = box.Pending(4);
  ASSERT_EQ(first.size(), 4u);
  box.MarkDelivered(4);
  EXPECT_EQ(box.pending(), w.size() - 4);
  EXPECT_EQ(box.delivered(), 4u);
  // A new leader: everything again, but deliveries are not counted twice.
  box.Rewind();
  EXPECT_EQ(box.pending(), w.size());
  box.MarkDelivered(w.size());
  EXPECT_EQ(box.delivered(), w.size());
  box.Add(w, 5 * kSecond);
  box.Expire(12 * kSecond);  // the first batch is past the retention
  EXPECT_EQ(box.held(), w.size());
  EXPECT_EQ(box.pending(), w.size());
  EXPECT_EQ(box.dropped(), 0u);
  box.Expire(20 * kSecond);  // the second never went out
  EXPECT_EQ(box.held(), 0u);
  EXPECT_EQ(box.dropped(), w.size());
}

// A new leader gets again only what it can use: what was added within the
// resend horizon; what is pending stays pending.
TEST(WindowOutbox, RewindsOnlyTheRecentPast) {
  WindowOutbox box(120 * kSecond);
  const auto w = AllWindows(kBase);
  box.Add(w, 0);
  box.Add(w, 30 * kSecond);
  box.Add(w, 40 * kSecond);
  box.MarkDelivered(2 * w.size());  // the third batch not yet out
  box.Rewind(25 * kSecond);
  EXPECT_EQ(box.pending(), 2 * w.size());  // the second again, the third still
  EXPECT_EQ(box.Pending(1)[0].Key(), w[0].Key());
  box.MarkDelivered(box.pending());
  box.Rewind(50 * kSecond);  // nothing that recent
  EXPECT_EQ(box.pending(), 0u);
  box.Rewind(-1);  // all of it
  EXPECT_EQ(box.pending(), 3 * w.size());
}

TEST(ClockPage, MappingFromSolutionInvertsTheOffset) {
  NodeSolution s;
  s.node = 4;
  s.reachable = true;
  s.offset_ns = 12'000.4;  // node − cluster
  s.drift = 50e-6;
  s.uncertainty_ns = 3.2;
  const int64_t t = kBase + kStep / 2;
  const ClockMapping m = MappingFromSolution(s, t, 5 * kStep, 100'000);
  ASSERT_TRUE(m.valid);
  EXPECT_EQ(m.local_ref_ns, t + 12'000);
  // The node's clock reads local_ref at cluster instant t.
  EXPECT_EQ(m.ToCluster(m.local_ref_ns), t);
  // One second of node clock later the cluster clock has advanced 1/(1+drift) s.
  const double expected = static_cast<double>(kSecond) / (1 + 50e-6);
  EXPECT_NEAR(static_cast<double>(m.ToCluster(m.local_ref_ns + kSecond) - t), expected, 1.0);
  EXPECT_EQ(m.uncertainty_ns, 4);
  EXPECT_EQ(m.valid_until_ns, m.local_ref_ns + 5 * kStep);
  // The leader's line through the node's last offsets, where it sent one,
  // is the drift the page extrapolates with; a wild one gives no mapping.
  s.page_drift = 50.2e-6;
  const ClockMapping lined = MappingFromSolution(s, t, 5 * kStep, 100'000);
  ASSERT_TRUE(lined.valid);
  EXPECT_NEAR(static_cast<double>(lined.ToCluster(lined.local_ref_ns + kSecond) - t), kSecond / (1 + 50.2e-6), 1.0);
  s.page_drift = 0.02;
  EXPECT_FALSE(MappingFromSolution(s, t, 5 * kStep, 100'000).valid);
  s.page_drift.reset();
  s.reachable = false;
  EXPECT_FALSE(MappingFromSolution(s, t, kStep, 0).valid);
}

// Between solutions the page follows the node's own daemon. The swinging
// node's solution (mapped through its knots, as the leader maps it), followed
// with REALTIME − F as the agent's own samples give it, is within 2 ns of
// the cluster clock at every instant of the next two seconds, and its drift
// is the local clock's rate there; the straight line is off by the swings.
TEST(ClockPage, BetweenSolutionsThePageFollowsTheNodesOwnDiscipline) {
  const SwingingNode n;
  const int64_t t = kBase + 300'000'000;
  const int64_t offset = 1'234;  // node 2's F − the reference's (its own REALTIME), constant
  FitPointBook book(4 * kSecond);
  book.Add(1, FitPoint{t, t, 0});
  book.AddKnots(2, n.anchor, n.Excerpt(0, 5));
  OffsetsSnapshot s = OneNodeAgainstTheReference(t, static_cast<double>(offset));
  ASSERT_TRUE(book.ToRealtime(&s));
  const NodeSolution& mine = s.nodes[1];
  ASSERT_TRUE(mine.discipline.has_value());
  const ClockMapping solved = MappingFromSolution(mine, s.reference_instant_ns, 10 * kSecond, 100'000);
  ASSERT_TRUE(solved.valid);
  // Node 2's F where its REALTIME reads `local` (F + D(F) = local), and the
  // cluster (the reference's F) there.
  auto fit_of = [&](int64_t local) {
    int64_t f = local;
    for (int i = 0; i < 20; ++i) f = local - static_cast<int64_t>(std::llround(n.D(f)));
    return f;
  };
  int64_t straight_worst = 0;
  for (int i = 1; i <= 42; ++i) {
    const int64_t local = solved.local_ref_ns + i * 50'000'000 + 7;
    const int64_t f = fit_of(local);
    const int64_t cluster = f - offset;
    const FitDiscipline live{static_cast<int64_t>(std::llround(n.D(f))), static_cast<double>(n.Rate(f))};
    const ClockMapping m = FollowOwnDiscipline(solved, *mine.discipline, local, live);
    ASSERT_TRUE(m.valid);
    EXPECT_EQ(m.local_ref_ns, local);
    EXPECT_LE(std::llabs(m.ToCluster(local) - cluster), 2) << "at +" << i * 50 << " ms";
    const double rate_here = 1 / (1 + static_cast<double>(n.Rate(f))) - 1;  // d(cluster − local)/d(local)
    EXPECT_NEAR(static_cast<double>(m.drift_ppt), rate_here * 1e12, 10.0) << "at +" << i * 50 << " ms";
    EXPECT_EQ(m.valid_until_ns, solved.valid_until_ns) << "stale when the solution is";
    EXPECT_EQ(m.uncertainty_ns, solved.UncertaintyAt(local)) << "growing from the solved instant";
    straight_worst = std::max<int64_t>(straight_worst, std::llabs(solved.ToCluster(local) - cluster));
  }
  EXPECT_GT(straight_worst, 50'000) << "the straight line misses the swings";
  // Nothing to follow on a page with no mapping.
  EXPECT_FALSE(FollowOwnDiscipline(ClockMapping{}, *mine.discipline, t, *mine.discipline).valid);
}

// What no real clock gives (an instant at the end of time, offsets or
// drifts beyond any crystal, NaN) yields no mapping instead of an int64
// overflow: a page that says "no mapping" rather than garbage.
TEST(ClockPage, ImpossibleSolutionsGiveNoMapping) {
  NodeSolution s;
  s.node = 2;
  s.reachable = true;
  s.offset_ns = 1500;
  s.uncertainty_ns = 10;
  EXPECT_TRUE(MappingFromSolution(s, kBase, 10 * kSecond, 100'000).valid);
  EXPECT_FALSE(MappingFromSolution(s, std::numeric_limits<int64_t>::max(), 10 * kSecond, 100'000).valid);
  EXPECT_FALSE(MappingFromSolution(s, std::numeric_limits<int64_t>::max() - kSecond, 10 * kSecond, 100'000).valid);
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(), 1e19}) {
    NodeSolution b = s;
    b.offset_ns = bad;
    EXPECT_FALSE(MappingFromSolution(b, kBase, 10 * kSecond, 100'000).valid) << bad;
    b = s;
    b.drift = bad;
    EXPECT_FALSE(MappingFromSolution(b, kBase, 10 * kSecond, 100'000).valid) << bad;
  }
}

TEST(OffsetsJsonl, LinesCarryTheLeaderAndRecomputedFlag) {
  NodeSolution s;
  s.node = 3;
  s.reachable = true;
  s.offset_ns = -700;
  OffsetLineContext c;
  c.reference_instant_ns = kBase;
  c.leader = 2;
  c.recomputed = true;
  const std::string line = OffsetLineJson(s, c);
  EXPECT_NE(line.find(R"("schema":"chronolink.offset.v1")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("reference":"mean")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("leader":2)"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("recomputed":true)"), std::string::npos) << line;
  s.reachable = false;
  c.leader.reset();
  c.recomputed = false;
  const std::string unreachable = OffsetLineJson(s, c);
  EXPECT_NE(unreachable.find(R"("offset_ns":null)"), std::string::npos) << unreachable;
  EXPECT_EQ(unreachable.find("leader"), std::string::npos) << unreachable;
}

}  // namespace
}  // namespace chronolink
