// The per-edge fit span: long where the window offsets show only noise,
// short where the clocks wander (and after a change of clock: long, then
// short again), from the second differences of fits on
// each window's own probes.
#include "agent/estimate/fit_span_chooser.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace chronolink {
namespace {

constexpr int64_t kWindow = 2'000'000'000;
constexpr int64_t kStart = 1'790'000'000'000'000'000;

LineFit Fit(double beta_ns) {
  LineFit f;
  f.ok = true;
  f.beta_ns = beta_ns;
  return f;
}

FitSpanChooserOptions Range() {
  FitSpanChooserOptions o;
  o.min_span_ns = 2 * kWindow;
  o.max_span_ns = 6 * kWindow;
  return o;
}

// Window offsets: a constant drift, a random walk of wander_ns_per_sqrt_s,
// and independent fit noise of noise_ns; returns whether the span changed
// at any window and leaves the chooser after `windows` windows.
bool Feed(FitSpanChooser* chooser, int windows, double noise_ns, double wander_ns_per_sqrt_s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> gauss;
  const double drift = 37e-6, step_s = static_cast<double>(kWindow) / 1e9;
  double walk = 0;
  bool changed = false;
  for (int k = 0; k < windows; ++k) {
    walk += wander_ns_per_sqrt_s * std::sqrt(step_s) * gauss(rng);
    const double beta = 4.2e6 + drift * static_cast<double>(k) * static_cast<double>(kWindow) + walk +
                        noise_ns * gauss(rng);
    changed |= chooser->Add(kStart + k * kWindow + kWindow / 2, Fit(beta));
  }
  return changed;
}

TEST(FitSpanChooser, TakesTheLongestSpanUntilItHasSeenEnoughWindows) {
  FitSpanChooser c(kWindow, Range());
  EXPECT_EQ(c.span_ns(), 6 * kWindow);
  EXPECT_FALSE(Feed(&c, 15, 5, 40, 1)) << "15 windows: min_history is 16";
  EXPECT_EQ(c.span_ns(), 6 * kWindow);
  EXPECT_FALSE(c.evidence().has_value());
}

// Before any evidence: the longest span in whole windows, as without
// evidence of wander.
TEST(FitSpanChooser, StartsAtTheLongestSpan) {
  const int64_t w = kWindow;
  EXPECT_EQ(FitSpanChooser::StartSpan(w, 2 * w, 5 * w), 5 * w);
  EXPECT_EQ(FitSpanChooser::StartSpan(w, 2 * w, 2 * w), 2 * w);
  EXPECT_EQ(FitSpanChooser::StartSpan(w, 2 * w, 11 * w / 2), 5 * w) << "whole windows from the shortest";
  EXPECT_EQ(FitSpanChooser::StartSpan(w, 2 * w, w), 2 * w) << "never under the shortest";
  FitSpanChooserOptions o;  // the agent's defaults: 4 s to 20 s
  EXPECT_EQ(FitSpanChooser(w, o).span_ns(), 10 * w);
  o.start_span_ns = 3 * w;  // chronolink-sim measures other starts
  EXPECT_EQ(FitSpanChooser(w, o).span_ns(), 3 * w);
}

TEST(FitSpanChooser, TakesTheLongestSpanWhereTheOffsetsShowOnlyNoise) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    FitSpanChooser c(kWindow, Range());
    EXPECT_FALSE(Feed(&c, 64, 20, 0, seed)) << seed << ": it starts there";
    EXPECT_EQ(c.span_ns(), 6 * kWindow) << seed;
    ASSERT_TRUE(c.evidence().has_value());
    EXPECT_GT(c.evidence()->window_noise_ns, 10) << seed;
    EXPECT_LT(c.evidence()->window_noise_ns, 40) << seed;
    EXPECT_EQ(c.evidence()->windows, 64);
  }
}

TEST(FitSpanChooser, TakesTheShortestSpanWhereTheClocksWander) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    FitSpanChooser c(kWindow, Range());
    // 96 windows: from 64 on, its wander is beyond doubt in 35 of 40 seeds.
    EXPECT_TRUE(Feed(&c, 96, 5, 40, seed)) << seed;
    EXPECT_EQ(c.span_ns(), 2 * kWindow) << seed;
    ASSERT_TRUE(c.evidence().has_value());
    EXPECT_GT(c.evidence()->wander_ns_per_sqrt_s, 20) << seed;
    EXPECT_LT(c.evidence()->wander_ns_per_sqrt_s, 80) << seed;
    EXPECT_GT(c.evidence()->wander_lower_ns_per_sqrt_s, 10) << seed << ": plain beyond doubt";
    EXPECT_LE(c.evidence()->wander_lower_ns_per_sqrt_s, c.evidence()->wander_ns_per_sqrt_s) << seed;
  }
}

