// GPU clock -> host CLOCK_REALTIME, from snapshot readings, with a bound.
// The one module every backend's readings go through (chrony's hwclock.c,
// linuxptp's sysoff.c): of each sample's reads it keeps the tightest
// bracket, fits a piecewise-linear map over the kept pairs, and converts any
// device instant with an error bound built from the bracket widths, the fit
// residuals and a limit on how fast the rate may change between pairs.
// Memory is bounded (max_knots); older detail is thinned, and the bound
// says what thinning cost. A counter that steps or goes backwards starts a
// new segment: instants across a step are not convertible (ok = false),
// never silently wrong. I/O-free and deterministic; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "clock/kernel_clock_mapping.h"  // ConvertedStamp
#include "collector/clock/snapshot_reading.h"

namespace chronolink::collector {

struct DeviceClockMapOptions {
  // A reading whose bracket is wider than this is refused (the thread was
  // preempted, the read was slow).
  int64_t max_bracket_ns = 50'000;
  // How much d(host - device)/dt may change between two kept pairs (ppb);
  // bounds the interpolation error between knots. GPU oscillators wander by
  // well under 1 ppm over seconds; 1 ppm leaves room.
  int64_t max_rate_change_ppb = 1'000;
  // Largest |rate| (ppb) assumed while a segment has a single pair.
  int64_t max_rate_ppb = 500'000;
  // No conversion further than this outside a segment's first/last pair.
  int64_t max_extrapolation_ns = 10'000'000'000;
  // Knots kept per map (all segments); beyond it the map thins the oldest.
  size_t max_knots = 4096;
  // Added to every bound: the host clock's read granularity.
  int64_t read_granularity_ns = 1;
};

// What happened to one sample.
enum class SampleOutcome : uint8_t {
  kAccepted = 0,
  kRejectedWide = 1,      // every read's bracket was wider than max_bracket_ns
  kRejectedInvalid = 2,   // negative width or device time
  kNewSegment = 3,        // accepted, but disagrees with the segment: a step
  kRejectedBackwards = 4, // device time not after the newest kept pair
};

struct DeviceClockKnot {
  int64_t device_ns = 0;   // kGpuDevice
  int64_t host_ns = 0;     // kNodeRealtime: bracket midpoint
  int64_t error_ns = 0;    // |host_ns - true host time at device_ns| <= error_ns
  uint32_t segment = 0;
};

struct DeviceClockMapStats {
  uint64_t samples = 0;
  uint64_t accepted = 0;
  uint64_t rejected_wide = 0;
  uint64_t rejected_invalid = 0;
  uint64_t rejected_backwards = 0;
  uint64_t segments = 0;     // 1 + steps
  uint64_t thinned = 0;      // knots dropped to keep memory bounded
  int64_t last_bracket_ns = -1;
  int64_t max_fit_residual_ns = 0;  // largest |knot - interpolation| seen when thinning
};

class DeviceClockMap {
 public:
  explicit DeviceClockMap(const DeviceClockMapOptions& options = {});

  // The reads of one sampling instant; keeps the tightest valid one.
  SampleOutcome AddSample(std::span<const SnapshotReading> reads);

  // Device instant -> host REALTIME with bound. ok = false: before any pair,
  // across a step, or beyond max_extrapolation_ns.
  ConvertedStamp ToHost(int64_t device_ns) const;

  // Host REALTIME -> device instant (for placing host-side requests); same
  // rules. The bound is in host ns.
  ConvertedStamp ToDevice(int64_t host_ns) const;

  std::vector<DeviceClockKnot> Knots() const;  // for the clock plane
  const DeviceClockMapStats& stats() const;
  const DeviceClockMapOptions& options() const;

 private:
  // A kept pair plus what the bound needs about the gap before it.
  struct Knot {
    int64_t device_ns = 0;  // kGpuDevice
    int64_t host_ns = 0;    // kNodeRealtime: bracket midpoint
    int64_t error_ns = 0;   // |host_ns - true host time at device_ns| <= error_ns
    uint32_t segment = 0;
    // Sampling periods between the previous knot and this one (>= 1): the
    // rate may move by max_rate_change_ppb in each.
    int64_t periods = 1;
    // Sampling periods since the map's first sample (baselines use the
    // difference, which thinning does not change).
    int64_t period_index = 0;
    // -1: the gap before this knot is as sampled (curvature from the rate
    // limit). >= 0: knots in the gap were thinned; the most the truth may
    // lie off the chord of the two knots' errors (docs/collector-clock.md).
    int64_t interior_ns = -1;
  };
  struct Prediction {
    int64_t host_ns = 0;  // kNodeRealtime
    int64_t error_ns = 0;
    bool ok = false;
  };

  SampleOutcome PickReading(std::span<const SnapshotReading> reads, Knot* out);
  bool IsStep(const Knot& candidate) const;
  void Append(Knot knot, bool step);
  // From the segment's end knot `anchor` towards device_ns outside it
  // (no max_extrapolation_ns limit: step detection uses it too).
  Prediction Extrapolate(size_t anchor, int64_t device_ns) const;
  Prediction Interpolate(const Knot& lo, const Knot& hi, int64_t device_ns) const;
  int64_t CurvatureNs(const Knot& hi, int64_t span_ns, int64_t x_ns) const;
  int64_t InteriorMaxNs(const Knot& lo, const Knot& hi) const;
  int64_t PeriodNs(size_t index) const;
  size_t SegmentFirst(size_t index) const;
  size_t SegmentLast(size_t index) const;
  ConvertedStamp ToDeviceInSegment(size_t first, size_t last, int64_t host_ns) const;
  void Thin();
  bool ThinPass();
  // Drops `mid`; `next` (its kept neighbour after) absorbs what it said.
  void Absorb(const Knot& prev, const Knot& mid, Knot* next);

  DeviceClockMapOptions options_;
  DeviceClockMapStats stats_;
  std::vector<Knot> knots_;         // device_ns strictly increasing
  int64_t periods_since_kept_ = 0;  // AddSample calls since the newest knot
  int64_t period_counter_ = 0;      // AddSample calls so far
  uint32_t segment_ = 0;
};

}  // namespace chronolink::collector
