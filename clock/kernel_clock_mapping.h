// Conversion of kernel (eBPF) timestamps to the node clock. eBPF stamps with
// CLOCK_MONOTONIC (bpf_ktime_get_ns) and CLOCK_TAI (bpf_ktime_get_tai_ns);
// there is no REALTIME helper. The offset REALTIME - MONOTONIC (and
// REALTIME - TAI) is measured continuously from tightly bracketed reads and
// every conversion interpolates between two measurements and comes with an
// error bound. Never assumes TAI = UTC + 37 s. docs/clocks.md has the maths.
#pragma once

#include <time.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>

namespace chronolink {

// A timestamp converted to CLOCK_REALTIME: |realtime_ns - truth| <= error_ns
// when ok. !ok: no faithful conversion (no measurement yet, the stamp is
// older than the history, or a clock step falls between the stamp and the
// measurements around it).
struct ConvertedStamp {
  int64_t realtime_ns = 0;
  int64_t error_ns = 0;
  bool ok = false;
};

// One measurement of REALTIME - reference, taken at reference time ref_ns.
struct ClockOffsetSample {
  int64_t ref_ns = 0;      // reference clock (MONOTONIC, TAI, PHC) at the measurement
  int64_t offset_ns = 0;   // REALTIME - reference at ref_ns
  int64_t error_ns = 0;    // |offset_ns - true offset at ref_ns| <= error_ns
  int64_t bracket_ns = 0;  // width of the bracket it came from (logs)
  uint64_t segment = 0;    // bumped at every detected discontinuity (step)
};

struct ClockOffsetTrackOptions {
  size_t history = 64;  // samples kept
  // How much the rate d(REALTIME - reference)/dt may vary within one segment,
  // in ppb. It bounds the curvature between two samples and the error of
  // extrapolating. On Linux, REALTIME and MONOTONIC (and TAI) share every NTP
  // frequency and phase adjustment, so their difference only moves at steps;
  // 1 ppm leaves room for anything else.
  int64_t max_rate_change_ppb = 1'000;
  // Largest |rate| assumed when a segment has a single sample and no rate
  // estimate yet (ppb). 500 ppm is the kernel's limit for NTP slewing.
  int64_t max_slew_ppb = 500'000;
  // No extrapolation further than this beyond the newest sample.
  int64_t max_extrapolation_ns = 1'000'000'000;
};

// A history of (reference -> REALTIME) offset samples with step detection
// and interpolation. Used for MONOTONIC and TAI here, and for a PHC
// (phc_mapping.h). Not thread-safe.
class ClockOffsetTrack {
 public:
  explicit ClockOffsetTrack(const ClockOffsetTrackOptions& options = {}) : options_(options) {}

  // Appends a sample. Returns true when it disagrees with the current
  // segment by more than both error bounds allow (a step of REALTIME against
  // the reference, or the reference axis going backwards): the sample then
  // starts a new segment, and stamps between the two are not convertible.
  // A sample not newer than the newest one on the reference axis with the
  // same offset is ignored (returns false).
  bool Add(ClockOffsetSample sample);

  // reference time -> REALTIME, interpolating between the two samples around
  // ref_ns or extrapolating past the newest one.
  ConvertedStamp Convert(int64_t ref_ns) const;

  const std::deque<ClockOffsetSample>& samples() const { return samples_; }
  uint64_t steps() const { return steps_; }
  void Clear();

 private:
  // Offset and bound at ref_ns >= newest sample's ref_ns.
  bool Extrapolate(int64_t ref_ns, int64_t* offset_ns, int64_t* error_ns) const;

  ClockOffsetTrackOptions options_;
  std::deque<ClockOffsetSample> samples_;
  uint64_t segment_ = 0;
  uint64_t steps_ = 0;
};

// Reads one clock in ns; the default is clock_gettime. Tests inject
// synthetic clocks here.
using ClockReadFn = std::function<int64_t(clockid_t)>;

struct KernelClockMappingOptions {
  ClockOffsetTrackOptions track;
  int reads_per_sample = 5;  // bracketed reads per Sample(); the tightest is kept
  // A sample whose tightest bracket is wider than this is dropped: the thread
  // was preempted through every read.
  int64_t max_bracket_ns = 20'000;
  // Sample() does nothing when called again sooner than this (MONOTONIC ns).
  int64_t min_interval_ns = 0;
  // Resolution of one clock read; < 0: the largest clock_getres of
  // MONOTONIC, REALTIME and TAI.
  int64_t read_granularity_ns = -1;
};

class KernelClockMapping {
 public:
  KernelClockMapping();
  explicit KernelClockMapping(const KernelClockMappingOptions& options, ClockReadFn read = {});

  // Measures REALTIME - MONOTONIC and REALTIME - TAI now. The agent's loop
  // calls this every 10-50 ms with its MONOTONIC now, which only
  // rate-limits (min_interval_ns); the measurement reads the clocks itself.
  // Call it right before draining the BPF ring buffer: the drained stamps
  // then lie between two samples and are interpolated, not extrapolated.
  void Sample(int64_t now_mono_ns);

  ConvertedStamp MonotonicToRealtime(int64_t mono_ns) const { return mono_.Convert(mono_ns); }
  ConvertedStamp TaiToRealtime(int64_t tai_ns) const { return tai_.Convert(tai_ns); }

  // Width of the tightest mono -> real -> mono bracket of the last Sample()
  // (-1 before any); the same for tai -> real -> tai.
  int64_t last_bracket_ns() const { return last_bracket_ns_; }
  int64_t last_tai_bracket_ns() const { return last_tai_bracket_ns_; }
  int64_t read_granularity_ns() const { return granularity_ns_; }

  uint64_t samples_taken() const { return samples_taken_; }
  // Samples dropped for a bracket wider than max_bracket_ns (either clock).
  uint64_t samples_rejected() const { return samples_rejected_; }
  // Discontinuities seen: REALTIME stepped against MONOTONIC, or REALTIME
  // against TAI (the kernel's TAI offset changed).
  uint64_t monotonic_steps() const { return mono_.steps(); }
  uint64_t tai_steps() const { return tai_.steps(); }

  const ClockOffsetTrack& monotonic_track() const { return mono_; }
  const ClockOffsetTrack& tai_track() const { return tai_; }

 private:
  // Tightest of reads_per_sample ref -> REALTIME -> ref brackets. False when
  // every bracket was invalid (negative width).
  bool Bracket(clockid_t ref, ClockOffsetSample* out);

  KernelClockMappingOptions options_;
  ClockReadFn read_;
  int64_t granularity_ns_ = 1;
  ClockOffsetTrack mono_;
  ClockOffsetTrack tai_;
  int64_t last_bracket_ns_ = -1;
  int64_t last_tai_bracket_ns_ = -1;
  bool sampled_ = false;
  int64_t last_sample_call_ns_ = 0;
  uint64_t samples_taken_ = 0;
  uint64_t samples_rejected_ = 0;
};

}  // namespace chronolink
