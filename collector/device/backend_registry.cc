// The backend table: rocm and cuda in the order "auto" tries them, then the
// simulated GPU (which "auto" never picks: it is for tests and the demo).
// A vendor backend is compiled when CMake found its headers
// (CHRONOLINK_HAVE_ROCM / CHRONOLINK_HAVE_CUDA); otherwise its entry stays,
// with compiled_in = false and a factory for the not-compiled stand-in.
#include "collector/device/backend_registry.h"

#include <array>

#include "collector/device/not_compiled_backend.h"
#include "collector/device/simulated/simulated_backend.h"

#ifdef CHRONOLINK_HAVE_ROCM
#include "collector/device/rocm/rocm_backend.h"
#endif
#ifdef CHRONOLINK_HAVE_CUDA
#include "collector/device/cuda/cuda_backend.h"
#endif

namespace chronolink::collector {
namespace {

#ifdef CHRONOLINK_HAVE_ROCM
constexpr bool kRocmCompiledIn = true;
std::unique_ptr<GpuBackend> CreateRocm() { return CreateRocmBackend(); }
#else
constexpr bool kRocmCompiledIn = false;
std::unique_ptr<GpuBackend> CreateRocm() {
  return CreateNotCompiledBackend(
      "rocm", "hsakmt.h and hip/hip_runtime_api.h (apt-get install libhsakmt-dev libamdhip64-dev)");
}
#endif

#ifdef CHRONOLINK_HAVE_CUDA
constexpr bool kCudaCompiledIn = true;
std::unique_ptr<GpuBackend> CreateCuda() { return CreateCudaBackend(); }
#else
constexpr bool kCudaCompiledIn = false;
std::unique_ptr<GpuBackend> CreateCuda() {
  return CreateNotCompiledBackend("cuda",
                                  "cupti.h and cuda.h (the CUDA toolkit with CUPTI under /usr/local/cuda)");
}
#endif

std::unique_ptr<GpuBackend> CreateSimulated() { return CreateSimulatedBackend(); }

constexpr std::array<BackendEntry, 3> kBackends = {{
    {"rocm", "AMD GPUs through HIP and libhsakmt (dlopen at run time)", kRocmCompiledIn, &CreateRocm},
    {"cuda", "NVIDIA GPUs through CUPTI (dlopen at run time)", kCudaCompiledIn, &CreateCuda},
    {"simulated", "simulated GPUs with a drifting, wrapping counter (tests, demo; never 'auto')", true,
     &CreateSimulated},
}};

}  // namespace

std::span<const BackendEntry> Backends() { return kBackends; }

const BackendEntry* FindBackend(std::string_view name) {
  for (const BackendEntry& entry : kBackends) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

}  // namespace chronolink::collector
