// dlopen of the NVIDIA driver library.
#include "collector/device/cuda/cuda_driver_api.h"

namespace chronolink::collector {

namespace {

LibrarySpec DriverSpec() {
  return {"libcuda.so.1 (the NVIDIA driver)",
          "CHRONOLINK_CUDA_DRIVER_LIBRARY",
          // The last is where container runtimes (the NVIDIA device plugin) mount the driver.
          {"libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1",
           "/usr/local/nvidia/lib64/libcuda.so.1"},
          "install the NVIDIA driver (the toolkit's stubs are not a driver)"};
}

}  // namespace

bool CudaDriverApi::Load(std::string* why) {
  if (!library.loaded() && !library.Open(DriverSpec(), why)) return false;
  return library.Resolve({{"cuInit", SlotOf(&Init)},
                          {"cuDeviceGetCount", SlotOf(&DeviceGetCount)},
                          {"cuDeviceGet", SlotOf(&DeviceGet)},
                          {"cuDeviceGetName", SlotOf(&DeviceGetName)},
                          {"cuDeviceGetPCIBusId", SlotOf(&DeviceGetPCIBusId)},
                          {"cuGetErrorName", SlotOf(&GetErrorName)}},
                         why);
}

std::string CudaResultText(const CudaDriverApi& api, CUresult r) {
  const char* name = nullptr;
  if (api.GetErrorName == nullptr || api.GetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) {
    name = "CUDA_ERROR";
  }
  return std::string(name) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

}  // namespace chronolink::collector
