// The CUDA backend's factory (CUPTI activity records and timestamps).
#pragma once

#include <memory>

#include "collector/device/gpu_backend.h"

namespace chronolink::collector {

std::unique_ptr<GpuBackend> CreateCudaBackend();

}  // namespace chronolink::collector