// Load episodes: the path delays one direction for two or three windows at
// a time, so a window's offset errs with its neighbour's. The lag-1 second
// differences see less of that than the longer lags, and the line through
// their variances reads it as wander (on the test bed: 10-50 ns/sqrt(s)
// where the clocks wandered 6). The span must not shorten on it.
TEST(FitSpanChooser, LoadEpisodesDoNotShortenTheSpan) {
  int read_as_wander = 0;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    FitSpanChooser c(kWindow, Range());
    std::mt19937 rng(seed);
    std::normal_distribution<double> gauss;
    std::uniform_real_distribution<double> uniform;
    int episode_left = 0;
    double episode_ns = 0;
    for (int k = 0; k < 128; ++k) {
      if (episode_left == 0 && uniform(rng) < 0.06) {
        episode_left = 2 + static_cast<int>(uniform(rng) * 2);  // 4-6 s
        episode_ns = (uniform(rng) < 0.5 ? -1 : 1) * (100 + 100 * uniform(rng));
      }
      const double beta = 4.2e6 + 25 * gauss(rng) + (episode_left > 0 ? episode_ns : 0);
      episode_left = std::max(0, episode_left - 1);
      c.Add(kStart + k * kWindow + kWindow / 2, Fit(beta));
      if (c.evidence()) {
        EXPECT_EQ(c.span_ns(), 6 * kWindow) << seed << " window " << k;
      }
    }
    ASSERT_TRUE(c.evidence().has_value());
    read_as_wander += c.evidence()->wander_ns_per_sqrt_s > 5;
  }
  // The test's own check: its episodes do fool the point estimate.
  EXPECT_GE(read_as_wander, 4);
}

// Between the two, what the chooser rests on: the noise and the wander
// come out within a factor of two of what was put in.
TEST(FitSpanChooser, SeparatesNoiseFromWander) {
  for (uint32_t seed : {4u, 5u, 6u, 7u}) {
    FitSpanChooser c(kWindow, Range());
    Feed(&c, 128, 40, 20, seed);
    ASSERT_TRUE(c.evidence().has_value());
    EXPECT_GT(c.evidence()->window_noise_ns, 20) << seed;
    EXPECT_LT(c.evidence()->window_noise_ns, 80) << seed;
    EXPECT_GT(c.evidence()->wander_ns_per_sqrt_s, 10) << seed;
    EXPECT_LT(c.evidence()->wander_ns_per_sqrt_s, 40) << seed;
  }
}

TEST(FitSpanChooser, ShortensTheSpanAgainWhenTheClocksStartToWander) {
  FitSpanChooser c(kWindow, Range());
  Feed(&c, 64, 20, 0, 8);
  ASSERT_EQ(c.span_ns(), 6 * kWindow);
  // The same edge, later: a clock that wanders (a new history, after a gap).
  std::mt19937 rng(9);
  std::normal_distribution<double> gauss;
  double walk = 0;
  bool changed = false;
  for (int k = 100; k < 228; ++k) {
    walk += 40 * std::sqrt(2.0) * gauss(rng);
    changed |= c.Add(kStart + k * kWindow + kWindow / 2, Fit(4.2e6 + walk + 5 * gauss(rng)));
  }
  EXPECT_TRUE(changed);
  EXPECT_EQ(c.span_ns(), 2 * kWindow);
}

TEST(FitSpanChooser, SkipsFailedFitsAndRestartsAfterAGap) {
  FitSpanChooser c(kWindow, Range());
  Feed(&c, 10, 5, 0, 5);
  LineFit failed;
  failed.ok = false;
  EXPECT_FALSE(c.Add(kStart + 10 * kWindow + kWindow / 2, failed));
  LineFit nan = Fit(std::nan(""));
  EXPECT_FALSE(c.Add(kStart + 11 * kWindow + kWindow / 2, nan));
  // Six windows later: a gap of more than four windows, the history restarts.
  for (int k = 16; k < 31; ++k) c.Add(kStart + k * kWindow + kWindow / 2, Fit(4.2e6));
  EXPECT_FALSE(c.evidence().has_value()) << "15 windows since the gap";
  c.Add(kStart + 31 * kWindow + kWindow / 2, Fit(4.2e6));
  EXPECT_TRUE(c.evidence().has_value());
}

