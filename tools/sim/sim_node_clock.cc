#include "tools/sim/sim_node_clock.h"

#include <sys/timex.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "clock/kernel_pll.h"
#include "tools/sim/sim_random.h"

namespace chronolink::sim {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;

}  // namespace

SimNodeClock::SimNodeClock(SimClock oscillator, const DisciplineParams& discipline, int64_t begin_ns, int64_t end_ns,
                           uint64_t seed)
    : oscillator_(std::move(oscillator)),
      fit_clock_(discipline.fit_clock),
      begin_ns_(begin_ns),
      correction_(begin_ns, kSecondNs) {
  if (discipline.model == SimDiscipline::kKernelPll) RunKernelPll(discipline, end_ns, seed);
}

// timesyncd's servo on the kernel PLL (tools/testbed/timesync_client.py
// keeps the same calls): at each poll one offset measurement, told the PLL
// with ADJ_OFFSET | ADJ_TIMECONST (STA_PLL, STA_NANO); every second the
// PLL sets REALTIME's rate for the next (second_overflow).
void SimNodeClock::RunKernelPll(const DisciplineParams& d, int64_t end_ns, uint64_t seed) {
  SimRandom rng(seed);
  const int64_t poll_s = std::max<int64_t>(1, d.poll_ns / kSecondNs);
  KernelPll pll;
  pll.SetNano(true);
  pll.SetStatus(STA_PLL, 0);
  pll.SetTimeConstant(std::bit_width(static_cast<uint64_t>(poll_s)) - 1 - 4);
  const double frequency_ppm = -oscillator_.params().drift * 1e6 + d.settled_frequency_error_ppm * rng.Normal();
  pll.SetFrequency(std::lround(frequency_ppm * 65536.0));
  const auto phase = static_cast<int64_t>(rng.Uniform(0, static_cast<double>(poll_s)));

  const int64_t seconds = (end_ns - begin_ns_) / kSecondNs + 2;
  correction_.Reserve(static_cast<size_t>(seconds) + 1);
  double c = -oscillator_.DeviationNs(begin_ns_) + d.measurement_noise_ns * rng.Normal();
  correction_.Add(c);
  stats_.rate_min_ppm = 1e9;
  stats_.rate_max_ppm = -1e9;
  for (int64_t k = 0; k < seconds; ++k) {
    const int64_t t = begin_ns_ + k * kSecondNs;
    const double realtime_deviation = oscillator_.DeviationNs(t) + c;
    stats_.max_abs_realtime_ns = std::max(stats_.max_abs_realtime_ns, std::fabs(realtime_deviation));
    if ((k + phase) % poll_s == 0) {
      const double measured = realtime_deviation + d.measurement_noise_ns * rng.Normal();
      pll.UpdateOffset(std::lround(-measured), k);  // the offset to correct: minus the clock's error
      ++stats_.updates;
    }
    // The second's length in ns/s << 32: the frequency and this second's
    // share of the phase; REALTIME advances by that much more than RAW.
    const double rate = static_cast<double>(pll.frequency_scaled() + pll.NextSecondChunk()) / 4294967296.0 / 1e9;
    if (k == 0) {
      anchor_rate_ = rate;
      anchor_deviation_ns_ = realtime_deviation;
    }
    stats_.rate_min_ppm = std::min(stats_.rate_min_ppm, rate * 1e6);
    stats_.rate_max_ppm = std::max(stats_.rate_max_ppm, rate * 1e6);
    const double raw_elapsed = kSecondNs + oscillator_.DeviationNs(t + kSecondNs) - oscillator_.DeviationNs(t);
    c += rate * raw_elapsed;
    correction_.Add(c);
  }
}

double SimNodeClock::RealtimeDeviationNs(int64_t true_ns) const {
  return oscillator_.DeviationNs(true_ns) + (disciplined() ? correction_.At(true_ns) : 0.0);
}

// F = REALTIME(t0) + (RAW − RAW(t0))·(1 + rate0), less t: in differences.
double SimNodeClock::FitDeviationNs(int64_t true_ns) const {
  const double raw_wander = oscillator_.DeviationNs(true_ns) - oscillator_.DeviationNs(begin_ns_);
  const double raw_elapsed = static_cast<double>(true_ns - begin_ns_) + raw_wander;
  return anchor_deviation_ns_ + raw_wander + anchor_rate_ * raw_elapsed;
}

double SimNodeClock::DeviationNs(ClockView view, int64_t true_ns) const {
  if (!disciplined()) return oscillator_.DeviationNs(true_ns);
  if (view == ClockView::kRealtime || fit_clock_ == FitClockMode::kRealtime) return RealtimeDeviationNs(true_ns);
  return FitDeviationNs(true_ns);
}

int64_t SimNodeClock::Read(ClockView view, int64_t true_ns) const {
  return true_ns + std::llround(DeviationNs(view, true_ns));
}

int64_t SimNodeClock::TrueInstant(ClockView view, int64_t reading_ns) const {
  if (!disciplined()) return oscillator_.TrueInstant(reading_ns);  // the simulator before disciplined clocks, exactly
  const auto deviation = [&](int64_t t) { return DeviationNs(view, t); };
  return TrueInstantOf(reading_ns, reading_ns - std::llround(deviation(reading_ns)), deviation);
}

double SimNodeClock::RealtimeMinusFitNs(int64_t fit_ns) const {
  if (!disciplined() || fit_clock_ == FitClockMode::kRealtime) return 0.0;
  const int64_t t = TrueInstant(ClockView::kFit, fit_ns);
  return RealtimeDeviationNs(t) - FitDeviationNs(t);
}

}  // namespace chronolink::sim
