#include "agent/pair/probe_pair_filter.h"

#include <gtest/gtest.h>

#include <vector>

namespace chronolink {
namespace {

ProbeStamp S(int64_t ns) { return {ns, StampSource::kSocketSoftware}; }

// Responder clock = prober clock + kOffset; one-way delay d0 / d1 per packet.
constexpr int64_t kOffset = 1'234'567'890'123;  // ~20 min: a large constant offset
constexpr int64_t kT = 1'700'000'000'000'000'000;

PtPrTuple MakeTuple(int64_t fwd_d0, int64_t fwd_d1, int64_t rev_d0, int64_t rev_d1) {
  PtPrTuple t;
  t.seq = 9;
  const int64_t spacing = 800;
  t.fwd_tx[0] = S(kT);
  t.fwd_tx[1] = S(kT + spacing);
  t.fwd_rx[0] = S(kT + fwd_d0 + kOffset);
  t.fwd_rx[1] = S(kT + spacing + fwd_d1 + kOffset);
  const int64_t back = kT + 50'000;  // prober-clock instant the reply leaves
  t.rev_tx[0] = S(back + kOffset);
  t.rev_tx[1] = S(back + spacing + kOffset);
  t.rev_rx[0] = S(back + rev_d0);
  t.rev_rx[1] = S(back + spacing + rev_d1);
  return t;
}

TEST(ProbePairFilter, PureAcrossALargeClockOffset) {
  const ProbePairFilter f(300);
  const PtPrTuple t = MakeTuple(12'000, 12'000, 15'000, 15'000 + 300);
  EXPECT_TRUE(f.IsPure(t.fwd_tx, t.fwd_rx));
  EXPECT_TRUE(f.IsPure(t.rev_tx, t.rev_rx));  // exactly at the tolerance
  std::vector<OffsetBound> upper, lower;
  f.Extract(t, &upper, &lower);
  ASSERT_EQ(upper.size(), 1u);
  ASSERT_EQ(lower.size(), 1u);
  // Upper: x = fwd_tx[0], y = offset + forward delay of the first packet.
  EXPECT_EQ(upper[0].x_ns, kT);
  EXPECT_EQ(upper[0].y_ns, kOffset + 12'000);
  // Lower: x = rev_rx[0], y = offset - reverse delay of the first packet.
  EXPECT_EQ(lower[0].x_ns, kT + 50'000 + 15'000);
  EXPECT_EQ(lower[0].y_ns, kOffset - 15'000);
}

TEST(ProbePairFilter, ImpureJustBeyondTheTolerance) {
  const ProbePairFilter f(300);
  // Second packet queued 301 ns more than the first: spacing grew by 301.
  PtPrTuple t = MakeTuple(12'000, 12'301, 15'000, 15'000 - 303);
  EXPECT_FALSE(f.IsPure(t.fwd_tx, t.fwd_rx));
  EXPECT_FALSE(f.IsPure(t.rev_tx, t.rev_rx));  // compressed spacing counts too
  std::vector<OffsetBound> upper, lower;
  f.Extract(t, &upper, &lower);
  EXPECT_TRUE(upper.empty());
  EXPECT_TRUE(lower.empty());
  // One direction pure, the other not: only that bound comes out.
  t = MakeTuple(12'000, 12'000 - 299, 15'000, 15'000 + 5'000);
  f.Extract(t, &upper, &lower);
  EXPECT_EQ(upper.size(), 1u);
  EXPECT_TRUE(lower.empty());
}

TEST(ProbePairFilter, MissingStampIsNeverPure) {
  const ProbePairFilter f(300);
  for (int which = 0; which < 4; ++which) {
    PtPrTuple t = MakeTuple(12'000, 12'000, 15'000, 15'000);
    ProbeStamp* s[] = {&t.fwd_tx[0], &t.fwd_tx[1], &t.fwd_rx[0], &t.fwd_rx[1]};
    *s[which] = ProbeStamp{s[which]->ns, StampSource::kNone};  // value kept, source says absent
    EXPECT_FALSE(f.IsPure(t.fwd_tx, t.fwd_rx)) << which;
    EXPECT_TRUE(f.IsPure(t.rev_tx, t.rev_rx));
    std::vector<OffsetBound> upper, lower;
    f.Extract(t, &upper, &lower);
    EXPECT_TRUE(upper.empty());
    EXPECT_EQ(lower.size(), 1u);
  }
}

TEST(ProbePairFilter, OffsetDoesNotMatterOnlySpacing) {
  const ProbePairFilter f(100);
  PtPrTuple t = MakeTuple(12'000, 12'050, 15'000, 15'000);
  const bool before = f.IsPure(t.fwd_tx, t.fwd_rx);
  // Shift the responder's clock by a huge constant: purity is unchanged.
  for (auto* s : {&t.fwd_rx[0], &t.fwd_rx[1]}) s->ns -= 3'000'000'000'000'000'000;
  EXPECT_EQ(f.IsPure(t.fwd_tx, t.fwd_rx), before);
  EXPECT_TRUE(before);
  EXPECT_EQ(f.tolerance_ns(), 100);
}

}  // namespace
}  // namespace chronolink
