#include "agent/estimate/window_estimator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace chronolink {
namespace {

// A simulated path. The prober's clock reads true time t; the responder's
// reads t + theta(t), theta(t) = theta0 + (t - x0) / 50000 (drift 20 ppm).
struct Path {
  int64_t x0 = 1'700'000'000'000'000'000;
  int64_t theta0 = -3'456'789;
  int64_t Theta(int64_t t) const {
    const int64_t d = t - x0;
    return theta0 + (d >= 0 ? d / 50'000 : -((-d + 49'999) / 50'000));
  }
  int64_t Peer(int64_t t) const { return t + Theta(t); }
};
constexpr double kDrift = 1.0 / 50'000.0;

ProbeStamp S(int64_t ns) { return {ns, StampSource::kSocketSoftware}; }

struct Sim {
  std::vector<PtPrTuple> tuples;
  int complete = 0, pure_fwd = 0, pure_rev = 0;
};

// n tuples spread over one second around path.x0. A fraction of the pairs is
// queued (the second packet delayed by 1..20 us more than the first), a few
// tuples lose a stamp, and `corrupt` forward pairs carry a receive stamp
// 40 us early (a pure pair with an impossible bound).
Sim Simulate(const Path& path, int n, uint64_t seed, int corrupt = 0, double queued_fraction = 0.2) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> excess(1.0 / 3000.0);
  std::uniform_real_distribution<double> u01(0, 1);
  std::uniform_int_distribution<int64_t> queue(1000, 20'000), jitter(-40, 40);
  const int64_t spacing = 2000, base = 8000, turnaround = 5000;
  Sim sim;
  for (int k = 0; k < n; ++k) {
    PtPrTuple t;
    t.seq = static_cast<uint64_t>(k);
    const int64_t t0 = path.x0 - 500'000'000 + k * (1'000'000'000 / n) + jitter(rng);
    auto delay = [&] { return base + static_cast<int64_t>(excess(rng)); };
    // Forward pair.
    const int64_t f0 = delay();
    const bool fwd_queued = u01(rng) < queued_fraction;
    const int64_t f1 = fwd_queued ? f0 + queue(rng) : f0 + jitter(rng);
    t.fwd_tx[0] = S(t0);
    t.fwd_tx[1] = S(t0 + spacing);
    t.fwd_rx[0] = S(path.Peer(t0 + f0));
    t.fwd_rx[1] = S(path.Peer(t0 + spacing + f1));
    const bool is_corrupt = k < corrupt;
    if (is_corrupt) {
      t.fwd_rx[0].ns -= 40'000;
      t.fwd_rx[1].ns -= 40'000;
    }
    // Reverse pair, sent on the responder's reception of the forward pair.
    const int64_t r = t0 + spacing + f1 + turnaround;
    const int64_t r0 = delay();
    const bool rev_queued = u01(rng) < queued_fraction;
    const int64_t r1 = rev_queued ? r0 + queue(rng) : r0 + jitter(rng);
    t.rev_tx[0] = S(path.Peer(r));
    t.rev_tx[1] = S(path.Peer(r + spacing));
    t.rev_rx[0] = S(r + r0);
    t.rev_rx[1] = S(r + spacing + r1);
    const bool lost = u01(rng) < 0.05;
    if (lost) t.rev_rx[1] = ProbeStamp{};  // e.g. a TX timestamp never read
    sim.complete += lost ? 0 : 1;
    sim.pure_fwd += fwd_queued ? 0 : 1;
    sim.pure_rev += (rev_queued || lost) ? 0 : 1;
    sim.tuples.push_back(t);
  }
  return sim;
}

TEST(WindowEstimator, KnownOffsetAndDriftThroughASimulatedPath) {
  const Path path;
  for (uint64_t seed : {1u, 2u, 3u}) {
    const Sim sim = Simulate(path, 400, seed);
    const WindowEstimate e = EstimateWindow(sim.tuples, path.x0, WindowEstimatorOptions{});
    ASSERT_EQ(e.estimator, EstimatorKind::kMaxMargin) << seed;
    ASSERT_TRUE(e.fit.ok);
    EXPECT_EQ(e.tuples, sim.complete);
    EXPECT_EQ(e.pure_forward, sim.pure_fwd);
    EXPECT_EQ(e.pure_reverse, sim.pure_rev);
    EXPECT_LT(e.pure_forward, 400);
    EXPECT_EQ(e.fit.x0_ns, path.x0);
    const double err = e.fit.beta_ns - static_cast<double>(path.theta0);
    // The true line separates every pure bound, so it passes through the
    // interval the uncertainty describes, as does the estimate.
    EXPECT_LE(std::abs(err), 2 * e.fit.uncertainty_ns + 1) << seed;
    // Symmetric minimum delays and ~160 samples per side: tens of ns.
    EXPECT_LT(std::abs(err), 300.0) << seed;
    EXPECT_NEAR(e.fit.alpha, kDrift, 1e-6) << seed;
    EXPECT_EQ(e.fit.violators_removed, 0);
  }
}

TEST(WindowEstimator, CorruptStampsAreTrimmed) {
  const Path path;
  const Sim sim = Simulate(path, 400, 4, /*corrupt=*/3);
  const WindowEstimate e = EstimateWindow(sim.tuples, path.x0, WindowEstimatorOptions{});
  ASSERT_EQ(e.estimator, EstimatorKind::kMaxMargin);
  EXPECT_GE(e.fit.violators_removed, 1);
  EXPECT_LT(std::abs(e.fit.beta_ns - static_cast<double>(path.theta0)), 300.0);
}

TEST(WindowEstimator, TooManyCorruptStampsFallBackToMinDelay) {
  const Path path;
  // 60 corrupt forward bounds in 400 tuples: beyond the 5 % / 32 budget.
  const Sim sim = Simulate(path, 400, 5, /*corrupt=*/60);
  const WindowEstimate e = EstimateWindow(sim.tuples, path.x0, WindowEstimatorOptions{});
  EXPECT_EQ(e.estimator, EstimatorKind::kMinDelay);
  EXPECT_TRUE(e.fit.ok);
  EXPECT_EQ(e.fit.alpha, 0.0);
}

TEST(WindowEstimator, SparseWindowIsLabelledMinDelay) {
  const Path path;
  Sim sim = Simulate(path, 400, 6);
  sim.tuples.resize(3);  // fewer than 8 bounds per side, pure or not
  const WindowEstimate e = EstimateWindow(sim.tuples, path.x0, WindowEstimatorOptions{});
  ASSERT_EQ(e.estimator, EstimatorKind::kMinDelay);
  EXPECT_EQ(EstimatorKindName(e.estimator), "min_delay");
  ASSERT_TRUE(e.fit.ok);
  EXPECT_EQ(e.fit.alpha, 0.0);
  // The tuples sit ~0.5 s before x0, where theta is 10 us lower: the flat
  // fallback is exact only at its tuple's midpoint, within half its RTT.
  const PtPrTuple& t0 = sim.tuples[0];
  const double theta_there = static_cast<double>(path.Theta(t0.fwd_tx[0].ns));
  EXPECT_LE(std::abs(e.fit.beta_ns - theta_there), e.fit.uncertainty_ns + 1);
  EXPECT_GT(e.fit.uncertainty_ns, 8000.0);  // at least the base one-way delay
}

// Cross traffic queues one probe of almost every pair: too few pure pairs,
// but every probe's bound still holds, and the separator rests on those that
// met the least queueing. The fit on pure pairs alone (Huygens' way, kept
// for comparisons) falls back to min-delay on the same window.
TEST(WindowEstimator, HeavyQueueingIsFittedOnEveryProbe) {
  const Path path;
  for (uint64_t seed : {7u, 8u, 9u}) {
    const Sim sim = Simulate(path, 400, seed, 0, /*queued_fraction=*/0.99);
    const WindowEstimate e = EstimateWindow(sim.tuples, path.x0, WindowEstimatorOptions{});
    ASSERT_LT(e.pure_forward, 8) << seed;
    ASSERT_EQ(e.estimator, EstimatorKind::kMaxMargin) << seed;
    EXPECT_EQ(EstimatorKindName(e.estimator), "max_margin");
    ASSERT_TRUE(e.fit.ok);
    const double err = e.fit.beta_ns - static_cast<double>(path.theta0);
    EXPECT_LE(std::abs(err), e.fit.uncertainty_ns + 1) << seed;
    EXPECT_LT(std::abs(err), 300.0) << seed;
    EXPECT_NEAR(e.fit.alpha, kDrift, 1e-6) << seed;
  }
  WindowEstimatorOptions off;
  off.fit_every_probe = false;
  const Sim sim = Simulate(path, 400, 7, 0, 0.99);
  EXPECT_EQ(EstimateWindow(sim.tuples, path.x0, off).estimator, EstimatorKind::kMinDelay);
}

// Corrupt stamps beyond the soft margin's budget spoil the fit on every
// probe. Here each corrupt stamp also breaks its pair's spacing, so purity
// screens them out and the fit on pure pairs stands.
TEST(WindowEstimator, TooManyBadProbesFallBackToThePureFit) {
  const Path path;
  Sim sim = Simulate(path, 400, 11);
  int spoiled = 0;
  for (PtPrTuple& t : sim.tuples) {
    // A second forward probe stamped 30 us early: an impossible bound, and
    // an impure pair (its spacing changed).
    if (spoiled < 60 && t.fwd_rx[1].present()) {
      t.fwd_rx[1].ns -= 30'000;
      ++spoiled;
    }
  }
  const WindowEstimate e = EstimateWindow(sim.tuples, path.x0, WindowEstimatorOptions{});
  ASSERT_EQ(e.estimator, EstimatorKind::kMaxMarginPure);
  EXPECT_EQ(EstimatorKindName(e.estimator), "max_margin_pure");
  EXPECT_LT(std::abs(e.fit.beta_ns - static_cast<double>(path.theta0)), 300.0);
}

TEST(WindowEstimator, EmptyWindowIsNone) {
  const std::vector<PtPrTuple> none;
  const WindowEstimate e = EstimateWindow(none, 123, WindowEstimatorOptions{});
  EXPECT_EQ(e.estimator, EstimatorKind::kNone);
  EXPECT_FALSE(e.fit.ok);
  EXPECT_EQ(e.tuples, 0);
  EXPECT_EQ(EstimatorKindName(EstimatorKind::kNone), "none");
  EXPECT_EQ(EstimatorKindName(EstimatorKind::kMaxMargin), "max_margin");
  // Incomplete tuples only: nothing for either estimator.
  PtPrTuple t;
  t.fwd_tx[0] = S(1);
  const std::vector<PtPrTuple> broken = {t};
  EXPECT_EQ(EstimateWindow(broken, 0, WindowEstimatorOptions{}).estimator, EstimatorKind::kNone);
}

PtPrTuple Tuple(uint64_t seq, int64_t ftx, int64_t frx, int64_t rtx, int64_t rrx) {
  PtPrTuple t;
  t.seq = seq;
  for (int i = 0; i < 2; ++i) {
    t.fwd_tx[i] = S(ftx + 1000 * i);
    t.fwd_rx[i] = S(frx + 1000 * i);
    t.rev_tx[i] = S(rtx + 1000 * i);
    t.rev_rx[i] = S(rrx + 1000 * i);
  }
  return t;
}

TEST(FitMinDelay, PicksTheSmallestRoundTrip) {
  // Offset 500; tuple A: delays 100 / 300 (RTT 400); tuple B: 150 / 150 (RTT 300).
  const std::vector<PtPrTuple> ts = {
      Tuple(1, 10'000, 10'000 + 100 + 500, 20'000 + 500, 20'000 + 300),
      Tuple(2, 50'000, 50'000 + 150 + 500, 60'000 + 500, 60'000 + 150),
  };
  const LineFit f = FitMinDelay(ts, 42);
  ASSERT_TRUE(f.ok);
  EXPECT_EQ(f.x0_ns, 42);
  EXPECT_DOUBLE_EQ(f.beta_ns, 500.0);        // symmetric delays: exact
  // RTT / 2, plus the drift bound from the tuple's midpoint (fwd_tx 50 000,
  // rev_rx 60 150: 55 075) to x0.
  EXPECT_DOUBLE_EQ(f.uncertainty_ns, 150.0 + (55'075 - 42) * kMaxRelativeDrift);
  EXPECT_EQ(f.alpha, 0.0);
  // Equal RTTs: the earlier tuple wins, whatever the order given.
  const std::vector<PtPrTuple> tie = {
      Tuple(7, 90'000, 90'000 + 200 + 500, 95'000 + 500, 95'000 + 100),  // offset est 550
      Tuple(8, 30'000, 30'000 + 100 + 500, 35'000 + 500, 35'000 + 200),  // offset est 450
  };
  EXPECT_DOUBLE_EQ(FitMinDelay(tie, 0).beta_ns, 450.0);
  EXPECT_FALSE(FitMinDelay({}, 0).ok);
}

}  // namespace
}  // namespace chronolink
