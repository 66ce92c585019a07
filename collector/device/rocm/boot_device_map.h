// HSA system time -> the GPU counter's time, from the amdkfd reads the
// ROCm backend takes anyway. HSA reports dispatch times "as ticks in the
// domain of the HSA system clock" (hsa_ext_amd.h), which ROCr derives from
// the same clock-counter ioctl: it pairs the GPU counter with the ioctl's
// system_clock_counter (CLOCK_BOOTTIME, docs/gpu-clocks.md) and interpolates
// between two such pairs. Each of our kfd reads gives such a pair too; this
// map interpolates back, so a dispatch time lands on the device clock the
// snapshot map (GPU -> host) already covers, and the export bounds it like
// any other device time.
//
// A pair's error: the GPU counter is latched after the ioctl begins and the
// BOOTTIME read follows the in-kernel MONOTONIC_RAW read, so the two lie
// within the ioctl's MONOTONIC_RAW bracket of each other. Between pairs the
// map is linear; a converted instant's error is the larger error of its two
// pairs plus rate_tolerance_ppm of its distance to the nearer one. Beyond
// the pairs it extrapolates up to max_extrapolation_ns with the same rate
// term, and refuses further.
//
// Pure; not thread-safe (the owner locks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

namespace chronolink::collector {

// `ticks` of a clock counting at `hz`, in ns (exact to the ns below);
// nullopt for 0 Hz or beyond int64. Both the kfd system counter and HSA's
// system clock state their rate this way.
std::optional<int64_t> TicksToNs(uint64_t ticks, uint64_t hz);

struct BootDevicePair {
  int64_t boot_ns = 0;    // CLOCK_BOOTTIME (the ioctl's system_clock_counter)
  int64_t device_ns = 0;  // the GPU counter, unwrapped and scaled (kGpuDevice)
  int64_t error_ns = 0;   // how far apart the two reads may be
};

struct BootDeviceMapOptions {
  size_t max_pairs = 4096;                       // oldest dropped beyond
  int64_t rate_tolerance_ppm = 100;              // device vs BOOTTIME rate knowledge between pairs
  int64_t max_extrapolation_ns = 1'000'000'000;  // beyond the first or last pair
};

class BootDeviceMap {
 public:
  explicit BootDeviceMap(const BootDeviceMapOptions& options = {}) : options_(options) {}

  // Keeps a pair whose boot and device times both follow the last one's
  // (false otherwise: a clock went back, or the pair repeats).
  bool Add(const BootDevicePair& pair);

  // False with *why when no pair exists or boot_ns lies too far outside.
  bool ToDevice(int64_t boot_ns, int64_t* device_ns, int64_t* error_ns, std::string* why) const;

  size_t size() const { return pairs_.size(); }

 private:
  BootDeviceMapOptions options_;
  std::deque<BootDevicePair> pairs_;  // increasing boot_ns and device_ns
};

}  // namespace chronolink::collector
