// One AMD GPU's counter as the ROCm backend reads it: the amdkfd
// clock-counter ioctl (hsaKmtGetClockCounters) bracketed by host reads
// (kfd_clock_read.h), each raw value unwrapped and scaled by one
// DeviceCounter. Both the sampler (ReadSnapshot) and the region timer's
// anchors (ReadDeviceNs) read through here; a mutex keeps the ioctl and the
// unwrap of one read together, so reads reach the DeviceCounter in order.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "clock/clock_reader.h"
#include "collector/clock/device_counter.h"
#include "collector/clock/snapshot_reading.h"
#include "collector/device/rocm/boot_device_map.h"
#include "collector/device/rocm/hsakmt_api.h"

namespace chronolink::collector {

// The counter's width: RLC_GPU_CLOCK_COUNT and the SMU/PWR golden TSC the
// kernel reads are 64-bit (gfx_v9_0.c and later); a narrower one would show
// as a backwards step and start a new map segment, never a wrong time.
constexpr int kKfdCounterBits = 64;

// The nominal rate to use: HIP's clockInstructionRate (ROCclr takes it from
// the ROCr wall-clock frequency, which amdgpu reports as gpu_counter_freq)
// when it agrees with the rate measured at Open within max_disagreement_ppm;
// otherwise the measured rate rounded to 1 kHz. *note says which, for the
// device's clock description.
uint64_t ChooseCounterRate(uint64_t hip_nominal_hz, uint64_t measured_hz, int64_t max_disagreement_ppm,
                           std::string* note);

class RocmDeviceClock {
 public:
  RocmDeviceClock(const HsakmtApi& api, uint32_t node_id, uint64_t counter_hz);

  // Host before, GPU counter, host after; false with *why on an ioctl
  // failure, an invalid counter (0 or all ones), host or MONOTONIC_RAW
  // reads out of order, or the counter going backwards.
  bool ReadSnapshot(const NodeClock& host, SnapshotReading* out, std::string* why);

  // The counter now (kGpuDevice ns), without a host bracket.
  bool ReadDeviceNs(int64_t* device_ns, std::string* why);

  // A CLOCK_BOOTTIME instant (HSA's system clock) on this counter, from the
  // GPU counter / BOOTTIME pairs of the reads above (boot_device_map.h).
  bool BootToDevice(int64_t boot_ns, int64_t* device_ns, int64_t* error_ns, std::string* why);

  uint32_t node_id() const { return node_id_; }
  uint64_t counter_hz() const { return counter_hz_; }
  // Reads whose upper bound the in-kernel MONOTONIC_RAW value tightened.
  uint64_t tightened_reads() const { return tightened_.load(std::memory_order_relaxed); }

 private:
  // The ioctl's status and counter; false with *why when unusable.
  bool CheckRead(HSAKMT_STATUS s, const HsaClockCounters& c, std::string* why) const;

  const HsakmtApi& api_;
  uint32_t node_id_;
  uint64_t counter_hz_;
  std::mutex mu_;
  // Keeps the ioctl's (GPU counter, BOOTTIME) pair; `error_ns` is the
  // ioctl's MONOTONIC_RAW bracket. Called with mu_ held.
  void KeepBootPair(const HsaClockCounters& c, int64_t device_ns, int64_t error_ns);

  DeviceCounter counter_;  // guarded by mu_
  BootDeviceMap boot_map_;  // guarded by mu_
  std::atomic<uint64_t> tightened_{0};
};

// The GPU counter's rate against the in-kernel MONOTONIC_RAW, from two
// reads `gap_ns` apart (the caller sleeps; bounded by gap_ns). False with
// *why when a read fails or the counter does not advance.
bool MeasureKfdCounterRate(const HsakmtApi& api, uint32_t node_id, int64_t gap_ns, uint64_t* hz,
                           std::string* why);

}  // namespace chronolink::collector
