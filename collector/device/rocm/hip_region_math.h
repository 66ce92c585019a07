// Placing a HIP event on the GPU counter's time line, with a bound. Pure
// maths, tested without a GPU.
//
// HIP gives no absolute event time, only hipEventElapsedTime between two
// events, in float milliseconds. So the region timer records an anchor
// event on an idle stream of its own between two reads of the GPU counter
// (ioctl before the record, ioctl after hipEventQuery saw it complete): the
// anchor happened inside that bracket. An event's device time is then
//   anchor midpoint + elapsed(anchor, event)
// and its bound adds up
//   - the anchor's half bracket,
//   - one float ulp of the elapsed milliseconds (24-bit mantissa: 1 ulp is
//     ~60 ns at 1 s, ~8 us at 100 s; so anchors are kept close),
//   - the rate difference between HIP's event clock and the counter at its
//     nominal rate times the elapsed time (ROCr converts event ticks to its
//     CLOCK_BOOTTIME system domain by its own interpolation),
//   - a fixed allowance for that conversion's own error (ROCr's comments
//     put its pair uncertainty near 0.5 us).
#pragma once

#include <cstdint>
#include <span>

namespace chronolink::collector {

struct RegionAnchor {
  uint64_t seq = 0;            // increasing, in the order anchors were taken
  int64_t device_ns = 0;       // kGpuDevice: bracket midpoint
  int64_t half_width_ns = 0;   // |true anchor time - device_ns| <= half_width_ns
  int64_t bracket_end_ns = 0;  // kGpuDevice: the counter read after the anchor completed
};

struct EventTimingModel {
  int64_t rate_tolerance_ppm = 100;     // HIP event clock vs counter at nominal rate
  int64_t event_clock_error_ns = 1000;  // ROCr's tick -> system-domain conversion
};

struct PlacedInstant {
  int64_t device_ns = 0;  // kGpuDevice
  int64_t error_ns = 0;
};

// One float ulp of `ms`, in ns, rounded up (>= 1).
int64_t FloatMsUlpNs(float ms);

// anchor + elapsed_ms; false when elapsed_ms is not finite or the result
// overflows.
bool PlaceEvent(const RegionAnchor& anchor, float elapsed_ms, const EventTimingModel& model,
                PlacedInstant* out);

// The anchor to measure an event from: the newest one that certainly
// precedes the event (bracket_end_ns <= event_floor_ns), so the elapsed
// time is >= 0 and short. nullptr when none does. `anchors` in seq order.
const RegionAnchor* AnchorBefore(std::span<const RegionAnchor> anchors, int64_t event_floor_ns);

// Why a placed region is not believable, or nullptr: the begin event placed
// before the counter read taken before it was recorded, the end event after
// the counter read taken after it was seen complete, or end before begin,
// each beyond the bounds. floor_ns/ceiling_ns: INT64_MIN/INT64_MAX when
// not known.
const char* RegionImplausible(const PlacedInstant& begin, const PlacedInstant& end, int64_t floor_ns,
                              int64_t ceiling_ns);

}  // namespace chronolink::collector
