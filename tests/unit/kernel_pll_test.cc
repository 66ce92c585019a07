// The kernel PLL model of the discipline shim (tools/testbed/discipline_shim/
// kernel_pll.h) against kernel/time/ntp.c's rules, worked by hand: the PLL's
// frequency step and its cap on the update interval, the FLL term, the phase
// chunk of each second, the clamps, and microseconds without STA_NANO.
#include "clock/kernel_pll.h"

#include <gtest/gtest.h>
#include <sys/timex.h>

namespace chronolink {
namespace {

KernelPll PllOn(int64_t at_s, long constant, bool nano = true) {
  KernelPll pll;
  pll.SetStatus(STA_PLL, at_s);
  pll.SetNano(nano);
  pll.SetTimeConstant(constant);
  return pll;
}

TEST(KernelPll, AnOffsetMovesTheFrequencyByThePllGainWithTheIntervalCapped) {
  KernelPll pll = PllOn(100, 0);
  pll.UpdateOffset(1'000'000, 116);  // 16 s since the reference, capped at 2^(2+1+0) = 8
  // (offset · secs) << (32 - 2·(2 + 2 + 0)): 8e6 << 24 in ns/s << 32, 31.25 ppm.
  EXPECT_EQ(pll.frequency_scaled(), int64_t{8'000'000} << 24);
  EXPECT_EQ(pll.frequency_ppm16(), 31'250 * 65'536 / 1'000);
  // Again 4 s later: 4 s, under the cap.
  pll.UpdateOffset(-500'000, 120);
  EXPECT_EQ(pll.frequency_scaled(), (int64_t{8'000'000} << 24) + (int64_t{-2'000'000} << 24));
}

TEST(KernelPll, EachSecondSlewsItsShareOfThePhaseLeft) {
  KernelPll pll = PllOn(0, 0);
  pll.UpdateOffset(1'000'000, 0);
  const int64_t phase = int64_t{1'000'000} << 32;
  EXPECT_EQ(pll.NextSecondChunk(), phase >> 2);  // shift SHIFT_PLL + time constant = 2
  EXPECT_EQ(pll.NextSecondChunk(), (phase - (phase >> 2)) >> 2);
  int64_t slewed = (phase >> 2) + ((phase - (phase >> 2)) >> 2);
  for (int i = 0; i < 200; ++i) slewed += pll.NextSecondChunk();
  EXPECT_NEAR(static_cast<double>(slewed), static_cast<double>(phase), 4.0) << "the whole phase, to the last units";
  EXPECT_EQ(pll.NextSecondChunk(), 0);
  // A negative phase slews the other way, toward zero as the kernel shifts.
  KernelPll back = PllOn(0, 3);
  back.UpdateOffset(-64'000, 0);
  EXPECT_EQ(back.NextSecondChunk(), -((int64_t{64'000} << 32) >> 5));
  EXPECT_EQ(back.ReportedOffset(), -62'000);
}

TEST(KernelPll, TheFllTermPastMinsecAndTheClamps) {
  KernelPll fll = PllOn(0, 0);
  fll.SetStatus(STA_PLL | STA_FLL, 0);
  fll.UpdateOffset(3'000'000, 300);  // 300 s >= MINSEC with STA_FLL
  const int64_t expected = ((int64_t{3'000'000} << 30) / 300) + ((int64_t{3'000'000} * 8) << 24);
  EXPECT_EQ(fll.frequency_scaled(), expected);
  EXPECT_TRUE(fll.status() & STA_MODE);
  // A phase beyond 0.5 s is clamped; the frequency to 500 ppm.
  KernelPll big = PllOn(0, 0);
  big.UpdateOffset(2'000'000'000, 8);
  EXPECT_EQ(big.ReportedOffset(), 500'000'000);
  EXPECT_EQ(big.frequency_scaled(), KernelPll::kMaxFreqScaled);
  // Without STA_NANO offsets are microseconds and the constant gains 4.
  KernelPll micro = PllOn(0, 0, /*nano=*/false);
  EXPECT_EQ(micro.time_constant(), 4);
  micro.UpdateOffset(250, 0);
  EXPECT_EQ(micro.ReportedOffset(), 250);
  EXPECT_EQ(micro.offset_scaled(), int64_t{250'000} << 32);
  // Without STA_PLL an offset does nothing (chronyd's reset of it).
  KernelPll off;
  off.UpdateOffset(1'000'000, 10);
  EXPECT_EQ(off.offset_scaled(), 0);
  EXPECT_EQ(off.frequency_scaled(), 0);
}

}  // namespace
}  // namespace chronolink
