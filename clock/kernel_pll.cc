#include "clock/kernel_pll.h"

#include <sys/timex.h>

#include <algorithm>

namespace chronolink {
namespace {

// The kernel's shift_right: toward zero for negative values too.
int64_t ShiftRight(int64_t x, int s) { return x < 0 ? -((-x) >> s) : x >> s; }

constexpr int64_t kPpmScale = 1000LL << (KernelPll::kScaleShift - 16);  // NSEC_PER_USEC << (32 - SHIFT_USEC)

}  // namespace

void KernelPll::SetStatus(int status, int64_t now_s) {
  if ((status_ & STA_PLL) && !(status & STA_PLL)) status_ = STA_UNSYNC;
  if (!(status_ & STA_PLL) && (status & STA_PLL)) reftime_s_ = now_s;
  status_ &= STA_RONLY;
  status_ |= status & ~STA_RONLY;
}

void KernelPll::SetFrequency(long freq_ppm16) {
  freq_scaled_ = std::clamp<int64_t>(static_cast<int64_t>(freq_ppm16) * kPpmScale, -kMaxFreqScaled, kMaxFreqScaled);
}

long KernelPll::frequency_ppm16() const { return static_cast<long>(freq_scaled_ / kPpmScale); }

void KernelPll::SetTimeConstant(long constant) {
  if (!(status_ & STA_NANO)) constant += 4;
  constant_ = std::clamp<long>(constant, 0, kMaxTimeConstant);
}

void KernelPll::UpdateOffset(long offset, int64_t now_s) {
  if (!(status_ & STA_PLL)) return;
  int64_t offset_ns = offset;
  if (!(status_ & STA_NANO)) offset_ns = std::clamp<int64_t>(offset_ns, -1'000'000, 1'000'000) * 1000;
  offset_ns = std::clamp<int64_t>(offset_ns, -kMaxPhaseNs, kMaxPhaseNs);
  int64_t secs = now_s - reftime_s_;
  if (status_ & STA_FREQHOLD) secs = 0;
  reftime_s_ = now_s;
  // ntp_update_offset_fll
  int64_t freq_adj = 0;
  status_ &= ~STA_MODE;
  if (secs >= kMinSec && ((status_ & STA_FLL) || secs > kMaxSec)) {
    status_ |= STA_MODE;
    freq_adj = (offset_ns << (kScaleShift - kShiftFll)) / secs;
  }
  secs = std::min<int64_t>(secs, int64_t{1} << (kShiftPll + 1 + constant_));
  freq_adj += (offset_ns * secs) << (kScaleShift - 2 * (kShiftPll + 2 + constant_));
  freq_scaled_ = std::clamp<int64_t>(freq_adj + freq_scaled_, -kMaxFreqScaled, kMaxFreqScaled);
  offset_scaled_ = offset_ns << kScaleShift;
}

int64_t KernelPll::NextSecondChunk() {
  const int64_t chunk = ShiftRight(offset_scaled_, kShiftPll + static_cast<int>(constant_));
  offset_scaled_ -= chunk;
  return chunk;
}

long KernelPll::ReportedOffset() const {
  const int64_t ns = ShiftRight(offset_scaled_, kScaleShift);
  return static_cast<long>((status_ & STA_NANO) ? ns : ns / 1000);
}

}  // namespace chronolink
