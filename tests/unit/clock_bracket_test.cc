// TightestBracket: the one rule by which chronolink relates two clocks it
// can read (kernel clock pairs, the collector's host clocks, a NIC's PTP
// clock).
#include "clock/clock_bracket.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

namespace chronolink {
namespace {

TEST(TightestBracket, KeepsTheNarrowestAndTheFirstOfEqualOnes) {
  TightestBracket t;
  EXPECT_FALSE(t.found());
  EXPECT_TRUE(t.Offer({1'000, 5'500, 1'100}));  // width 100
  EXPECT_TRUE(t.Offer({2'000, 6'520, 2'040}));  // width 40: kept
  EXPECT_TRUE(t.Offer({3'000, 9'999, 3'040}));  // width 40 again: the first stays
  EXPECT_TRUE(t.Offer({4'000, 7'000, 4'090}));
  ASSERT_TRUE(t.found());
  EXPECT_EQ(t.width_ns(), 40);
  const BracketOffset o = t.OffsetAtMidpoint(3);
  EXPECT_EQ(o.ref_ns, 2'020);
  EXPECT_EQ(o.offset_ns, 6'520 - 2'020);
  EXPECT_EQ(o.error_ns, 20 + 3);
  EXPECT_EQ(o.bracket_ns, 40);
}

TEST(TightestBracket, AReferenceGoingBackwardsIsNoBracket) {
  TightestBracket t;
  EXPECT_FALSE(t.Offer({1'000, 5'000, 999}));
  EXPECT_FALSE(t.found());
  EXPECT_TRUE(t.Offer({1'000, 5'000, 1'000}));  // width 0 is a bracket
  EXPECT_EQ(t.OffsetAtMidpoint(1).error_ns, 1);
}

// An odd width rounds the error up: the truth is anywhere in the bracket.
TEST(TightestBracket, AnOddWidthRoundsTheErrorUp) {
  TightestBracket t;
  t.Offer({0, 100, 7});
  const BracketOffset o = t.OffsetAtMidpoint(0);
  EXPECT_EQ(o.ref_ns, 3);
  EXPECT_EQ(o.error_ns, 4);
  // Both ends of the bracket are within the error of the midpoint estimate.
  EXPECT_LE(std::abs((100 - 0) - o.offset_ns), o.error_ns);
  EXPECT_LE(std::abs((100 - 7) - o.offset_ns), o.error_ns);
}

// Reads in the order before, other, after, and the tightest of them kept.
TEST(TightestBracket, OfReadsTakesEachBracketInOrder) {
  std::vector<int64_t> script = {100, 500, 180, 200, 600, 210, 300, 700, 400};  // widths 80, 10, 100
  size_t next = 0;
  std::vector<clockid_t> asked;
  const auto read = [&](clockid_t c) {
    asked.push_back(c);
    return script[next++];
  };
  const TightestBracket t = TightestOfReads(3, read, CLOCK_MONOTONIC, CLOCK_REALTIME);
  EXPECT_EQ(next, 9u);
  EXPECT_EQ(asked[0], CLOCK_MONOTONIC);
  EXPECT_EQ(asked[1], CLOCK_REALTIME);
  EXPECT_EQ(asked[2], CLOCK_MONOTONIC);
  EXPECT_EQ(t.width_ns(), 10);
  EXPECT_EQ(t.OffsetAtMidpoint(0).offset_ns, 600 - 205);
}

}  // namespace
}  // namespace chronolink
