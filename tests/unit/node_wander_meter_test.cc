#include "agent/solve/node_wander_meter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace chronolink {
namespace {

constexpr int64_t kWindowNs = 2'000'000'000;
constexpr int64_t kSpanNs = 6'000'000'000;  // the agent's longest centred span
constexpr double kStepS = 0.05;             // the phase walks in 50 ms steps

// Nodes whose phases walk (w ns/√s each) and drift; every pair of them
// probes both ways. A window's offset is what a centred 6 s fit makes of the
// walk (its mean over the span, a line's value at its middle), plus each
// directed edge's own noise (load, queueing), independent of every other.
class WalkingCluster {
 public:
  WalkingCluster(std::vector<double> wander, double edge_noise_ns, int windows, uint32_t seed)
      : wander_(std::move(wander)), noise_(edge_noise_ns), rng_(seed) {
    const int steps = static_cast<int>((windows + 4) * 2.0 / kStepS);
    phase_.assign(wander_.size(), std::vector<double>(steps, 0.0));
    std::normal_distribution<double> g(0.0, 1.0);
    for (size_t n = 0; n < wander_.size(); ++n) {
      for (int i = 1; i < steps; ++i) phase_[n][i] = phase_[n][i - 1] + wander_[n] * std::sqrt(kStepS) * g(rng_);
    }
  }
  size_t nodes() const { return wander_.size(); }

  // The directed edge's estimate of window k (x0 at its centre).
  EdgeEstimate Window(uint32_t node, uint32_t peer, int k) {
    std::normal_distribution<double> g(0.0, 1.0);
    const double centre_s = 4.0 + k * 2.0 + 1.0;
    const int from = static_cast<int>((centre_s - 3.0) / kStepS), to = static_cast<int>((centre_s + 3.0) / kStepS);
    double mean = 0;
    for (int i = from; i < to; ++i) mean += phase_[peer][i] - phase_[node][i];
    mean /= to - from;
    EdgeEstimate e;
    e.node = node;
    e.peer = peer;
    e.x0_ns = k * kWindowNs + kWindowNs / 2;
    const double drift_ns = 40e-6 * (static_cast<double>(peer) - node) * centre_s * 1e9;  // tens of ppm
    e.beta_ns = drift_ns + mean + noise_ * g(rng_);
    e.uncertainty_ns = 12;
    return e;
  }

  // Every directed edge's windows 0..windows-1 into the meter, in order.
  void Feed(NodeWanderMeter& meter, int windows) {
    for (int k = 0; k < windows; ++k) {
      for (uint32_t a = 0; a < nodes(); ++a) {
        for (uint32_t b = 0; b < nodes(); ++b) {
          if (a != b) meter.Add(Window(a, b, k), k);
        }
      }
    }
  }

