// The ROCm backend (AMD GPUs): devices enumerated through HIP and matched
// to amdkfd topology nodes by PCI location; snapshots through the amdkfd
// clock-counter ioctl (rocm_device_clock.h); activity = the regions the
// application marks through region_timer() (HIP events, hip_region_timer.h).
// libhsakmt and libamdhip64 are loaded with dlopen (CHRONOLINK_HSAKMT_LIBRARY
// and CHRONOLINK_HIP_LIBRARY override the paths). docs/gpu-clocks.md has
// the clock facts and what a full ROCm tracer would add.
//
// Settings (BackendOptions::settings, "key=value"):
//   anchor_period_ms       fresh region anchor at most this often (default 50)
//   rate_tolerance_ppm     HIP event clock vs counter rate allowance (100)
//   event_clock_error_ns   allowance for ROCr's tick conversion (1000)
//   rate_check_ms          counter-rate measurement at Open (20; 0: trust HIP)
#pragma once

#include <memory>

#include "collector/device/gpu_backend.h"

namespace chronolink::collector {

std::unique_ptr<GpuBackend> CreateRocmBackend();

}  // namespace chronolink::collector
