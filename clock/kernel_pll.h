// The kernel's NTP phase-locked loop (Linux kernel/time/ntp.c) as the test
// bed's discipline shim emulates it for daemons that drive it with
// ADJ_OFFSET (ntpd, systemd-timesyncd), and as chronolink-sim's disciplined
// clocks run it: the same state, units and update rules, so that such a
// daemon sees the clock respond as a kernel's would.
//
//   - ntp_update_offset(): with STA_PLL on, an offset (ns with STA_NANO,
//     else us, clamped to +/-0.5 s) replaces the phase still to be slewed
//     (time_offset) and moves the frequency by offset·secs / 2^(2·(SHIFT_PLL
//     + 2 + time_constant)) ns/s (secs since the last update, capped at
//     2^(SHIFT_PLL + 1 + time_constant)); past MINSEC with STA_FLL, or past
//     MAXSEC, also by the FLL term offset / 2^SHIFT_FLL / secs;
//   - second_overflow(): at every second of the clock, the phase chunk
//     time_offset >> (SHIFT_PLL + time_constant) is added to that second's
//     length and taken from time_offset;
//   - the second's length is tick·USER_HZ·1000 ns + time_freq + the chunk
//     (ntp_update_frequency; the clocksource's own rate is the oscillator's).
// Fixed point as the kernel keeps it: ns/s << NTP_SCALE_SHIFT (32), per
// second rather than per tick (the kernel divides time_offset by HZ and adds
// the chunk to each of HZ ticks: the same sum, but for rounding below a
// nanosecond). Leap seconds, PPS and the adjtime() slew are not modelled.
#pragma once

#include <cstdint>

namespace chronolink {

class KernelPll {
 public:
  static constexpr int kShiftPll = 2;
  static constexpr int kShiftFll = 2;
  static constexpr int kScaleShift = 32;
  static constexpr int kMaxTimeConstant = 10;
  static constexpr int64_t kMaxPhaseNs = 500'000'000;
  static constexpr int64_t kMinSec = 256;
  static constexpr int64_t kMaxSec = 2048;
  static constexpr int64_t kMaxFreqScaled = 500'000LL << kScaleShift;  // 500 ppm in ns/s << 32

  // ADJ_STATUS: the kernel's process_adj_status (turning STA_PLL on resets
  // the reference second; off clears the status to STA_UNSYNC).
  void SetStatus(int status, int64_t now_s);
  // ADJ_NANO / ADJ_MICRO: STA_NANO, which ADJ_STATUS cannot change.
  void SetNano(bool nano) { status_ = nano ? (status_ | 0x2000) : (status_ & ~0x2000); }
  // ADJ_FREQUENCY: scaled ppm (2^-16 ppm), clamped to +/-500 ppm.
  void SetFrequency(long freq_ppm16);
  // ADJ_TIMECONST: +4 without STA_NANO, clamped to 0..10.
  void SetTimeConstant(long constant);
  // ADJ_OFFSET at second `now_s` of the clock.
  void UpdateOffset(long offset, int64_t now_s);
  // second_overflow: the chunk of phase this second adds (ns/s << 32).
  int64_t NextSecondChunk();
  // ntp_clear()'s part: no phase left to slew (a step).
  void ClearPhase() { offset_scaled_ = 0; }

  int status() const { return status_; }
  int64_t frequency_scaled() const { return freq_scaled_; }
  long frequency_ppm16() const;
  // The offset still to be slewed, as adjtimex reports it (ns or us).
  long ReportedOffset() const;
  long time_constant() const { return constant_; }
  int64_t offset_scaled() const { return offset_scaled_; }

 private:
  int status_ = 0x0040;  // STA_UNSYNC
  int64_t freq_scaled_ = 0;
  int64_t offset_scaled_ = 0;  // time_offset: ns << 32 still to slew
  long constant_ = 2;
  int64_t reftime_s_ = 0;
};

}  // namespace chronolink
