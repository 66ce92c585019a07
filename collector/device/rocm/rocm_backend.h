// The ROCm backend's factory (HIP enumeration, libhsakmt clock counters).
#pragma once

#include <memory>

#include "collector/device/gpu_backend.h"

namespace chronolink::collector {

std::unique_ptr<GpuBackend> CreateRocmBackend();

}  // namespace chronolink::collector
