// The simulated GPU backend: GpuBackend over N simulated devices
// (simulated_clock.h), configured by BackendOptions::settings "key=value"
// (unknown key or bad value: kFailed with the reason; ranges and defaults in
// simulated_settings.cc, SimulatedSettingsHelp()):
//   devices=2  seed=1  kernel_interval_us=1000  kernel_us=50  streams=2
//   per device, as key=v for all or key.<ordinal>=v for one:
//   rate_hz (default 100 MHz, 25 MHz, 1 GHz, 27 MHz by ordinal),
//   rate_error_ppm, drift_ppm_per_s, wander_period_s (seeded per device),
//   bits=48, wrap_in_s, jitter_ns=500, latency_ns=300, slow_read_prob=0.01,
//   slow_read_ns=200000, backwards_at_s (0: never), backwards_by_us=1000.
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
