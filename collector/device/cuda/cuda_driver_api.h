// The NVIDIA driver API (libcuda.so.1), loaded with dlopen: only what the
// CUDA backend needs to tell "no driver" from "no device" and to name the
// devices. cuda.h from the toolkit at build time; nothing is linked.
//
// Environment: CHRONOLINK_CUDA_DRIVER_LIBRARY names the library path to use.
#pragma once

#include <cuda.h>

#include <string>

#include "collector/device/dynamic_library.h"

namespace chronolink::collector {

struct CudaDriverApi {
  CUresult (*Init)(unsigned int) = nullptr;
  CUresult (*DeviceGetCount)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*DeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*DeviceGetPCIBusId)(char*, int, CUdevice) = nullptr;
  CUresult (*GetErrorName)(CUresult, const char**) = nullptr;

  bool Load(std::string* why);

  DynamicLibrary library;
};

// "CUDA_ERROR_NO_DEVICE (100)".
std::string CudaResultText(const CudaDriverApi& api, CUresult r);

}  // namespace chronolink::collector
