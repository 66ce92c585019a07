// The CUDA backend (NVIDIA GPUs): CUPTI activity records for kernels,
// copies and memsets (cupti_activity_session.h), timed by CUPTI on its host
// clock, and snapshots that calibrate that clock against the collector's
// host clock (host read, CUPTI clock read, host read).
//
// CUPTI stamps records on a host clock of its own: by default
// CLOCK_REALTIME on Linux, with GPU times converted by CUPTI's linear
// interpolation (cupti_activity.h, cuptiActivityRegisterTimestampCallback).
// With timestamp=raw (the default) the backend registers CLOCK_MONOTONIC_RAW
// as that clock before any kind is enabled, so NTP steps and slews never
// reach the records; the snapshot map carries it to the node's REALTIME
// with a bound. The bound covers CUPTI clock -> host; CUPTI's own GPU ->
// CPU interpolation is not measurable from outside (docs/gpu-clocks.md).
//
// libcupti and libcuda.so.1 are loaded with dlopen (CHRONOLINK_CUPTI_LIBRARY,
// CHRONOLINK_CUDA_DRIVER_LIBRARY override the paths): no driver or no
// library -> kNoLibrary, no device -> kNoDevice, each with one line.
//
// Settings (BackendOptions::settings, "key=value"):
//   timestamp    raw (CLOCK_MONOTONIC_RAW via the callback) | cupti (CUPTI's default)
//   buffers      CUPTI activity buffers at most (default 8)
//   buffer_kib   size of each (default 1024)
#pragma once

#include <memory>

#include "collector/device/gpu_backend.h"

namespace chronolink::collector {

std::unique_ptr<GpuBackend> CreateCudaBackend();

}  // namespace chronolink::collector