// A step changes neither the path's noise nor the clocks' wander: the span
// chosen before it stays (back at the shortest, a loaded edge fitted 4 s
// spans for 40-60 s after the start check's re-anchor, and those windows
// held its worst errors), while the offsets before the step no longer count.
TEST(FitSpanChooser, AClockStepKeepsTheSpanAndStartsItsHistoryAgain) {
  FitSpanChooser c(kWindow, Range());
  Feed(&c, 64, 20, 0, 10);
  ASSERT_EQ(c.span_ns(), 6 * kWindow);
  ASSERT_TRUE(c.evidence().has_value());
  const double noise_before = c.evidence()->window_noise_ns;
  c.AfterClockStep();
  EXPECT_EQ(c.span_ns(), 6 * kWindow);
  ASSERT_TRUE(c.evidence().has_value()) << "what the span rests on";
  EXPECT_EQ(c.evidence()->window_noise_ns, noise_before);
  // The history starts again: after the step, windows without noise or
  // wander (where the shortest span would do) move nothing until 16 of them
  // are in, and a step back of the offset between them and the old ones
  // never enters a second difference.
  for (int k = 0; k < 15; ++k) {
    EXPECT_FALSE(c.Add(kStart + (64 + k) * kWindow + kWindow / 2, Fit(9.9e6)));
    EXPECT_EQ(c.span_ns(), 6 * kWindow);
  }
  c.Add(kStart + 79 * kWindow + kWindow / 2, Fit(9.9e6));
  ASSERT_TRUE(c.evidence().has_value());
  EXPECT_EQ(c.evidence()->windows, 16) << "only the windows since the step";
}

TEST(FitSpanChooser, SpanVarianceIsLeastWhereNoiseAndWanderTermsMeet) {
  FitSpanEvidence e;
  e.window_noise_ns = 30;
  e.wander_lower_ns_per_sqrt_s = 10;
  const double best_s = std::sqrt(30.0 * 30.0 * 2 / (10.0 * 10.0 / (2.576 * 2.576)));
  const auto at = [&](double s) { return FitSpanChooser::SpanVariance(e, kWindow, std::llround(s * 1e9)); };
  EXPECT_LT(at(best_s), at(best_s * 0.8));
  EXPECT_LT(at(best_s), at(best_s * 1.25));
  e.wander_ns_per_sqrt_s = 50;  // the estimate alone: not beyond doubt
  e.wander_lower_ns_per_sqrt_s = 0;
  EXPECT_LT(at(16), at(4)) << "without wander beyond doubt, longer is always better";
}

