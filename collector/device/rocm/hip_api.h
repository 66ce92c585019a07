// The HIP runtime (libamdhip64), loaded with dlopen: device enumeration
// (count, name, PCI location, the counter rate HIP reports) and the events
// and streams the region timer needs. Headers from libamdhip64-dev (HIP
// 5.2 on Debian 12) at build time; nothing is linked.
//
// Only calls whose C signatures are stable across HIP 5 and 6 are bound
// directly. hipDeviceProp_t changed layout in HIP 6, so the properties are
// read through hipGetDevicePropertiesR0000 (HIP 6's name for the 5.x
// layout) when it exists, else through hipGetDeviceProperties on a 5.x
// runtime only, into a buffer with room to spare.
//
// Environment: CHRONOLINK_HIP_LIBRARY names the library path to use.
#pragma once

#include <hip/hip_runtime_api.h>

#include <cstdint>
#include <string>

#include "collector/device/dynamic_library.h"

namespace chronolink::collector {

struct HipApi {
  hipError_t (*Init)(unsigned) = nullptr;
  hipError_t (*RuntimeGetVersion)(int*) = nullptr;
  hipError_t (*GetDeviceCount)(int*) = nullptr;
  hipError_t (*DeviceGetName)(char*, int, hipDevice_t) = nullptr;
  hipError_t (*DeviceGetPCIBusId)(char*, int, int) = nullptr;
  hipError_t (*GetDevice)(int*) = nullptr;
  hipError_t (*SetDevice)(int) = nullptr;
  const char* (*GetErrorName)(hipError_t) = nullptr;
  hipError_t (*StreamCreateWithFlags)(hipStream_t*, unsigned) = nullptr;
  hipError_t (*StreamDestroy)(hipStream_t) = nullptr;
  hipError_t (*EventCreateWithFlags)(hipEvent_t*, unsigned) = nullptr;
  hipError_t (*EventRecord)(hipEvent_t, hipStream_t) = nullptr;
  hipError_t (*EventQuery)(hipEvent_t) = nullptr;
  hipError_t (*EventElapsedTime)(float*, hipEvent_t, hipEvent_t) = nullptr;
  hipError_t (*EventDestroy)(hipEvent_t) = nullptr;
  // Optional: nullptr when the runtime offers no properties call whose
  // layout this build knows.
  hipError_t (*GetDeviceProperties5)(hipDeviceProp_t*, int) = nullptr;

  bool Load(std::string* why);

  DynamicLibrary library;
};

// "hipErrorNoDevice (100)".
std::string HipErrorText(const HipApi& api, hipError_t e);

// What the backend needs of one HIP device.
struct HipDeviceFacts {
  int index = 0;
  std::string name;
  std::string pci_bus_id;             // "0000:c1:00.0"
  uint64_t clock_instruction_hz = 0;  // 0: unknown
};

bool ReadHipDevice(const HipApi& api, int index, HipDeviceFacts* out, std::string* why);

// Sets the calling thread's current HIP device for the life of the guard,
// then puts the previous one back (the application's choice survives).
class HipDeviceGuard {
 public:
  HipDeviceGuard(const HipApi& api, int device);
  ~HipDeviceGuard();
  HipDeviceGuard(const HipDeviceGuard&) = delete;
  HipDeviceGuard& operator=(const HipDeviceGuard&) = delete;
  bool ok() const { return ok_; }

 private:
  const HipApi& api_;
  int previous_ = -1;
  bool ok_ = false;
};

}  // namespace chronolink::collector
