// The simulated GPU backend: GpuBackend over N simulated devices
// (simulated_clock.h), configured by BackendOptions::settings (keys in
// simulated_settings.h; unknown key or bad value: kFailed with the reason).
// It is what the tests and the demo run where no GPU exists, and the null
// driver beside the ROCm and CUDA ones (linuxptp's nullf.c): same calls,
// same threading, known truth.
//
// Snapshots bracket a real read of the model's counter (real CLOCK_REALTIME
// in, raw counter out) between two reads of the collector's host clock,
// waiting inside the bracket as the model draws (latency, jitter, slow
// reads: a spin below 100 us, a sleep above). Activity: StartActivity runs a
// workload thread that launches kernels and copies every kernel_interval_us
// (simulated_workload.h); each finished operation gets its device times from
// the model's counter at its true instants through the device's
// DeviceCounter, keeps the true instants in sim_true_start_ns/end_ns and its
// launch stamps on the host clock given at Open. RegionTimer: Begin/End take
// the counter at the instants of the calls; `stream` is a small integer
// passed as the handle's value (nullptr: stream 0). A region's
// correlation_id is kRegionCorrelationBase + its id, apart from launches'.
//
// Threading as gpu_backend.h: one mutex per device guards its counter and
// its read draws (so snapshots, the workload and regions read the counter in
// true-time order); one guards the pending records. StopActivity's join is
// bounded: the thread waits at most one interval (<= 1 s) between ticks and
// at most 1 s for operations in flight when asked to stop; what is still
// running after that is counted as dropped.
#pragma once

#include <cstdint>
#include <memory>

#include "collector/device/gpu_backend.h"

namespace chronolink::collector {

inline constexpr uint64_t kRegionCorrelationBase = uint64_t{1} << 48;

std::unique_ptr<GpuBackend> CreateSimulatedBackend();

}  // namespace chronolink::collector
