// The stand-in for a backend this build left out (chrony's null refclock
// entry): it keeps the backend's name, and Open() says kNotCompiledIn with
// one line naming what the build was missing. Every other call is a safe
// no-op, so callers need no special case.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "collector/device/gpu_backend.h"

namespace chronolink::collector {

// `name`: "rocm", "cuda"; `missing`: what to install and rebuild with
// ("hsakmt.h and hip/hip_runtime_api.h: apt-get install libhsakmt-dev
// libamdhip64-dev"). Both must outlive the backend (string literals).
std::unique_ptr<GpuBackend> CreateNotCompiledBackend(std::string_view name, std::string_view missing);

}  // namespace chronolink::collector