// The rule the agent's config and chronolink-sim share.
// bench/fit_replay.py replays the chooser (its chooser_evidence) to choose
// the agent's rules; it must estimate what this one does. 40 generated
// histories (noise, wander, drift, holes up to 4 windows, outliers that
// the 4-sigma clip catches, even and odd counts of second differences)
// go through both; each evidence must agree to 1e-9 of its size.
TEST(FitSpanChooser, ThePythonReplayEstimatesTheSameEvidence) {
  std::mt19937 rng(11);
  std::normal_distribution<double> gauss;
  std::uniform_real_distribution<double> u(0, 1);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("chooser_cases_" + std::to_string(::getpid()) + ".jsonl")).string();
  std::vector<std::optional<FitSpanEvidence>> expected;
  {
    std::ofstream cases(path);
    for (int c = 0; c < 40; ++c) {
      FitSpanChooserOptions o = Range();
      o.wander_doubt_sigmas = c % 3;
      FitSpanChooser chooser(kWindow, o);
      const int windows = 24 + static_cast<int>(u(rng) * 104);  // within the 128 fits the chooser keeps
      const double noise = 1 + 60 * u(rng), wander = c % 4 == 0 ? 0 : 40 * u(rng);
      double walk = 0;
      int fits = 0;
      bool last_hole = false;
      std::ostringstream betas;
      for (int k = 0; k < windows; ++k) {
        walk += wander * std::sqrt(2.0) * gauss(rng);
        // Single holes, never at the ends: the chooser's history runs from a
        // fit to a fit, and a longer gap would restart it.
        const bool hole = k > 0 && k + 1 < windows && !last_hole && u(rng) < 0.08;
        last_hole = hole;
        double beta = 4.2e6 + 37e-6 * static_cast<double>(k) * 2e9 + walk + noise * gauss(rng);
        if (u(rng) < 0.03) beta += 50 * noise;  // a bad window's fit
        betas << (k ? "," : "");
        if (hole) {
          betas << "null";
          continue;
        }
        char text[32];
        std::snprintf(text, sizeof text, "%.17g", beta);
        betas << text;
        chooser.Add(kStart + k * kWindow, Fit(std::strtod(text, nullptr)));
        ++fits;
      }
      ASSERT_GE(fits, 16) << "under the chooser's least history";
      cases << "{\"betas\":[" << betas.str() << "],\"window_ns\":" << kWindow
            << ",\"doubt_sigmas\":" << o.wander_doubt_sigmas << "}\n";
      expected.push_back(chooser.evidence());
    }
  }
  const std::string command =
      std::string(CHRONOLINK_PYTHON3) + " " + CHRONOLINK_SOURCE_DIR + "/bench/fit_replay.py --chooser-evidence " + path;
  FILE* out = ::popen(command.c_str(), "r");
  ASSERT_NE(out, nullptr);
  size_t compared = 0, with_evidence = 0;
  char line[256];
  while (std::fgets(line, sizeof line, out) != nullptr) {
    ASSERT_LT(compared, expected.size());
    const auto& e = expected[compared++];
    if (std::string(line).rfind("none", 0) == 0) {
      EXPECT_FALSE(e.has_value()) << "case " << compared;
      continue;
    }
    double noise = 0, wander = 0, lower = 0;
    ASSERT_EQ(std::sscanf(line, "%lf %lf %lf", &noise, &wander, &lower), 3) << line;
    ASSERT_TRUE(e.has_value()) << "case " << compared;
    ++with_evidence;
    EXPECT_NEAR(noise, e->window_noise_ns, 1e-9 * std::max(1.0, e->window_noise_ns)) << "case " << compared;
    EXPECT_NEAR(wander, e->wander_ns_per_sqrt_s, 1e-9 * std::max(1.0, e->wander_ns_per_sqrt_s)) << "case " << compared;
    EXPECT_NEAR(lower, e->wander_lower_ns_per_sqrt_s, 1e-9 * std::max(1.0, e->wander_lower_ns_per_sqrt_s))
        << "case " << compared;
  }
  EXPECT_EQ(::pclose(out), 0) << command;
  std::filesystem::remove(path);
  EXPECT_EQ(compared, expected.size());
  EXPECT_GT(with_evidence, 30u);
}

TEST(FitSpanRange, FixedOrChosenFromTwoWindowsToALongest) {
  const int64_t w = 2'000'000'000;
  const FitSpanRange fixed = FitSpanRange::Of(w, 3 * w, 0);
  EXPECT_FALSE(fixed.chosen);
  EXPECT_EQ(fixed.shortest_ns, 3 * w);
  EXPECT_EQ(fixed.longest_ns, 3 * w);
  EXPECT_FALSE(ChooserOptionsFor(fixed).has_value());

  const FitSpanRange chosen = FitSpanRange::Of(w, 0, 0);
  EXPECT_TRUE(chosen.chosen);
  EXPECT_EQ(chosen.shortest_ns, 2 * w);
  EXPECT_EQ(chosen.longest_ns, 3 * w);
  ASSERT_TRUE(ChooserOptionsFor(chosen).has_value());
  EXPECT_EQ(ChooserOptionsFor(chosen)->min_span_ns, 2 * w);
  EXPECT_EQ(chosen.longest_trailing_ns, 10 * w) << "reaching back seven windows more";
  EXPECT_LE(chosen.longest_trailing_ns, kMaxTrailingWindows * w);
  EXPECT_EQ(ChooserOptionsFor(chosen)->max_span_ns, 10 * w) << "the chooser picks up to the longest of all";
  EXPECT_EQ(fixed.longest_trailing_ns, 3 * w);

  EXPECT_EQ(FitSpanRange::Of(w, 0, 4 * w).longest_ns, 4 * w);
  EXPECT_EQ(FitSpanRange::Of(w, 0, 12 * w).longest_trailing_ns, 12 * w) << "never under the centred one";
  EXPECT_EQ(FitSpanRange::Of(w, 0, 0, 7 * w).longest_trailing_ns, 7 * w);
  EXPECT_EQ(FitSpanRange::Of(w, 0, 0, 3 * w).longest_trailing_ns, 3 * w) << "every span centred";
  // A longest under two windows is the shortest too.
  EXPECT_EQ(FitSpanRange::Of(w, 0, w).shortest_ns, w);
}

}  // namespace
}  // namespace chronolink
