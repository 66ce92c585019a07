// One amdkfd clock-counter read turned into a host bracket: pure maths, no
// I/O, so it is tested without a GPU.
//
// AMDKFD_IOC_GET_CLOCK_COUNTERS (kfd_chardev.c, every kernel since 3.19)
// reads the GPU counter first, then CLOCK_MONOTONIC_RAW into
// cpu_clock_counter, then CLOCK_BOOTTIME into system_clock_counter
// (docs/gpu-clocks.md has the source lines). So the GPU counter was latched
// after the ioctl began and before the in-kernel MONOTONIC_RAW read. The
// backend reads the host clock before the ioctl and, after it, a
// MONOTONIC_RAW / host / MONOTONIC_RAW triplet that maps that in-kernel read
// onto the host clock; the bracket's upper end is then the earlier of the
// host read after the ioctl and that mapped instant (plus its error). This
// trims the ioctl's return path off the bracket. When the in-kernel value
// is not within the MONOTONIC_RAW reads around the ioctl (a kernel with
// other semantics), the plain host bracket is kept: wider, still correct.
#pragma once

#include <cstdint>
#include <string>

namespace chronolink::collector {

struct KfdClockRead {
  int64_t host_before_ns = 0;  // ClockDomain::kNodeRealtime, before the ioctl
  int64_t raw_before_ns = 0;   // kMonotonicRaw, after host_before, before the ioctl
  uint64_t gpu_counter = 0;    // raw GPU counter from the ioctl (ticks)
  int64_t kernel_raw_ns = 0;   // kMonotonicRaw: the ioctl's cpu_clock_counter
  int64_t raw_after_ns = 0;    // kMonotonicRaw, first read after the ioctl
  int64_t host_after_ns = 0;   // kNodeRealtime, after raw_after
  int64_t raw_after2_ns = 0;   // kMonotonicRaw, after host_after
};

struct KfdBracket {
  int64_t host_before_ns = 0;  // kNodeRealtime
  int64_t host_after_ns = 0;   // kNodeRealtime, <= KfdClockRead::host_after_ns
  bool tightened = false;      // the in-kernel MONOTONIC_RAW read bounded the upper end
};

// Largest rate difference assumed between the host clock and
// MONOTONIC_RAW over the microseconds between the in-kernel read and the
// triplet: NTP's 500 ppm slew plus a test-mode virtual skew.
constexpr int64_t kHostVsRawMaxPpm = 1000;

// The GPU counter 0 means "node without GPU resource" (or the device is
// being reset); all ones is what a failed register read returns.
bool KfdGpuCounterValid(uint64_t counter);

// False with *why when the reads are out of order (a host clock step in
// between, or a broken read): the caller drops the reading.
bool BracketFromKfdRead(const KfdClockRead& read, KfdBracket* out, std::string* why);

}  // namespace chronolink::collector
