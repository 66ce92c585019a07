// A simulated node's clocks as the agent sees them (docs/simulator.md
// "Clocks"): its oscillator (SimClock) is what CLOCK_MONOTONIC_RAW counts;
// its CLOCK_REALTIME is that oscillator disciplined by a daemon that drives
// the kernel's PLL (clock/kernel_pll.h, the model the test bed's discipline
// shim runs) with one noisy NTP offset per poll, as systemd-timesyncd and
// ntpd drive it; and the agent fits on its fit clock F (clock/fit_clock.h):
// RAW scaled by REALTIME's rate at the start and set to REALTIME there. The
// PLL changes REALTIME's rate every second; F follows the oscillator alone.
//
// The agent maps its kernel's REALTIME stamps to F through REALTIME/RAW
// samples taken where the rate changes, which is exact; the simulator reads
// F off the oscillator directly. Instants are int64 ns; only deviations
// (clock − true), differences, are doubles.
#pragma once

#include <cstdint>
#include <vector>

#include "clock/fit_clock.h"
#include "tools/sim/sim_clock.h"

namespace chronolink::sim {

enum class SimDiscipline {
  kNone,       // REALTIME is the oscillator: no daemon (the simulator before 2026-12-03)
  kKernelPll,  // a daemon driving the kernel PLL, as timesyncd does
};

struct DisciplineParams {
  SimDiscipline model = SimDiscipline::kKernelPll;
  // timesyncd's first poll interval (it grows to 2048 s as it settles); the
  // PLL's time constant is log2(poll s) − 4, as timesyncd sets it.
  int64_t poll_ns = 32'000'000'000;
  double measurement_noise_ns = 10'000;  // sigma of one NTP offset (a LAN exchange from userspace)
  // A daemon that has run for a while: REALTIME within the measurement noise
  // of true time, its frequency within this of the oscillator's (sigma).
  double settled_frequency_error_ppm = 0.05;
  FitClockMode fit_clock = FitClockMode::kRaw;  // what the agent fits on
};

// Which of a node's clocks: the one the agent's estimation reads (F, or
// REALTIME when it fits in REALTIME), or REALTIME.
enum class ClockView { kFit, kRealtime };

// The discipline over a run, for the header line.
struct DisciplineStats {
  int updates = 0;                            // NTP offsets the daemon gave the PLL
  double rate_min_ppm = 0, rate_max_ppm = 0;  // REALTIME's rate against RAW, less 1
  double max_abs_realtime_ns = 0;             // |REALTIME − true| at its worst second
};

class SimNodeClock {
 public:
  // The discipline runs over [begin_ns, end_ns] (true time), from `seed`.
  SimNodeClock(SimClock oscillator, const DisciplineParams& discipline, int64_t begin_ns, int64_t end_ns,
               uint64_t seed);

  // The clock the agent's estimation reads: what it reads at true instant t
  // (rounded to 1 ns), its deviation there, and the true instant of a reading.
  int64_t Read(int64_t true_ns) const { return Read(ClockView::kFit, true_ns); }
  double DeviationNs(int64_t true_ns) const { return DeviationNs(ClockView::kFit, true_ns); }
  int64_t TrueInstant(int64_t reading_ns) const { return TrueInstant(ClockView::kFit, reading_ns); }

  int64_t Read(ClockView view, int64_t true_ns) const;
  double DeviationNs(ClockView view, int64_t true_ns) const;
  int64_t TrueInstant(ClockView view, int64_t reading_ns) const;

  // REALTIME − F at the node's fit instant `fit_ns`: d, with which the
  // leader maps a solution in F back to REALTIME (docs/leader.md). 0 for a
  // node fitting in REALTIME, or one without a discipline.
  double RealtimeMinusFitNs(int64_t fit_ns) const;

  bool disciplined() const { return !correction_.empty(); }
  const SimClock& oscillator() const { return oscillator_; }
  const DisciplineStats& discipline_stats() const { return stats_; }

 private:
  double RealtimeDeviationNs(int64_t true_ns) const;
  double FitDeviationNs(int64_t true_ns) const;
  void RunKernelPll(const DisciplineParams& d, int64_t end_ns, uint64_t seed);

  SimClock oscillator_;
  FitClockMode fit_clock_;
  int64_t begin_ns_;
  UniformKnots correction_;  // REALTIME − the oscillator's reading, every second; empty: no discipline
  // F's anchor at begin_ns: REALTIME − true there, and REALTIME's rate.
  double anchor_deviation_ns_ = 0;
  double anchor_rate_ = 0;
  DisciplineStats stats_;
};

}  // namespace chronolink::sim
