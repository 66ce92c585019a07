#include "agent/estimate/edge_windows.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "agent/export/edges_jsonl_writer.h"
#include <nlohmann/json.hpp>

namespace chronolink {
namespace {

EdgeRecordContext Context(uint64_t epoch, std::optional<VirtualClockParams> test_clock = std::nullopt) {
  EdgeRecordContext c;
  c.session_epoch = epoch;
  c.test_clock = test_clock;
  return c;
}

constexpr int64_t kWindow = 2'000'000'000;
constexpr int64_t kBase = 1'790'000'000'000'000'000LL;  // a multiple of the window

DualStamp Both(int64_t ns) {
  return DualStamp{{ns, StampSource::kSocketSoftware}, {ns + 3'000, StampSource::kUserspace}};
}

// A tuple on a path with `offset` (peer - own) whose forward probes meet
// `fwd` ns of one-way delay and the reverse ones `rev`.
FullTuple MakeLeaningTuple(uint64_t seq, int64_t t, int64_t offset, int64_t fwd, int64_t rev) {
  FullTuple f;
  f.seq = seq;
  f.created_ns = t;
  for (int i = 0; i < 2; ++i) {
    const int64_t tx = t + i * 100'000;
    f.fwd_tx[i] = Both(tx);
    f.fwd_rx[i] = Both(tx + fwd + offset);
    f.rev_tx[i] = Both(tx + fwd + offset + 20'000);
    f.rev_rx[i] = Both(tx + fwd + 20'000 + rev);
  }
  return f;
}

// The same with one delay both ways.
FullTuple MakeTuple(uint64_t seq, int64_t t, int64_t offset, int64_t delay) {
  return MakeLeaningTuple(seq, t, offset, delay, delay);
}

TEST(EdgeWindows, AlignsWindowsToMultiplesOfTheLength) {
  EdgeWindows w(1, 2, kWindow, {SourceClass::kKernel}, {});
  EXPECT_EQ(w.WindowStart(kBase + 1), kBase);
  EXPECT_EQ(w.WindowStart(kBase + kWindow - 1), kBase);
  EXPECT_EQ(w.WindowStart(kBase + kWindow), kBase + kWindow);
  EXPECT_EQ(w.WindowStart(-1), -kWindow);  // floor, not truncation
}

TEST(EdgeWindows, EstimatesEachClosedWindowOncePerClassWithCounts) {
  EdgeWindows w(1, 2, kWindow, {SourceClass::kKernel, SourceClass::kUserspace}, {});
  const int64_t offset = 3'700'000;
  uint64_t seq = 0;
  for (int64_t t = kBase; t < kBase + 2 * kWindow; t += 1'000'000) {
    w.OnPairSent(t);
    FullTuple f = MakeTuple(++seq, t, offset, 10'000);
    if (seq % 50 == 0) f.rev_rx[1] = DualStamp{};  // lost
    w.OnTupleFinalized(f);
  }
  std::vector<EdgeWindowRecord> out;
  w.CloseUpTo(kBase + kWindow, &out);  // only the first window has ended
  ASSERT_EQ(out.size(), 2u);
  for (const auto& r : out) {
    EXPECT_EQ(r.window_start_ns, kBase);
    EXPECT_EQ(r.x0_ns, kBase + kWindow / 2);
    EXPECT_EQ(r.counts.pairs_sent, 2000);
    EXPECT_EQ(r.counts.lost, 40);
    EXPECT_EQ(r.counts.complete, 1960);
    EXPECT_EQ(r.estimate.estimator, EstimatorKind::kMaxMargin);
    EXPECT_NEAR(r.estimate.fit.beta_ns, offset, 1.0);
  }
  // 1960 tuples offered per class, 8 stamps each, all of one source.
  EXPECT_EQ(out[0].stamp_sources[static_cast<int>(StampSource::kSocketSoftware)], 1960 * 8);
  EXPECT_EQ(out[1].stamp_sources[static_cast<int>(StampSource::kUserspace)], 1960 * 8);
  EXPECT_EQ(out[0].source_class, SourceClass::kKernel);
  EXPECT_EQ(out[1].source_class, SourceClass::kUserspace);
  out.clear();
  w.CloseUpTo(kBase + kWindow, &out);
  EXPECT_TRUE(out.empty()) << "a window is written once";
  w.CloseUpTo(kBase + 2 * kWindow, &out);
  EXPECT_EQ(out.size(), 2u);
}

TEST(EdgeWindows, AClockStepDiscardsTheWindow) {
  EdgeWindows w(1, 2, kWindow, {SourceClass::kKernel}, {});
  for (int i = 0; i < 100; ++i) w.OnTupleFinalized(MakeTuple(i + 1, kBase + i * 1'000'000, 0, 5'000));
  w.OnClockStep(kBase + 50'000'000, kBase + 51'000'000);
  std::vector<EdgeWindowRecord> out;
  w.CloseUpTo(kBase + kWindow, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].clock_step);
  EXPECT_EQ(out[0].estimate.estimator, EstimatorKind::kNone);
  const auto j = nlohmann::json::parse(EdgeRecordToJson(out[0], Context(42)));
  EXPECT_EQ(j["estimator"], "none");
  EXPECT_TRUE(j["beta_ns"].is_null());
  EXPECT_TRUE(j["clock_step"].get<bool>());
  EXPECT_FALSE(j.contains("test_virtual_clock"));
}

// A step forwards discards the windows holding either side of it, and not
// the ones it skipped (they hold nothing).
TEST(EdgeWindows, AStepForwardsDiscardsTheWindowsOnBothSides) {
  EdgeWindows w(1, 2, kWindow, {SourceClass::kKernel}, {});
  const int64_t before = kBase + kWindow / 2, after = before + 3 * kWindow;  // 6 s forwards
  for (int i = 0; i < 100; ++i) w.OnTupleFinalized(MakeTuple(i + 1, kBase + i * 1'000'000, 0, 5'000));
  w.OnClockStep(before, after);
  for (int i = 0; i < 100; ++i) w.OnTupleFinalized(MakeTuple(200 + i, after + i * 1'000'000, 1'000, 5'000));
  for (int i = 0; i < 100; ++i) w.OnTupleFinalized(MakeTuple(400 + i, kBase + 4 * kWindow + i * 1'000'000, 1'000, 5'000));
  std::vector<EdgeWindowRecord> out;
  w.CloseUpTo(kBase + 5 * kWindow, &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].window_start_ns, kBase);
  EXPECT_TRUE(out[0].clock_step);
  EXPECT_EQ(out[1].window_start_ns, kBase + 3 * kWindow);
  EXPECT_TRUE(out[1].clock_step);
  EXPECT_EQ(out[2].window_start_ns, kBase + 4 * kWindow);
  EXPECT_FALSE(out[2].clock_step);
  EXPECT_NEAR(out[2].estimate.fit.beta_ns, 1'000, 1.0);
}

// After a step back the clock reads again what it read before: every window
// it passes through until it is past the step's `before` is discarded (its
// start was written already), then windows are estimated again.
TEST(EdgeWindows, AStepBackDiscardsEveryWindowTheClockReadsAgain) {
  EdgeWindows w(1, 2, kWindow, {SourceClass::kKernel}, {});
  const int64_t before = kBase + 2 * kWindow + kWindow / 2, after = before - 2 * kWindow;  // 4 s back
  std::vector<EdgeWindowRecord> out;
  for (int i = 0; i < 100; ++i) w.OnTupleFinalized(MakeTuple(i + 1, kBase + i * 10'000'000, 0, 5'000));
  w.CloseUpTo(kBase + kWindow, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].clock_step);
  out.clear();
  w.OnClockStep(before, after);
  // The clock reads [kBase + kWindow/2, ...) again, with the new offset.
  uint64_t seq = 1000;
  for (int64_t t = after; t < kBase + 4 * kWindow; t += 10'000'000) w.OnTupleFinalized(MakeTuple(++seq, t, 7'000, 5'000));
  w.CloseUpTo(kBase + 4 * kWindow, &out);
  std::map<int64_t, int> flagged, estimated;
  for (const auto& r : out) (r.clock_step ? flagged : estimated)[r.window_start_ns]++;
  EXPECT_EQ(flagged.count(kBase), 1u) << "the window the clock stepped back into";
  EXPECT_EQ(flagged.count(kBase + kWindow), 1u) << "read again";
  EXPECT_EQ(flagged.count(kBase + 2 * kWindow), 1u) << "the window the clock stepped out of";
  ASSERT_EQ(estimated.count(kBase + 3 * kWindow), 1u) << "past the step: estimated again";
  for (const auto& r : out) {
    if (r.window_start_ns == kBase + 3 * kWindow) {
      EXPECT_NEAR(r.estimate.fit.beta_ns, 7'000, 1.0);
    }
  }
}

// A fit span of two windows takes the probes of the window and of half of
// each neighbour; the counts stay the window's own, and a window closes only
// once its span has ended (ClosableBefore says when).
TEST(EdgeWindows, AFitSpanTakesTheProbesAroundTheWindow) {
  EdgeWindows w(1, 2, kWindow, {SourceClass::kKernel}, {}, {}, FitSpanRange::Fixed(2 * kWindow));
  EXPECT_EQ(w.FitStart(kBase), kBase - kWindow / 2);
  EXPECT_EQ(w.FitEnd(kBase), kBase + kWindow + kWindow / 2);
  // Spans end half a window past the window grid.
  EXPECT_EQ(w.ClosableBefore(kBase + 3 * kWindow), kBase + 2 * kWindow + kWindow / 2);
  EXPECT_EQ(w.ClosableBefore(kBase + 2 * kWindow + kWindow / 2 - 1), kBase + kWindow + kWindow / 2);
  // When the probes stop, every window that has ended closes.
  EXPECT_EQ(w.ClosableAtEnd(kBase + 2 * kWindow + 1), w.FitEnd(kBase + kWindow));
  uint64_t seq = 0;
  for (int64_t t = kBase; t < kBase + 4 * kWindow; t += 10'000'000) {
    w.OnPairSent(t);
    w.OnTupleFinalized(MakeTuple(++seq, t, 1'000, 5'000));
  }
  std::vector<EdgeWindowRecord> out;
  w.CloseUpTo(kBase + 2 * kWindow, &out);  // the second window's span runs to 2.5 windows
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].window_start_ns, kBase);
  EXPECT_EQ(out[0].x0_ns, kBase + kWindow / 2);
  EXPECT_EQ(out[0].fit_start_ns, kBase - kWindow / 2);
  EXPECT_EQ(out[0].fit_end_ns, kBase + kWindow + kWindow / 2);
  EXPECT_EQ(out[0].counts.pairs_sent, 200);
  EXPECT_EQ(out[0].counts.complete, 200);
  EXPECT_EQ(out[0].estimate.tuples, 300) << "the window and the half of the next that exists";
  EXPECT_NEAR(out[0].estimate.fit.beta_ns, 1'000, 1.0);
  out.clear();
  w.CloseUpTo(w.ClosableBefore(kBase + 4 * kWindow), &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].window_start_ns, kBase + kWindow);
  EXPECT_EQ(out[0].estimate.tuples, 400) << "the windows it took from are still there";
  EXPECT_EQ(out[1].window_start_ns, kBase + 2 * kWindow);
  EXPECT_EQ(out[1].estimate.tuples, 400);
}

// A clock step cuts the spans of the windows beside it: tuples across it are
// on another clock.
TEST(EdgeWindows, AClockStepCutsTheSpansBesideIt) {
  EdgeWindows w(1, 2, kWindow, {SourceClass::kKernel}, {}, {}, FitSpanRange::Fixed(3 * kWindow));
  uint64_t seq = 0;
  for (int64_t t = kBase; t < kBase + 2 * kWindow; t += 10'000'000) w.OnTupleFinalized(MakeTuple(++seq, t, 0, 5'000));
  const int64_t step_at = kBase + 2 * kWindow + kWindow / 2;
  w.OnClockStep(step_at, step_at + 1'000);
  for (int64_t t = kBase + 2 * kWindow; t < kBase + 6 * kWindow; t += 10'000'000) {
    w.OnTupleFinalized(MakeTuple(++seq, t, t < step_at ? 0 : 50'000, 5'000));
  }
  std::vector<EdgeWindowRecord> out;
  w.CloseUpTo(w.ClosableBefore(kBase + 6 * kWindow), &out);
  std::map<int64_t, const EdgeWindowRecord*> by_start;
  for (const auto& r : out) by_start[r.window_start_ns] = &r;
  ASSERT_TRUE(by_start.count(kBase + kWindow));
  const EdgeWindowRecord& before = *by_start[kBase + kWindow];
  EXPECT_EQ(before.fit_end_ns, kBase + 2 * kWindow) << "cut at the stepped window";
  EXPECT_NEAR(before.estimate.fit.beta_ns, 0, 1.0);
  ASSERT_TRUE(by_start.count(kBase + 2 * kWindow));
  EXPECT_TRUE(by_start[kBase + 2 * kWindow]->clock_step);
  ASSERT_TRUE(by_start.count(kBase + 3 * kWindow));
  const EdgeWindowRecord& after = *by_start[kBase + 3 * kWindow];
  EXPECT_EQ(after.fit_start_ns, kBase + 3 * kWindow);
  EXPECT_NEAR(after.estimate.fit.beta_ns, 50'000, 1.0);
}

// Probes every 50 ms for `windows` windows on a path whose delays queue
// (Exp(2 us) on top of 10 us, each direction its own) and whose offset
// random-walks wander_ns_per_sqrt_s; closes every window as the agent does.
std::vector<EdgeWindowRecord> RunAdaptive(int windows, double wander_ns_per_sqrt_s, uint32_t seed,
                                          FitSpanRange spans = FitSpanRange::Of(kWindow, 0, 6 * kWindow, 6 * kWindow),
                                          std::vector<FullTuple>* tuples = nullptr, WindowScatterOptions scatter = {},
                                          int64_t unrecorded_before_ns = INT64_MIN) {
  EdgeWindows w(1, 2, kWindow, {SourceClass::kKernel}, {}, scatter, spans);
  w.CloseWithoutRecordBefore(unrecorded_before_ns);
  std::mt19937 rng(seed);
  std::exponential_distribution<double> queue(1 / 2000.0);
  std::normal_distribution<double> gauss;
  double walk = 0;
  std::vector<EdgeWindowRecord> out;
  uint64_t seq = 0;
  const int64_t end = kBase + windows * kWindow;
  for (int64_t t = kBase - 3 * kWindow; t < end + 3 * kWindow; t += 50'000'000) {
    walk += wander_ns_per_sqrt_s * std::sqrt(0.05) * gauss(rng);
    const auto offset = static_cast<int64_t>(3'700'000 + walk);
    FullTuple f = MakeTuple(++seq, t, offset, 10'000);
    for (int i = 0; i < 2; ++i) {  // each probe its own queueing
      const auto fq = static_cast<int64_t>(queue(rng)), rq = static_cast<int64_t>(queue(rng));
      f.fwd_rx[i] = Both(f.fwd_tx[i].kernel.ns + 10'000 + fq + offset);
      f.rev_tx[i] = Both(f.fwd_rx[i].kernel.ns + 20'000);
      f.rev_rx[i] = Both(f.rev_tx[i].kernel.ns - offset + 10'000 + rq);
    }
    w.OnPairSent(t);
    w.OnTupleFinalized(f);
    if (tuples) tuples->push_back(f);
    w.CloseUpTo(w.ClosableBefore(t), &out);
  }
  std::erase_if(out, [&](const EdgeWindowRecord& r) { return r.window_start_ns < kBase || r.window_end_ns > end; });
  return out;
}

// A span longer than the longest centred one ends where that one ends and
// reaches further back: the record comes as soon as with centred spans, and
// the tuples it reaches back to are still kept.
TEST(EdgeWindows, ASpanOverTheLongestCentredOneReachesBackOnly) {
  const FitSpanRange trailing = FitSpanRange::Of(kWindow, 0, 3 * kWindow, 5 * kWindow);
  const FitSpanRange centred = FitSpanRange::Of(kWindow, 0, 3 * kWindow, 3 * kWindow);
  EdgeWindows a(1, 2, kWindow, {SourceClass::kKernel}, {}, {}, trailing);
  EdgeWindows b(1, 2, kWindow, {SourceClass::kKernel}, {}, {}, centred);
  for (int64_t t : {kBase, kBase + kWindow / 3, kBase + 7 * kWindow + 1}) {
    EXPECT_EQ(a.ClosableBefore(t), b.ClosableBefore(t)) << "no later record";
  }
  const int64_t end = kBase + kWindow / 2 + 3 * kWindow / 2;
  EXPECT_EQ(a.FitEnd(kBase, 5 * kWindow), end);
  EXPECT_EQ(a.FitStart(kBase, 5 * kWindow), end - 5 * kWindow);
  EXPECT_EQ(a.FitStart(kBase, 4 * kWindow), end - 4 * kWindow);
  EXPECT_EQ(a.FitStart(kBase, 2 * kWindow), kBase - kWindow / 2) << "up to the longest centred: centred";
  EXPECT_EQ(a.FitEnd(kBase, 2 * kWindow), kBase + kWindow + kWindow / 2);
  EXPECT_EQ(a.FitStart(kBase), end - 5 * kWindow) << "the earliest any span reaches";

  // No wander: the chooser goes to the longest span, and those fits take
  // five windows of probes, ending a window past their own.
  const std::vector<EdgeWindowRecord> out = RunAdaptive(40, 0, 1, trailing);
  ASSERT_EQ(out.size(), 40u);
  const EdgeWindowRecord& last = out.back();
  EXPECT_EQ(last.fit_end_ns - last.fit_start_ns, 5 * kWindow);
  EXPECT_EQ(last.fit_end_ns, last.window_end_ns + kWindow);
  EXPECT_EQ(last.estimate.tuples, 5 * 40) << "every tuple of the span is kept until it is fitted";
  EXPECT_NEAR(last.estimate.fit.beta_ns, 3'700'000, 100);
}

// The kernel-class max-margin fit, on its own, of the tuples created in [lo, hi).
LineFit FitOf(const std::vector<FullTuple>& tuples, int64_t lo, int64_t hi, int64_t x0) {
  std::vector<PtPrTuple> in;
  for (const FullTuple& t : tuples) {
    PtPrTuple p;
    if (t.created_ns >= lo && t.created_ns < hi && t.Project(SourceClass::kKernel, &p)) in.push_back(p);
  }
  const WindowEstimate e = EstimateWindow(in, x0, {});
  EXPECT_EQ(e.estimator, EstimatorKind::kMaxMargin);
  return e.fit;
}

// A chosen span over the longest centred one (20 s of 6 s) gives the mean
// of its line and its later half's (10 s ending where it ends): each of
// the two as a fit of those probes alone makes it, before the chooser has
// judged (no drift to lean on). Off, the whole span's line alone.
TEST(EdgeWindows, ALongSpansLineIsTheMeanOfItsOwnAndItsLaterHalfs) {
  const FitSpanRange spans = FitSpanRange::Of(kWindow, 0, 3 * kWindow, 10 * kWindow);
  ASSERT_TRUE(spans.later_half);
  std::vector<FullTuple> tuples;
  const std::vector<EdgeWindowRecord> out = RunAdaptive(10, 0, 3, spans, &tuples);
  ASSERT_EQ(out.size(), 10u);
  int differ = 0;
  for (const EdgeWindowRecord& r : out) {
    ASSERT_EQ(r.fit_end_ns - r.fit_start_ns, 10 * kWindow) << "the longest before any evidence";
    ASSERT_TRUE(r.later_half.has_value()) << r.window_start_ns;
    EXPECT_EQ(r.later_half->fit_end_ns, r.fit_end_ns);
    EXPECT_EQ(r.later_half->fit_start_ns, r.fit_end_ns - 5 * kWindow);
    ASSERT_FALSE(r.estimate.fit.drift_prior_taken);
    const LineFit whole = FitOf(tuples, r.fit_start_ns, r.fit_end_ns, r.x0_ns);
    const LineFit half = FitOf(tuples, r.later_half->fit_start_ns, r.fit_end_ns, r.x0_ns);
    EXPECT_DOUBLE_EQ(r.later_half->fit.beta_ns, half.beta_ns);
    EXPECT_DOUBLE_EQ(r.estimate.fit.beta_ns, (whole.beta_ns + half.beta_ns) / 2);
    EXPECT_DOUBLE_EQ(r.estimate.fit.alpha, (whole.alpha + half.alpha) / 2);
    EXPECT_DOUBLE_EQ(r.estimate.fit.own_alpha, whole.own_alpha) << "the drift history takes the whole's";
    EXPECT_DOUBLE_EQ(r.estimate.fit.uncertainty_ns, whole.uncertainty_ns);
    differ += whole.beta_ns != half.beta_ns;
  }
  EXPECT_GE(differ, 5) << "the two lines differ in most windows: the test tells them apart";
  // Their sigma takes the band and the floors' shift at the later half's
  // factor (WindowScatter's own test): against the same windows at factor
  // 1, the two terms' sum of squares is a quarter at 0.5.
  WindowScatterOptions whole_weights;
  whole_weights.later_half_factor = 1;
  const std::vector<EdgeWindowRecord> at_one = RunAdaptive(10, 0, 3, spans, nullptr, whole_weights);
  ASSERT_EQ(at_one.size(), out.size());
  const double floor2 = std::pow(WindowScatterOptions{}.floor_ns, 2);
  int sigmas = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].sigma_scatter_ns) continue;
    const double scatter2 = std::pow(*out[i].sigma_scatter_ns, 2);
    const double terms_at_one = std::pow(at_one[i].sigma_ns, 2) - scatter2 - floor2;
    ASSERT_GT(terms_at_one, 1) << "the band or the shift counts in this window";
    EXPECT_NEAR(std::pow(out[i].sigma_ns, 2) - scatter2 - floor2, terms_at_one / 4, 1e-6 * terms_at_one);
    ++sigmas;
  }
  EXPECT_GE(sigmas, 4) << "the history gives the later windows a sigma";
  FitSpanRange off = spans;
  off.later_half = false;
  tuples.clear();
  for (const EdgeWindowRecord& r : RunAdaptive(10, 0, 3, off, &tuples)) {
    EXPECT_FALSE(r.later_half.has_value());
    EXPECT_DOUBLE_EQ(r.estimate.fit.beta_ns, FitOf(tuples, r.fit_start_ns, r.fit_end_ns, r.x0_ns).beta_ns);
  }
  // Spans up to the longest centred one take no half.
  for (const EdgeWindowRecord& r : RunAdaptive(10, 0, 3)) EXPECT_FALSE(r.later_half.has_value());
}

// A later half whose line lies farther from the span's than their two
// bands reach is a failed fit, left out: the starved run's window (v4,
// 2026-12-06: the span's line -295 282 ns within 1 345, the half's -333 422
// within 13 700), against a typical one (70 ns apart within 1 000 each).
TEST(EdgeWindows, ALaterHalfFarOutsideTheSpansBandIsRefused) {
  const auto line = [](double beta, double band) {
    LineFit f;
    f.ok = true;
    f.beta_ns = beta;
    f.uncertainty_ns = band;
    return f;
  };
  EXPECT_FALSE(LaterHalfAgreesWithSpan(line(-295'282, 1'345), line(-333'422, 13'700)));
  EXPECT_TRUE(LaterHalfAgreesWithSpan(line(3'700'000, 1'000), line(3'700'070, 1'000)));
  EXPECT_TRUE(LaterHalfAgreesWithSpan(line(0, 1'000), line(3'000, 2'000))) << "as far as the bands reach";
  EXPECT_FALSE(LaterHalfAgreesWithSpan(line(0, 1'000), line(-3'001, 2'000)));
  // Every window of a run on an ordinary path takes its half.
  for (const EdgeWindowRecord& r : RunAdaptive(12, 5, 3, FitSpanRange::Of(kWindow, 0, 3 * kWindow, 10 * kWindow))) {
    EXPECT_FALSE(r.later_half_refused) << r.window_start_ns;
  }
}

TEST(FitSpanRange, TheLaterHalfIsHalfInWholeWindowsAtLeastTheLongestCentred) {
  const FitSpanRange r = FitSpanRange::Of(kWindow, 0, 3 * kWindow, 10 * kWindow);
  EXPECT_EQ(r.LaterHalfNs(10 * kWindow, kWindow), 5 * kWindow);
  EXPECT_EQ(r.LaterHalfNs(7 * kWindow, kWindow), 3 * kWindow) << "3.5 windows: 3, the longest centred";
  EXPECT_EQ(r.LaterHalfNs(8 * kWindow, kWindow), 4 * kWindow);
  EXPECT_EQ(r.LaterHalfNs(4 * kWindow, kWindow), 3 * kWindow);
  EXPECT_EQ(r.LaterHalfNs(3 * kWindow, kWindow), 0) << "centred: none";
  EXPECT_EQ(FitSpanRange::Fixed(8 * kWindow).LaterHalfNs(8 * kWindow, kWindow), 0) << "a fixed span: none";
  FitSpanRange off = r;
  off.later_half = false;
  EXPECT_EQ(off.LaterHalfNs(10 * kWindow, kWindow), 0);
}

TEST(EdgeWindows, AnAdaptiveSpanStaysLongestWhereTheOffsetOnlyJitters) {
  const std::vector<EdgeWindowRecord> out = RunAdaptive(40, 0, 1);
  ASSERT_EQ(out.size(), 40u);
  for (const EdgeWindowRecord& r : out) {
    EXPECT_FALSE(r.span_changed);
    EXPECT_EQ(r.estimate.estimator, EstimatorKind::kMaxMargin);
    EXPECT_EQ(r.fit_end_ns - r.fit_start_ns, 6 * kWindow) << "the longest, from the start";
  }
  // Three windows before the first one out also fed the chooser.
  EXPECT_FALSE(out[11].span_evidence.has_value()) << "15 own-window fits: too few to judge";
  ASSERT_TRUE(out[12].span_evidence.has_value());
  EXPECT_EQ(out.back().span_evidence->best_span_ns, 6 * kWindow);
  EXPECT_GT(out.back().span_evidence->window_noise_ns, 0);
}

TEST(EdgeWindows, AnAdaptiveSpanShortensWhereTheOffsetWanders) {
  const std::vector<EdgeWindowRecord> out = RunAdaptive(60, 300, 2);
  ASSERT_EQ(out.size(), 60u);
  int changes = 0;
  for (const EdgeWindowRecord& r : out) changes += r.span_changed;
  EXPECT_EQ(changes, 1);
  EXPECT_EQ(out.front().fit_end_ns - out.front().fit_start_ns, 6 * kWindow) << "the longest before any evidence";
  // Beyond doubt from window 38 on (this seed): 41 own-window fits.
  for (size_t i = 50; i < out.size(); ++i) EXPECT_EQ(out[i].fit_end_ns - out[i].fit_start_ns, 2 * kWindow) << i;
  ASSERT_TRUE(out.back().span_evidence.has_value());
  EXPECT_GT(out.back().span_evidence->wander_ns_per_sqrt_s, 100);
  EXPECT_GT(out.back().span_evidence->wander_lower_ns_per_sqrt_s, 50);
}

// The windows before kBase are those an agent cannot map back to REALTIME
// (centred before its first clock reading): closed without a record, they
// feed no history, so that the span chooser's evidence is what the records'
// own-window fits give (bench/fit_replay.py rebuilds it so) from the first
// record on. Fed and dropped, they stay in it for 128 windows.
TEST(EdgeWindows, AWindowClosedWithoutRecordFeedsNoHistory) {
  const FitSpanRange spans = FitSpanRange::Of(kWindow, 0, 6 * kWindow, 6 * kWindow);
  for (const bool unrecorded : {false, true}) {
    const std::vector<EdgeWindowRecord> out =
        RunAdaptive(40, 300, 2, spans, nullptr, {}, unrecorded ? kBase : INT64_MIN);
    ASSERT_EQ(out.size(), 40u);
    FitSpanChooser replay(kWindow, *ChooserOptionsFor(spans));
    size_t same = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const EdgeWindowRecord& r = out[i];
      ASSERT_TRUE(r.own_window_fit.has_value()) << i;
      replay.Add(r.x0_ns, *r.own_window_fit);
      const std::optional<FitSpanEvidence> e = replay.evidence();
      const bool equal =
          e.has_value() == r.span_evidence.has_value() &&
          (!e || (e->windows == r.span_evidence->windows && e->window_noise_ns == r.span_evidence->window_noise_ns &&
                  e->wander_ns_per_sqrt_s == r.span_evidence->wander_ns_per_sqrt_s));
      same += equal;
      if (unrecorded && r.span_evidence) {
        EXPECT_EQ(r.span_evidence->windows, static_cast<int>(i + 1)) << i;
      }
    }
    if (unrecorded) {
      EXPECT_EQ(same, out.size()) << "the records rebuild the chooser";
      EXPECT_FALSE(out[14].span_evidence.has_value()) << "15 own-window fits: too few to judge";
    } else {
      EXPECT_LT(same, out.size()) << "three windows no record shows fed the chooser";
    }
  }
}

// Once the span chooser has judged (its evidence weighs the drift's
// change against the noise) and five windows have given their slopes, each
// window's line leans on the edge's recent drift; a fixed span has no
// evidence, and its windows keep their own slopes.
TEST(EdgeWindows, AWindowsSlopeLeansOnTheEdgesRecentDriftOnceTheChooserHasJudged) {
  const std::vector<EdgeWindowRecord> out = RunAdaptive(40, 0, 1);
  ASSERT_EQ(out.size(), 40u);
  for (size_t i = 0; i < out.size(); ++i) {
    const LineFit& f = out[i].estimate.fit;
    ASSERT_TRUE(f.ok) << i;
    // The record of window i carries the evidence from before it and after it.
    EXPECT_EQ(f.drift_prior_taken, i > 0 && out[i - 1].span_evidence.has_value()) << i;
    if (f.drift_prior_taken) {
      EXPECT_NE(f.alpha, f.own_alpha) << i;
      EXPECT_LT(std::abs(f.alpha), 1e-7) << i << ": the true drift is 0";
    }
  }
  EXPECT_TRUE(out.back().estimate.fit.drift_prior_taken);
  for (const EdgeWindowRecord& r : RunAdaptive(20, 0, 1, FitSpanRange::Fixed(3 * kWindow))) {
    EXPECT_FALSE(r.estimate.fit.drift_prior_taken);
    EXPECT_EQ(r.estimate.fit.alpha, r.estimate.fit.own_alpha);
  }
}

// A prober's probes meet 40 ns more path than the answers to them (the
// test bed's routed path: docs/estimator.md §11). Each end's own fit leans
// 20 ns its own way; with the peer's session mirrored in, whose halves lean
// the other way, the fit does not, and the link's two directions become
// one measurement (their whole sigma shared). The peer's tuples are not
// the window's own probes: the counts stay the same.
TEST(EdgeWindows, ThePeersSessionTakesTheLeanOutOfTheFitNotTheCounts) {
  const int64_t offset = 3'700'000;
  EdgeWindows own_only(1, 2, kWindow, {SourceClass::kKernel}, {});
  EdgeWindows link(1, 2, kWindow, {SourceClass::kKernel}, {});
  std::mt19937_64 rng(3);
  std::exponential_distribution<double> queueing(1.0 / 200);
  uint64_t seq = 0;
  for (int64_t t = kBase; t < kBase + 8 * kWindow; t += 10'000'000) {
    const auto q = [&] { return static_cast<int64_t>(queueing(rng)); };
    const FullTuple mine = MakeLeaningTuple(++seq, t, offset, 10'040 + q(), 10'000 + q());
    for (EdgeWindows* w : {&own_only, &link}) {
      w->OnPairSent(t);
      w->OnTupleFinalized(mine);
    }
    // The peer's pair of the same instant, in our frame: our answer is the
    // "forward" half (fast), its probe the "reverse" half (slow).
    link.OnPeerTuple(MakeLeaningTuple(seq, t + 5'000'000, offset, 10'000 + q(), 10'040 + q()));
  }
  std::vector<EdgeWindowRecord> alone, both;
  own_only.CloseUpTo(kBase + 7 * kWindow, &alone);
  link.CloseUpTo(kBase + 7 * kWindow, &both);
  ASSERT_EQ(alone.size(), 7u);
  ASSERT_EQ(both.size(), 7u);
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_NEAR(alone[i].estimate.fit.beta_ns - offset, 20, 8) << "window " << i;
    EXPECT_NEAR(both[i].estimate.fit.beta_ns - offset, 0, 8) << "window " << i;
    EXPECT_EQ(both[i].counts.complete, alone[i].counts.complete);
    EXPECT_EQ(both[i].counts.pairs_sent, alone[i].counts.pairs_sent);
    EXPECT_EQ(both[i].peer_session_tuples, 200);
    EXPECT_EQ(alone[i].peer_session_tuples, 0);
    EXPECT_EQ(both[i].estimate.tuples, 2 * alone[i].estimate.tuples);
  }
  // From the fifth window a sigma: the scatter's own part is shared too
  // where the fit took the peer's session.
  ASSERT_GT(both.back().sigma_ns, 0);
  EXPECT_DOUBLE_EQ(*both.back().sigma_shared_ns, both.back().sigma_ns);
  ASSERT_GT(alone.back().sigma_ns, 0);
  EXPECT_LT(*alone.back().sigma_shared_ns, alone.back().sigma_ns);
  ASSERT_TRUE(alone.back().sigma_scatter_ns.has_value());
  EXPECT_LE(*alone.back().sigma_scatter_ns, alone.back().sigma_ns);
  // A peer's tuple for a window already closed comes too late: no record again.
  link.OnPeerTuple(MakeLeaningTuple(++seq, kBase + kWindow / 2, offset, 10'000, 10'040));
  both.clear();
  link.CloseUpTo(kBase + 7 * kWindow, &both);
  EXPECT_TRUE(both.empty());
}

TEST(EdgesJsonl, RecordCarriesEveryDocumentedField) {
  EdgeWindowRecord r;
  r.node = 3;
  r.peer = 4;
  r.window_start_ns = kBase;
  r.window_end_ns = kBase + kWindow;
  r.x0_ns = kBase + kWindow / 2;
  r.estimate.estimator = EstimatorKind::kMaxMargin;
  r.estimate.fit.ok = true;
  r.estimate.fit.beta_ns = -12.5;
  r.estimate.fit.alpha = 4.5e-5;
  const auto j = nlohmann::json::parse(EdgeRecordToJson(r, Context(7, VirtualClockParams{1, 2.0, 3})));
  for (const char* k : {"schema",
                        "node",
                        "peer",
                        "session",
                        "clock_domain",
                        "window_start_ns",
                        "window_end_ns",
                        "x0_ns",
                        "fit_start_ns",
                        "fit_end_ns",
                        "timestamp_source",
                        "estimator",
                        "alpha",
                        "alpha_ppm",
                        "beta_ns",
                        "uncertainty_ns",
                        "sigma_ns",
                        "sigma_shared_ns",
                        "sigma_scatter_ns",
                        "margin_ns",
                        "violators_removed",
                        "floor_points",
                        "floor_shift_ns",
                        "floors_refused",
                        "own_window_beta_ns",
                        "own_alpha",
                        "drift_prior_taken",
                        "later_half",
                        "later_half_refused",
                        "pairs_sent",
                        "tuples_complete",
                        "tuples_in_class",
                        "tuples_peer_session",
                        "pure_forward",
                        "pure_reverse",
                        "tx_stamps_missing",
                        "lost",
                        "clock_step",
                        "timestamp_policy",
                        "stamp_sources",
                        "test_virtual_clock"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  // Epoch instants stay exact integers.
  EXPECT_EQ(j["x0_ns"].get<int64_t>(), kBase + kWindow / 2);
  EXPECT_DOUBLE_EQ(j["alpha_ppm"].get<double>(), 45.0);
  EXPECT_EQ(j["test_virtual_clock"]["t0_ns"].get<int64_t>(), 3);
  // No sigma yet: both sigma fields null; then the scatter's, with its shared part.
  EXPECT_TRUE(j["sigma_ns"].is_null());
  EXPECT_TRUE(j["sigma_shared_ns"].is_null());
  EXPECT_TRUE(j["sigma_scatter_ns"].is_null());
  r.sigma_ns = 12;
  r.sigma_shared_ns = 5;
  r.sigma_scatter_ns = 9;
  const auto k = nlohmann::json::parse(EdgeRecordToJson(r, Context(7, VirtualClockParams{})));
  EXPECT_DOUBLE_EQ(k["sigma_ns"].get<double>(), 12);
  EXPECT_DOUBLE_EQ(k["sigma_shared_ns"].get<double>(), 5);
  EXPECT_DOUBLE_EQ(k["sigma_scatter_ns"].get<double>(), 9);
  // A line averaged with its span's later half names that half and its line.
  EXPECT_TRUE(k["later_half"].is_null());
  r.later_half = EdgeWindowRecord::LaterHalf{kBase - 3 * kWindow, kBase + 2 * kWindow, {}};
  r.later_half->fit.beta_ns = -10.25;
  r.later_half->fit.alpha = 4e-5;
  r.later_half->fit.own_alpha = 3e-5;
  r.later_half->fit.drift_prior_taken = true;
  r.later_half->fit.uncertainty_ns = 1250.5;
  r.later_half->fit.margin_ns = 1200.25;
  r.later_half->fit.floor_shift_ns = -33.5;
  r.later_half->fit.floors_refused = true;
  EXPECT_FALSE(k["floors_refused"].get<bool>());
  const auto h = nlohmann::json::parse(EdgeRecordToJson(r, Context(7)))["later_half"];
  EXPECT_EQ(h["fit_start_ns"].get<int64_t>(), kBase - 3 * kWindow);
  EXPECT_EQ(h["fit_end_ns"].get<int64_t>(), kBase + 2 * kWindow);
  EXPECT_DOUBLE_EQ(h["beta_ns"].get<double>(), -10.25);
  EXPECT_DOUBLE_EQ(h["alpha"].get<double>(), 4e-5);
  EXPECT_DOUBLE_EQ(h["own_alpha"].get<double>(), 3e-5);
  EXPECT_TRUE(h["drift_prior_taken"].get<bool>());
  EXPECT_DOUBLE_EQ(h["uncertainty_ns"].get<double>(), 1250.5) << "the half's band, for bench/sigma_replay.py";
  EXPECT_DOUBLE_EQ(h["margin_ns"].get<double>(), 1200.25);
  EXPECT_DOUBLE_EQ(h["floor_shift_ns"].get<double>(), -33.5);
  EXPECT_TRUE(h["floors_refused"].get<bool>());
  // The fit on the window's own probes, which the span chooser was fed.
  EXPECT_TRUE(k["own_window_beta_ns"].is_null());
  r.own_window_fit = LineFit{};
  r.own_window_fit->beta_ns = 77.5;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(EdgeRecordToJson(r, Context(7)))["own_window_beta_ns"].get<double>(), 77.5);
}

}  // namespace
}  // namespace chronolink
