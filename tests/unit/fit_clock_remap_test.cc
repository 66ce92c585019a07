// The remap of a fit clock's bend (clock/fit_clock_remap.h): exact onto the
// new rate's line drawn back, the identity from the bend on, and undone by
// Invert; wire values at the limits neither overflow nor wrap.
#include "clock/fit_clock_remap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

#include "clock/clock_trajectory.h"
#include "clock/fit_point.h"

namespace chronolink {
namespace {

constexpr int64_t kAt = 1'796'526'740'208'968'216;

// The same bend as two anchors of one RAW: F before it and the new line.
TEST(FitClockRemap, CarriesAValueOntoTheNewRatesLineExactly) {
  const FitClockRemap m{kAt, -9'123'456'789, -46'530'000'001};
  const FitAnchor before{1'000'000'000'000, kAt - 77'000'000'000, m.rate_before_fine};
  const int64_t raw_at = before.RawOfFit(kAt);
  const FitAnchor after{raw_at, before.FitOfRaw(raw_at), m.rate_after_fine};
  const FitClockRemap exact{after.realtime_ns, m.rate_before_fine, m.rate_after_fine};
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> back(0, 100'000'000'000);
  for (int i = 0; i < 1000; ++i) {
    const int64_t raw = raw_at - back(rng);
    const int64_t old_value = before.FitOfRaw(raw);
    EXPECT_LE(std::llabs(exact.Apply(old_value) - after.FitOfRaw(raw)), 1) << "raw " << raw;
    EXPECT_LE(std::llabs(exact.Invert(exact.Apply(old_value)) - old_value), 1);
  }
}

TEST(FitClockRemap, LeavesTheBendAndLaterValuesAsTheyAre) {
  const FitClockRemap m{kAt, 0, 40'000'000'000};
  for (int64_t v : {kAt, kAt + 1, kAt + 5'000'000'000, std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(m.Apply(v), v);
    EXPECT_EQ(m.Invert(v), v);
  }
  // 40 ppm faster: 10 s before the bend reads 400 us further back.
  EXPECT_EQ(m.Apply(kAt - 10'000'000'000), kAt - 10'000'400'000);
  EXPECT_EQ(m.Invert(kAt - 10'000'400'000), kAt - 10'000'000'000);
  EXPECT_DOUBLE_EQ(m.RateRatio(), 1.00004);
}

// A peer's stamps and its remap come off the wire: absurd values clamp.
TEST(FitClockRemap, ExtremeValuesClampInsteadOfWrapping) {
  const FitClockRemap m{std::numeric_limits<int64_t>::max(), -100'000'000'000'000, 100'000'000'000'000};
  EXPECT_EQ(m.Apply(std::numeric_limits<int64_t>::min()), std::numeric_limits<int64_t>::min());
  const FitClockRemap shrink{std::numeric_limits<int64_t>::max(), 100'000'000'000'000, -100'000'000'000'000};
  const int64_t v = shrink.Apply(std::numeric_limits<int64_t>::min());
  EXPECT_GT(v, std::numeric_limits<int64_t>::min()) << "a slower line drawn back lies above the value";
  EXPECT_LT(v, 0);
}

}  // namespace
}  // namespace chronolink
