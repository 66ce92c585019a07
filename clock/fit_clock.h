// The clock the agent fits offsets in (docs/clocks.md "The fit clock"): the
// node's CLOCK_MONOTONIC_RAW, which no clock daemon steers, scaled by
// REALTIME's rate at the agent's start and set to REALTIME there:
//
//   F = realtime0 + (raw − raw0)·(1 + rate0).
//
// A daemon's frequency changes, slews and steps stay out of every fit
// between nodes: F follows the oscillator alone (its wander). F leaves
// REALTIME slowly, by what the daemon corrects after the start (ms a day at
// 0.01-1 ppm), and every instant the agent hands out in REALTIME is mapped
// through the node's own REALTIME/RAW samples (FitTimebase). The leader
// maps solved offsets back to REALTIME with each node's FitPoint.
//
// Kernel and eBPF stamps are REALTIME; FitTimebase converts them through
// the samples around them (RealtimeRawMap). A stamp is read after it was
// taken, so a stamp newer than the newest sample makes FitClock take one
// there and then: every stamp lies between two samples. Extrapolating
// instead would err by the rate change since the newest sample × the time
// since it, and chronyd slews at up to 83 000 ppm (maxslewrate).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "clock/clock_reader.h"
#include "clock/fit_point.h"
#include "clock/realtime_raw_map.h"

namespace chronolink {

// F as a function of RAW: exact integer arithmetic, rounded to nearest.
struct FitAnchor {
  int64_t raw_ns = 0;       // MONOTONIC_RAW at the anchor
  int64_t realtime_ns = 0;  // REALTIME there: F's value at the anchor
  int64_t rate_fine = 0;    // REALTIME's rate against RAW there, less 1, in 1e-15: F's

  int64_t FitOfRaw(int64_t raw_ns) const;
  int64_t RawOfFit(int64_t fit_ns) const;
};

struct FitTimebaseStats {
  uint64_t samples = 0;
  uint64_t on_demand = 0;     // samples taken because a stamp was newer than the newest
  uint64_t extrapolated = 0;  // stamps newer (or older) than every sample: along the nearest one's rate
  uint64_t unmapped = 0;      // stamps at a REALTIME a step made ambiguous: along the newest sample before it
  uint64_t steps = 0;         // REALTIME steps between samples (the map's breaks)
};

// The samples and the anchor, safe to share between threads (the probe
// loop converts stamps, the leader's thread reads the clock).
class FitTimebase {
 public:
  // The first sample anchors F.
  explicit FitTimebase(const ClockPairSample& first, size_t capacity = 8192);

  void Add(const ClockPairSample& s);
  // Takes `s` because a stamp was newer than the newest sample.
  void AddOnDemand(const ClockPairSample& s);
  const FitAnchor& anchor() const { return anchor_; }
  int64_t newest_realtime_ns() const;

  int64_t FitOfRealtime(int64_t realtime_ns) const;
  int64_t RealtimeOfFit(int64_t fit_ns) const;
  FitPoint PointAt(int64_t fit_ns) const;
  FitTimebaseStats stats() const;

 private:
  // Along sample s's rate (else the chord to the one before it).
  int64_t RawAlong(const ClockPairSample& s, size_t index, int64_t realtime_ns) const;
  int64_t RealtimeAlong(const ClockPairSample& s, size_t index, int64_t raw_ns) const;
  int64_t RateAt(size_t index) const;  // REALTIME's rate against RAW at sample `index`, fine
  size_t NewestAtOrBeforeRaw(int64_t raw_ns) const;

  FitAnchor anchor_;
  mutable std::mutex mutex_;
  RealtimeRawMap map_;
  mutable FitTimebaseStats stats_;
};

// Which clock the agent fits in: its fit clock (the default), or REALTIME
// as it was before, kept to compare the two and for nodes whose REALTIME
// nothing disciplines.
enum class FitClockMode { kRaw, kRealtime };

// The node clock as the agent's estimation sees it: Now, the stamps it
// ingests and the deadlines it hands the kernel, all in F. Copies share
// the timebase.
class FitClock {
 public:
  explicit FitClock(NodeClock node = NodeClock(), FitClockMode mode = FitClockMode::kRaw,
                    int64_t sample_interval_ns = 1'000'000);

  int64_t Now() const;
  // A kernel CLOCK_REALTIME instant (a packet stamp), in F.
  int64_t Ingest(int64_t kernel_realtime_ns) const;
  // Back to the kernel's CLOCK_REALTIME, for deadlines handed to the kernel.
  int64_t ToReal(int64_t fit_ns) const;
  // The node's REALTIME at fit instant `fit_ns`, and its rate there.
  FitPoint PointAt(int64_t fit_ns) const;

  // Takes a sample of REALTIME and RAW unless the last one is younger than
  // the interval (judged by the caller's CLOCK_MONOTONIC read: a turn of the
  // loop within it costs a comparison); the sample, when it took one.
  std::optional<ClockPairSample> Poll(int64_t monotonic_ns);

  FitClockMode mode() const { return mode_; }
  // F's definition; nullopt when fitting in REALTIME.
  std::optional<FitAnchor> anchor() const;
  FitTimebaseStats stats() const;
  const NodeClock& node() const { return node_; }

 private:
  NodeClock node_;
  FitClockMode mode_;
  int64_t sample_interval_ns_;
  std::shared_ptr<FitTimebase> timebase_;
  int64_t last_sample_monotonic_ns_ = 0;
};

}  // namespace chronolink
