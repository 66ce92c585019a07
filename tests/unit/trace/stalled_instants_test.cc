// SetAsideStalledInstants against the rule written out the slow way: every
// instant's median taken, on generated sigma series (ordinary ones, wide
// first instants, stalls of one to several instants, zeros, unreachable and
// between-instants records mixed in). Its fast path (a sliding minimum
// skipping the medians no instant can exceed) must pick the same ones.
#include "trace/correct/stalled_instants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

namespace chronolink::trace {
namespace {

// The rule of stalled_instants.h, every median computed.
std::vector<bool> StalledSlowly(const std::vector<double>& s, double factor, size_t half) {
  const size_t n = s.size();
  std::vector<bool> candidate(n, false), stalled(n, false);
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> around(s.begin() + static_cast<std::ptrdiff_t>(i > half ? i - half : 0),
                               s.begin() + static_cast<std::ptrdiff_t>(std::min(n, i + half + 1)));
    std::sort(around.begin(), around.end());
    const double median = around[around.size() / 2];
    candidate[i] = median > 0 && s[i] > factor * median;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!candidate[i]) continue;
    std::optional<size_t> left, right;
    for (size_t j = i; j-- > 0;) {
      if (!candidate[j]) {
        left = j;
        break;
      }
    }
    for (size_t j = i + 1; j < n; ++j) {
      if (!candidate[j]) {
        right = j;
        break;
      }
    }
    stalled[i] = left && right && s[i] > factor * std::max(s[*left], s[*right]);
  }
  return stalled;
}

OffsetRecord Solved(uint32_t node, int64_t t, double sigma) {
  OffsetRecord r;
  r.node = node;
  r.t_ns = t;
  r.reachable = true;
  r.uncertainty_ns = sigma;
  return r;
}

std::vector<double> GeneratedSigmas(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> length(1, 400);
  std::lognormal_distribution<double> ordinary(std::log(30.0), 0.5);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> s(static_cast<size_t>(length(rng)));
  for (double& x : s) x = ordinary(rng);
  const int wide_start = std::uniform_int_distribution<int>(0, 5)(rng);
  for (int i = 0; i < wide_start && i < static_cast<int>(s.size()); ++i) s[static_cast<size_t>(i)] = 600 + 400 * u(rng);
  for (size_t i = 0; i < s.size(); ++i) {
    if (u(rng) < 0.02) {  // a stall of 1-12 instants, 3x to 10^4x wide
      const size_t run = std::uniform_int_distribution<size_t>(1, 12)(rng);
      const double width = std::pow(10.0, 0.5 + 3.5 * u(rng));
      for (size_t j = i; j < std::min(s.size(), i + run); ++j) s[j] *= width;
    }
    if (u(rng) < 0.01) s[i] = 0;
  }
  return s;
}

TEST(StalledInstants, TheFastPathSetsAsideWhatEveryMedianSays) {
  std::mt19937_64 rng(20261206);
  size_t set_aside = 0, series = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const double factor = trial % 4 == 0 ? 3.0 : 8.0;
    const size_t half = trial % 3 == 0 ? 4 : 32;
    std::vector<OffsetRecord> records;
    std::vector<std::vector<double>> by_node;
    std::vector<OffsetRecord> expected;
    for (uint32_t node = 1; node <= 3; ++node) {
      const std::vector<double> s = GeneratedSigmas(rng);
      const std::vector<bool> slow = StalledSlowly(s, factor, half);
      for (size_t i = 0; i < s.size(); ++i) {
        const int64_t t = 1'000'000'000LL * static_cast<int64_t>(2 * i + 1);
        records.push_back(Solved(node, t, s[i]));
        if (!slow[i]) expected.push_back(records.back());
        if (i % 17 == 5) {  // neither counts: an unreachable instant, one placed between
          OffsetRecord gone = Solved(node, t + 500'000'000, 0);
          gone.reachable = false;
          records.push_back(gone);
          expected.push_back(gone);
          OffsetRecord between = Solved(node, t + 700'000'000, 1e9);
          between.between_instants = true;
          records.push_back(between);
          expected.push_back(between);
        }
      }
      ++series;
    }
    const StalledInstantOptions options{.sigma_factor = factor, .neighbours_each_side = half};
    // The report's flags name the same instants the correction removes.
    const std::vector<bool> flags = FindStalledInstants(records, options);
    std::vector<OffsetRecord> unflagged;
    for (size_t i = 0; i < records.size(); ++i) {
      if (!flags[i]) unflagged.push_back(records[i]);
    }
    const size_t removed = SetAsideStalledInstants(&records, options);
    ASSERT_EQ(records.size(), expected.size()) << "trial " << trial;
    ASSERT_EQ(unflagged.size(), expected.size()) << "trial " << trial;
    for (size_t i = 0; i < records.size(); ++i) {
      ASSERT_EQ(records[i].node, expected[i].node) << trial << " " << i;
      ASSERT_EQ(records[i].t_ns, expected[i].t_ns) << trial << " " << i;
      ASSERT_EQ(unflagged[i].t_ns, expected[i].t_ns) << trial << " " << i;
    }
    set_aside += removed;
  }
  std::printf("%zu series, %zu instants set aside\n", series, set_aside);
  EXPECT_GT(set_aside, 100u) << "the generated stalls must exercise the rule";
}

TEST(StalledInstants, AFactorOfZeroSetsNothingAside) {
  std::vector<OffsetRecord> records = {Solved(2, 1, 40), Solved(2, 2, 40), Solved(2, 3, 1e6), Solved(2, 4, 40),
                                       Solved(2, 5, 40)};
  EXPECT_EQ(SetAsideStalledInstants(&records, StalledInstantOptions{.sigma_factor = 0}), 0u);
  EXPECT_EQ(records.size(), 5u);
  EXPECT_EQ(SetAsideStalledInstants(&records), 1u);
  EXPECT_EQ(records.size(), 4u);
  EXPECT_EQ(records[2].t_ns, 4);
}

}  // namespace
}  // namespace chronolink::trace
