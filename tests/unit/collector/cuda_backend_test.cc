// The CUDA backend where CI runs: the toolkit's CUPTI may be installed, the
// NVIDIA driver (libcuda.so.1) is not, and there is no GPU. Open must say
// which is missing in one line, with the right status, and every other call
// must be safe after it.
#include "collector/device/cuda/cuda_backend.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "tests/support/scoped_env.h"
#include "tests/unit/collector/backend_contract.h"

namespace chronolink::collector {
namespace {

using chronolink::testing::ScopedEnv;

bool HaveDriver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  return h != nullptr;  // left loaded: the process may use it later
}

BackendStatus OpenCuda(GpuBackend* backend, std::vector<GpuDeviceInfo>* devices, std::string* why,
                       std::vector<std::string> settings = {}) {
  BackendOptions options;
  options.settings = std::move(settings);
  return backend->Open(options, devices, why);
}

TEST(CudaBackend, WithoutTheDriverOpenSaysWhatIsMissing) {
  if (HaveDriver()) GTEST_SKIP() << "libcuda.so.1 loads here: cuda_gpu_test covers this machine";
  auto backend = CreateCudaBackend();
  EXPECT_EQ(backend->name(), "cuda");
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  EXPECT_EQ(OpenCuda(backend.get(), &devices, &why), BackendStatus::kNoLibrary);
  EXPECT_TRUE(devices.empty());
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  // CUPTI is looked for first; with it installed the driver is what is missing.
  EXPECT_TRUE(why.find("libcuda.so.1") != std::string::npos || why.find("libcupti") != std::string::npos)
      << why;
  EXPECT_NE(why.find("not found"), std::string::npos) << why;
}

TEST(CudaBackend, MissingCuptiIsNoLibraryNamingTheOverride) {
  ScopedEnv env("CHRONOLINK_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13");
  auto backend = CreateCudaBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  EXPECT_EQ(OpenCuda(backend.get(), &devices, &why), BackendStatus::kNoLibrary);
  EXPECT_NE(why.find("CUPTI"), std::string::npos) << why;
  EXPECT_NE(why.find("CHRONOLINK_CUPTI_LIBRARY=/nonexistent/libcupti.so.13"), std::string::npos) << why;
}

TEST(CudaBackend, MissingDriverIsNoLibraryNamingTheOverride) {
  ScopedEnv env("CHRONOLINK_CUDA_DRIVER_LIBRARY", "/nonexistent/libcuda.so.1");
  auto backend = CreateCudaBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  EXPECT_EQ(OpenCuda(backend.get(), &devices, &why), BackendStatus::kNoLibrary);
  EXPECT_TRUE(why.find("CHRONOLINK_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1") != std::string::npos ||
              why.find("libcupti") != std::string::npos)
      << why;
}

TEST(CudaBackend, ADriverLibraryWithoutTheCallsIsNoLibraryNamingTheSymbol) {
  ScopedEnv env("CHRONOLINK_CUDA_DRIVER_LIBRARY", "libm.so.6");
  auto backend = CreateCudaBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  EXPECT_EQ(OpenCuda(backend.get(), &devices, &why), BackendStatus::kNoLibrary);
  EXPECT_TRUE(why.find("lacks cuInit") != std::string::npos || why.find("libcupti") != std::string::npos)
      << why;
}

TEST(CudaBackend, UnknownOrBadSettingsFailBeforeAnythingLoads) {
  auto backend = CreateCudaBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  EXPECT_EQ(OpenCuda(backend.get(), &devices, &why, {"timestamp=tsc"}), BackendStatus::kFailed);
  EXPECT_NE(why.find("not one of raw, cupti"), std::string::npos) << why;
  EXPECT_EQ(OpenCuda(backend.get(), &devices, &why, {"buffers=0"}), BackendStatus::kFailed);
  EXPECT_NE(why.find("out of range"), std::string::npos) << why;
  EXPECT_EQ(OpenCuda(backend.get(), &devices, &why, {"bufers=3"}), BackendStatus::kFailed);
  EXPECT_NE(why.find("unknown cuda setting 'bufers'"), std::string::npos) << why;
}

TEST(CudaBackend, EveryCallIsSafeAfterAFailedOpen) {
  ScopedEnv env("CHRONOLINK_CUDA_DRIVER_LIBRARY", "/nonexistent/libcuda.so.1");
  auto backend = CreateCudaBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  ASSERT_NE(OpenCuda(backend.get(), &devices, &why), BackendStatus::kReady);

  ExpectInertAfterFailedOpen(backend.get());
  EXPECT_EQ(OpenCuda(backend.get(), &devices, &why), BackendStatus::kNoLibrary);
}

}  // namespace
}  // namespace chronolink::collector
