// The ROCm backend where CI runs: no AMD GPU (no /dev/kfd), libhsakmt and
// libamdhip64 either installed (Debian's ROCm 5.2 packages) or not. Open
// must say which is missing in one line, with the right status, and every
// other call must be safe after it.
#include "collector/device/rocm/rocm_backend.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/support/scoped_env.h"
#include "tests/unit/collector/backend_contract.h"

namespace chronolink::collector {
namespace {

using chronolink::testing::ScopedEnv;

bool HaveKfd() { return access("/dev/kfd", F_OK) == 0; }

BackendStatus OpenRocm(GpuBackend* backend, std::vector<GpuDeviceInfo>* devices, std::string* why,
                       std::vector<std::string> settings = {}) {
  BackendOptions options;
  options.settings = std::move(settings);
  return backend->Open(options, devices, why);
}

TEST(RocmBackend, WithoutAnAmdGpuOpenSaysWhatIsMissing) {
  if (HaveKfd())
    GTEST_SKIP() << "/dev/kfd exists: this machine may have an AMD GPU (rocm_gpu_test runs there)";
  auto backend = CreateRocmBackend();
  EXPECT_EQ(backend->name(), "rocm");
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  const BackendStatus s = OpenRocm(backend.get(), &devices, &why);
  EXPECT_TRUE(devices.empty());
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  if (s == BackendStatus::kNoLibrary) {
    EXPECT_NE(why.find("not found"), std::string::npos) << why;
  } else {
    EXPECT_EQ(s, BackendStatus::kNoDevice) << why;
    EXPECT_NE(why.find("/dev/kfd"), std::string::npos) << why;
    EXPECT_NE(why.find("hsaKmtOpenKFD"), std::string::npos) << why;
  }
}

TEST(RocmBackend, MissingThunkLibraryIsNoLibraryNamingTheOverride) {
  ScopedEnv env("CHRONOLINK_HSAKMT_LIBRARY", "/nonexistent/libhsakmt.so.1");
  auto backend = CreateRocmBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  EXPECT_EQ(OpenRocm(backend.get(), &devices, &why), BackendStatus::kNoLibrary);
  EXPECT_NE(why.find("libhsakmt"), std::string::npos) << why;
  EXPECT_NE(why.find("CHRONOLINK_HSAKMT_LIBRARY=/nonexistent/libhsakmt.so.1"), std::string::npos) << why;
}

TEST(RocmBackend, MissingHipLibraryIsNoLibraryNamingTheOverride) {
  ScopedEnv env("CHRONOLINK_HIP_LIBRARY", "/nonexistent/libamdhip64.so.5");
  auto backend = CreateRocmBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  EXPECT_EQ(OpenRocm(backend.get(), &devices, &why), BackendStatus::kNoLibrary);
  // The thunk may be missing too on this machine; then that is named first.
  EXPECT_TRUE(why.find("CHRONOLINK_HIP_LIBRARY") != std::string::npos ||
              why.find("libhsakmt") != std::string::npos)
      << why;
}

TEST(RocmBackend, ALibraryWithoutTheCallsIsNoLibraryNamingTheSymbol) {
  ScopedEnv env("CHRONOLINK_HSAKMT_LIBRARY", "libm.so.6");
  auto backend = CreateRocmBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  EXPECT_EQ(OpenRocm(backend.get(), &devices, &why), BackendStatus::kNoLibrary);
  EXPECT_NE(why.find("lacks hsaKmtOpenKFD"), std::string::npos) << why;
}

TEST(RocmBackend, UnknownOrBadSettingsFailBeforeAnythingLoads) {
  auto backend = CreateRocmBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  EXPECT_EQ(OpenRocm(backend.get(), &devices, &why, {"anchor_periode_ms=5"}), BackendStatus::kFailed);
  EXPECT_NE(why.find("anchor_periode_ms"), std::string::npos) << why;
  EXPECT_NE(why.find("anchor_period_ms"), std::string::npos) << why;  // the known keys are listed
  EXPECT_EQ(OpenRocm(backend.get(), &devices, &why, {"rate_tolerance_ppm=-3"}), BackendStatus::kFailed);
  EXPECT_NE(why.find("out of range"), std::string::npos) << why;
  EXPECT_EQ(OpenRocm(backend.get(), &devices, &why, {"anchor_period_ms=ten"}), BackendStatus::kFailed);
  EXPECT_NE(why.find("not an integer"), std::string::npos) << why;
}

TEST(RocmBackend, EveryCallIsSafeAfterAFailedOpen) {
  ScopedEnv env("CHRONOLINK_HSAKMT_LIBRARY", "/nonexistent/libhsakmt.so.1");
  auto backend = CreateRocmBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  ASSERT_NE(OpenRocm(backend.get(), &devices, &why), BackendStatus::kReady);

  ExpectInertAfterFailedOpen(backend.get());
  // And it can be opened again (still failing, still one clear line).
  EXPECT_EQ(OpenRocm(backend.get(), &devices, &why), BackendStatus::kNoLibrary);
}

TEST(RocmBackend, DestroyedWithoutCloseAfterAFailedOpen) {
  auto backend = CreateRocmBackend();
  std::vector<GpuDeviceInfo> devices;
  std::string why;
  OpenRocm(backend.get(), &devices, &why);
  backend.reset();  // no crash, nothing left behind
  SUCCEED();
}

}  // namespace
}  // namespace chronolink::collector
