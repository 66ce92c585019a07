// The clock pages' drift: a line through each node's solved offsets on the
// fit clocks (agent/cluster/page_drift_history.h).
#include "agent/cluster/page_drift_history.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <vector>

namespace chronolink {
namespace {

constexpr int64_t kStep = 2'000'000'000;
constexpr int64_t kStart = 1'796'000'000'000'000'000;

NodeSolution Solved(uint32_t node, double offset_ns, double drift, double sigma_ns = 40) {
  NodeSolution n;
  n.node = node;
  n.reachable = true;
  n.offset_ns = offset_ns;
  n.drift = drift;
  n.uncertainty_ns = sigma_ns;
  return n;
}

// One node's page drift after an instant, the instant's own drift being
// `instant_drift` (off by 100 ppb, as under load: the line must not take it).
std::optional<double> ApplyOne(PageDriftHistory* h, int64_t t_ns, double offset_ns, double instant_drift) {
  std::vector<NodeSolution> nodes = {Solved(7, offset_ns, instant_drift)};
  h->Apply(t_ns, &nodes);
  return nodes[0].page_drift;
}

// Under noise as a loaded path gives (solved offsets off by 40 ns, an
// instant's drift by 100 ppb), the line finds the drift to a few ppb once
// it holds five instants over a quarter of the span, and none before.
TEST(PageDriftHistory, ALineThroughNoisyOffsetsFindsTheDriftAnInstantMisses) {
  PageDriftHistory h{PageDriftHistoryOptions{}};
  const double drift = 3.2e-6;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0, 40), drift_noise(0, 100e-9);
  double worst_line = 0, worst_instant = 0;
  for (int k = 0; k < 60; ++k) {
    const int64_t t = kStart + k * kStep;
    const double instant_drift = drift + drift_noise(rng);
    const std::optional<double> page = ApplyOne(&h, t, 25'000'000 + drift * (k * kStep) + noise(rng), instant_drift);
    if (k < 4) {
      EXPECT_FALSE(page.has_value()) << "instant " << k << ": a line through fewer than five points";
      continue;
    }
    ASSERT_TRUE(page.has_value()) << "instant " << k;
    if (k >= 15) {  // a full span
      worst_line = std::max(worst_line, std::abs(*page - drift));
      worst_instant = std::max(worst_instant, std::abs(instant_drift - drift));
    }
  }
  EXPECT_LT(worst_line, 10e-9) << "over a 30 s span, 40 ns of noise moves the slope by ~2 ppb";
  EXPECT_GT(worst_instant, 5 * worst_line) << "the instants' own drifts were as good: the test shows nothing";
}

// A step in the node's offsets (its fit clock anchored again, the mean
// reference moved) starts the history again: no line across it.
TEST(PageDriftHistory, AJumpStartsTheHistoryAgain) {
  PageDriftHistory h{PageDriftHistoryOptions{}};
  const double drift = -1.5e-6;
  int64_t t = kStart;
  double offset = 0;
  const double instant = drift + 100e-9;
  for (int k = 0; k < 10; ++k, t += kStep, offset += drift * kStep) {
    ASSERT_EQ(k >= 4, ApplyOne(&h, t, offset, instant).has_value());
  }
  offset += 5'000;  // 5 µs
  for (int k = 0; k < 10; ++k, t += kStep, offset += drift * kStep) {
    const std::optional<double> page = ApplyOne(&h, t, offset, instant);
    ASSERT_EQ(k >= 4, page.has_value()) << k << " instants after the jump";
    if (page) {
      EXPECT_NEAR(*page, drift, 1e-12) << "the line still leans on points from before the jump";
    }
  }
  // Below the floor (100 ns, 6 sigma of 40 ns: 240 ns) it is noise, kept.
  offset += 200;
  EXPECT_TRUE(ApplyOne(&h, t, offset, instant).has_value());
}

// Before a line is drawn, a point off the last one along the instant's
// drift starts the history again too.
TEST(PageDriftHistory, AJumpBeforeTheLineIsDrawnStartsTheHistoryAgain) {
  PageDriftHistory h{PageDriftHistoryOptions{}};
  const double drift = 2e-6, instant = drift + 100e-9;
  double offset = 0;
  int64_t t = kStart;
  for (int k = 0; k < 2; ++k, t += kStep, offset += drift * kStep) ASSERT_FALSE(ApplyOne(&h, t, offset, instant));
  offset += 1'000'000;  // 1 ms: a step the leader had no marker of
  for (int k = 0; k < 6; ++k, t += kStep, offset += drift * kStep) {
    const std::optional<double> page = ApplyOne(&h, t, offset, instant);
    ASSERT_EQ(k >= 4, page.has_value()) << k << " instants after the jump";
    if (page) {
      EXPECT_NEAR(*page, drift, 1e-12);
    }
  }
}

// No line crosses a step the leader was told of, even one too small for
// the jump test; the instants within it give no point.
TEST(PageDriftHistory, AStepOfTheNodeIsNeverCrossed) {
  PageDriftHistory h{PageDriftHistoryOptions{}};
  const double drift = -3e-6, instant = drift;
  double offset = 0;
  int64_t t = kStart;
  for (int k = 0; k < 10; ++k, t += kStep, offset += drift * kStep)
    ASSERT_EQ(k >= 4, ApplyOne(&h, t, offset, instant).has_value());
  h.NoteStep(7, t - 1, t + 2 * kStep + 1);  // this instant and the next two
  for (int k = 0; k < 3; ++k, t += kStep, offset += drift * kStep) {
    EXPECT_FALSE(ApplyOne(&h, t, offset, instant).has_value()) << "an instant within the step";
  }
  offset += 80;  // under the jump test's floor
  for (int k = 0; k < 6; ++k, t += kStep, offset += drift * kStep) {
    const std::optional<double> page = ApplyOne(&h, t, offset, instant);
    ASSERT_EQ(k >= 4, page.has_value()) << k << " instants after the step";
    if (page) {
      EXPECT_NEAR(*page, drift, 1e-12) << "a line across the step";
    }
  }
}

// Right after a step a solution's sigma can be hundreds of µs, which would
// pass any jump test: it is no point of a line.
TEST(PageDriftHistory, ASolutionLessSureThanAMicrosecondIsNoPoint) {
  PageDriftHistory h{PageDriftHistoryOptions{}};
  const double drift = 1e-6;
  for (int k = 0; k < 10; ++k) {
    std::vector<NodeSolution> nodes = {
        Solved(7, drift * k * kStep + (k == 7 ? 1'000'000 : 0), drift, k == 7 ? 3e5 : 40)};
    h.Apply(kStart + k * kStep, &nodes);
    EXPECT_EQ(nodes[0].page_drift.has_value(), k >= 4 && k != 7) << k;
    if (nodes[0].page_drift) {
      EXPECT_NEAR(*nodes[0].page_drift, drift, 1e-12) << k;
    }
  }
}

// An instant solved again (late windows) replaces its point; an instant
// where the node is unreachable leaves a gap in the line, not a break; and
// each node has its own.
TEST(PageDriftHistory, AnInstantSolvedAgainReplacesItsPointAndNodesKeepTheirOwn) {
  PageDriftHistory h{PageDriftHistoryOptions{}};
  const double drift_a = 2e-6, drift_b = -4e-6;
  for (int k = 0; k < 12; ++k) {
    const int64_t t = kStart + k * kStep;
    std::vector<NodeSolution> nodes = {Solved(1, drift_a * k * kStep + (k == 6 || k == 10 ? 90 : 0), drift_a + 1e-7),
                                       Solved(2, drift_b * k * kStep, drift_b - 1e-7)};
    if (k == 8) nodes[1] = NodeSolution{.node = 2};  // unreachable at this instant
    h.Apply(t, &nodes);
    if (k == 6) {
      // Solved again without the 90 ns that instant first had.
      nodes = {Solved(1, drift_a * k * kStep, drift_a + 1e-7), Solved(2, drift_b * k * kStep, drift_b - 1e-7)};
      h.Apply(t, &nodes);
    }
    if (k == 10) {
      // Solved again too unsure to be a point: the first point goes all the same.
      nodes = {Solved(1, 0, drift_a, 3e5), Solved(2, drift_b * k * kStep, drift_b)};
      h.Apply(t, &nodes);
      EXPECT_FALSE(nodes[0].page_drift.has_value()) << "an unsure solution's page";
      continue;
    }
    if (!nodes[1].reachable) {
      EXPECT_FALSE(nodes[1].page_drift.has_value()) << "an unreachable node's page";
    }
    if (k >= 6) {
      ASSERT_TRUE(nodes[0].page_drift.has_value());
      EXPECT_NEAR(*nodes[0].page_drift, drift_a, 1e-13) << "instant " << k;
      if (nodes[1].reachable) {
        ASSERT_TRUE(nodes[1].page_drift.has_value());
        EXPECT_NEAR(*nodes[1].page_drift, drift_b, 1e-13) << "instant " << k;
      }
    }
  }
}

TEST(PageDriftHistory, ASpanOfZeroLeavesEveryPageTheInstantsDrift) {
  PageDriftHistory h{PageDriftHistoryOptions{.span_ns = 0}};
  for (int k = 0; k < 20; ++k) EXPECT_FALSE(ApplyOne(&h, kStart + k * kStep, 1e-6 * k * kStep, 1e-6).has_value());
}

// Points older than the span leave the line: a drift that changed is
// followed within a span.
TEST(PageDriftHistory, ALineForgetsWhatIsOlderThanItsSpan) {
  PageDriftHistory h{PageDriftHistoryOptions{.span_ns = 10'000'000'000}};
  double offset = 0;
  std::optional<double> page;
  for (int k = 0; k < 40; ++k) {
    const double drift = k < 20 ? 1e-6 : 1.05e-6;  // 50 ppb more: under the jump floor over 2 s
    offset += drift * kStep;
    page = ApplyOne(&h, kStart + k * kStep, offset, drift);
  }
  ASSERT_TRUE(page.has_value());
  EXPECT_NEAR(*page, 1.05e-6, 1e-12);
}

}  // namespace
}  // namespace chronolink
