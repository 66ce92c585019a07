// What a GPU did, as a backend reports it: one record per kernel, copy or
// marker, timed on the device's own clock (ClockDomain::kGpuDevice: the
// counter unwrapped and scaled to ns at its nominal rate). Converting to the
// host clock is the device clock map's job (collector/clock/), never the
// backend's, so every backend's times get the same bound.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace chronolink::collector {

enum class ActivityKind : uint8_t {
  kKernel = 0,
  kMemcpyHtoD = 1,
  kMemcpyDtoH = 2,
  kMemcpyDtoD = 3,
  kMemset = 4,
  kMarker = 5,  // a region the application timed through the library's helpers
};
std::string_view ActivityKindName(ActivityKind k);  // "kernel", "memcpy_htod", ...

struct GpuActivity {
  ActivityKind kind = ActivityKind::kKernel;
  uint32_t device = 0;          // ordinal, as in GpuDeviceInfo
  uint32_t stream = 0;          // the device queue / stream it ran on
  uint64_t correlation_id = 0;  // ties the device record to its host launch (0: none)
  int64_t start_device_ns = 0;  // kGpuDevice
  int64_t end_device_ns = 0;    // kGpuDevice, >= start
  // How far start/end may be from the true instants on the device clock
  // itself, before any GPU -> host conversion (ns); the export adds it to
  // the map's bound. 0 where the times are the device's own stamps; ROCm
  // HIP-event regions carry their anchoring bound here (docs/gpu-clocks.md).
  int64_t device_error_ns = 0;
  std::string name;             // kernel name, or the marker's
  std::string details;          // kernel details ("grid:... block:..."), "" when unknown
  uint64_t bytes = 0;           // copies and memsets

  // The host-side launch (a `/host:CPU` event), when the backend saw it:
  // CLOCK_REALTIME of the node (ClockDomain::kNodeRealtime); 0 when unknown.
  int64_t launch_host_start_ns = 0;
  int64_t launch_host_end_ns = 0;
  uint32_t launch_thread = 0;

  // Simulated device only: the true instants (real CLOCK_REALTIME), which
  // the tests compare the exported times against. 0 for real devices.
  int64_t sim_true_start_ns = 0;
  int64_t sim_true_end_ns = 0;
};

}  // namespace chronolink::collector