 private:
  std::vector<double> wander_;
  double noise_;
  std::mt19937 rng_;
  std::vector<std::vector<double>> phase_;
};

TEST(NodeWanderMeter, FindsTheNodeWhoseClockWalksFromItsEdgesAlone) {
  WalkingCluster cluster({20, 2, 2, 2, 2, 2}, 5.0, 150, 1);
  NodeWanderMeter meter(kWindowNs, kSpanNs);
  cluster.Feed(meter, 150);
  const std::optional<double> walker = meter.WanderNsPerSqrtS(0);
  ASSERT_TRUE(walker.has_value());
  EXPECT_GT(*walker, 20 * 0.7);
  EXPECT_LT(*walker, 20 * 1.4);
  for (uint32_t n = 1; n < cluster.nodes(); ++n) {
    ASSERT_TRUE(meter.WanderNsPerSqrtS(n).has_value()) << n;
    EXPECT_LT(*meter.WanderNsPerSqrtS(n), 6.0) << n;
  }
  // Its fits' miss at the 6 s span: w·√(S/12).
  EXPECT_NEAR(*meter.SharedSigmaNs(0), *walker * std::sqrt(6.0 / 12.0), 1e-9);
  EXPECT_EQ(meter.SharedSigmas().size(), cluster.nodes());
  EXPECT_EQ(meter.stats().rejected, 0u);
}

// The meter keeps running sums; counted one pair at a time, over every
// centre (nothing forgotten), the products of second differences on
// different links of each node give the same walk.
TEST(NodeWanderMeter, EqualsEveryPairOfLinksCountedOneByOne) {
  constexpr int kWindows = 60;
  WalkingCluster cluster({9, 3, 6, 2, 4}, 5.0, kWindows, 7);
  NodeWanderOptions o;
  o.memory_windows = 1e15;
  NodeWanderMeter meter(kWindowNs, kSpanNs, o);
  std::map<std::pair<uint32_t, uint32_t>, std::vector<double>> beta;
  for (int k = 0; k < kWindows; ++k) {
    for (uint32_t a = 0; a < cluster.nodes(); ++a) {
      for (uint32_t b = 0; b < cluster.nodes(); ++b) {
        if (a == b) continue;
        const EdgeEstimate e = cluster.Window(a, b, k);
        meter.Add(e, k);
        beta[{a, b}].push_back(e.beta_ns);
      }
    }
  }
  const int L = meter.lag_windows();
  // Centres the meter has taken: up to newest − L − settle, exclusive.
  const int last_centre = kWindows - 1 - L - o.settle_windows - 1;
  for (uint32_t n = 0; n < cluster.nodes(); ++n) {
    double products = 0, pairs = 0;
    for (int c = L; c <= last_centre; ++c) {
      std::vector<std::pair<uint32_t, double>> v;  // (other end, second difference signed for n)
      for (const auto& [edge, b] : beta) {
        if (edge.first != n && edge.second != n) continue;
        const double d2 = b[c + L] - 2 * b[c] + b[c - L];
        v.emplace_back(edge.first == n ? edge.second : edge.first, edge.first == n ? -d2 : d2);
      }
      for (size_t i = 0; i < v.size(); ++i) {
        for (size_t j = i + 1; j < v.size(); ++j) {
          if (v[i].first == v[j].first) continue;  // one link's two directions
          products += v[i].second * v[j].second;
          pairs += 1;
        }
      }
    }
    const double lag_s = 2.0 * L;
    const double expected = std::sqrt(std::max(0.0, products / pairs) / (2 * lag_s - 6.0));
    ASSERT_TRUE(meter.WanderNsPerSqrtS(n).has_value()) << n;
    EXPECT_NEAR(*meter.WanderNsPerSqrtS(n), expected, 1e-6 * expected) << n;
  }
}

TEST(NodeWanderMeter, NoiseOfEachEdgeIsNotWander) {
  // 40 ns of independent noise per window on every edge (a loaded path),
  // clocks walking 1 ns/√s: one edge's offsets scatter a lot, but no two
  // edges of a node scatter together.
  WalkingCluster cluster({1, 1, 1, 1, 1, 1}, 40.0, 150, 2);
  NodeWanderMeter meter(kWindowNs, kSpanNs);
  cluster.Feed(meter, 150);
  for (uint32_t n = 0; n < cluster.nodes(); ++n) {
    ASSERT_TRUE(meter.WanderNsPerSqrtS(n).has_value()) << n;
    // The noise alone would read as 40·√6/√(2D − S) ≈ 31 ns/√s on one edge.
    EXPECT_LT(*meter.WanderNsPerSqrtS(n), 8.0) << n;
  }
}

TEST(NodeWanderMeter, UntilMeasuredANodeGetsHalfItsEdgesVariance) {
  WalkingCluster cluster({5, 5, 5}, 2.0, 30, 3);
  NodeWanderMeter meter(kWindowNs, kSpanNs);
  cluster.Feed(meter, 4);  // short of two lags
  EXPECT_FALSE(meter.WanderNsPerSqrtS(0).has_value());
  EXPECT_FALSE(meter.SharedSigmaNs(0).has_value());
  const auto sigmas = meter.SharedSigmas();
  ASSERT_EQ(sigmas.size(), 3u);
  EXPECT_NEAR(sigmas.at(0), 12.0 / std::sqrt(2.0), 1e-9);

  // Two nodes, one link: never measured, and no provisional figure either.
  WalkingCluster pair({5, 5}, 2.0, 60, 3);
  NodeWanderMeter lone(kWindowNs, kSpanNs);
  pair.Feed(lone, 60);
  EXPECT_FALSE(lone.WanderNsPerSqrtS(0).has_value());
  EXPECT_TRUE(lone.SharedSigmas().empty());
}

TEST(NodeWanderMeter, AResendChangesNothing) {
  WalkingCluster cluster({3, 3, 3, 3}, 2.0, 120, 4);
  NodeWanderMeter once(kWindowNs, kSpanNs), twice(kWindowNs, kSpanNs);
  for (int k = 0; k < 120; ++k) {
    for (uint32_t a = 0; a < 4; ++a) {
      for (uint32_t b = 0; b < 4; ++b) {
        if (a == b) continue;
        const EdgeEstimate e = cluster.Window(a, b, k);
        once.Add(e, k);
        twice.Add(e, k);
        twice.Add(e, k);
      }
    }
    twice.ResetEdge(9, 9);  // an edge it never saw
  }
  EXPECT_EQ(twice.stats().second_differences, once.stats().second_differences);
  EXPECT_DOUBLE_EQ(*twice.WanderNsPerSqrtS(0), *once.WanderNsPerSqrtS(0));
}

TEST(NodeWanderMeter, AReAnchoredEdgesSecondDifferencesAreLeftOutAndCounted) {
  WalkingCluster cluster({3, 3, 3, 3}, 2.0, 120, 5);
  NodeWanderMeter meter(kWindowNs, kSpanNs);
  for (int k = 0; k < 120; ++k) {
    for (uint32_t a = 0; a < 4; ++a) {
      for (uint32_t b = 0; b < 4; ++b) {
        if (a == b) continue;
        EdgeEstimate e = cluster.Window(a, b, k);
        if (a == 0 && b == 1 && k >= 60) e.beta_ns += 1e6;
        meter.Add(e, k);
      }
    }
  }
  // The jump sits in the second differences of the windows 2L around it.
  EXPECT_EQ(meter.stats().rejected, 2u * meter.lag_windows());
  ASSERT_TRUE(meter.WanderNsPerSqrtS(0).has_value());
  EXPECT_LT(*meter.WanderNsPerSqrtS(0), 6.0);
}

TEST(NodeWanderMeter, AStepRestartsTheEdgesDifferences) {
  WalkingCluster cluster({3, 3, 3}, 2.0, 40, 6);
  NodeWanderMeter meter(kWindowNs, kSpanNs);
  for (int k = 0; k < 40; ++k) {
    if (k == 20) meter.ResetEdge(0, 1);
    for (uint32_t a = 0; a < 3; ++a) {
      for (uint32_t b = 0; b < 3; ++b) {
        if (a != b) meter.Add(cluster.Window(a, b, k), k);
      }
    }
  }
  // Six edges over 40 windows at lag L, less the 2L windows the reset cost one of them.
  const uint64_t L = static_cast<uint64_t>(meter.lag_windows());
  EXPECT_EQ(meter.stats().second_differences, 6u * (40u - 2u * L) - 2u * L);
}

}  // namespace
}  // namespace chronolink
