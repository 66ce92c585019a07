// dlopen of the HIP runtime and the reading of one device's facts.
#include "collector/device/rocm/hip_api.h"

#include <vector>

namespace chronolink::collector {

namespace {

LibrarySpec HipSpec() {
  return {"libamdhip64 (the HIP runtime)",
          "CHRONOLINK_HIP_LIBRARY",
          {"libamdhip64.so.5", "libamdhip64.so.6", "libamdhip64.so", "/opt/rocm/lib/libamdhip64.so"},
          "apt-get install libamdhip64-5"};
}

// Room for fields a newer runtime appends to the properties it writes.
constexpr size_t kPropertiesSlack = 8192;

// HIP encodes its version as major * 10'000'000 + minor * 100'000 + patch.
constexpr int kHipVersionPerMajor = 10'000'000;

void BindProperties(HipApi* api) {
  void* r0000 = api->library.Find("hipGetDevicePropertiesR0000");
  if (r0000 != nullptr) {
    *SlotOf(&api->GetDeviceProperties5) = r0000;
    return;
  }
  int version = 0;
  if (api->RuntimeGetVersion(&version) == hipSuccess && version / kHipVersionPerMajor == 5) {
    *SlotOf(&api->GetDeviceProperties5) = api->library.Find("hipGetDeviceProperties");
  }
}

}  // namespace

bool HipApi::Load(std::string* why) {
  if (!library.loaded() && !library.Open(HipSpec(), why)) return false;
  bool ok = library.Resolve({{"hipInit", SlotOf(&Init)},
                             {"hipRuntimeGetVersion", SlotOf(&RuntimeGetVersion)},
                             {"hipGetDeviceCount", SlotOf(&GetDeviceCount)},
                             {"hipDeviceGetName", SlotOf(&DeviceGetName)},
                             {"hipDeviceGetPCIBusId", SlotOf(&DeviceGetPCIBusId)},
                             {"hipGetDevice", SlotOf(&GetDevice)},
                             {"hipSetDevice", SlotOf(&SetDevice)},
                             {"hipGetErrorName", SlotOf(&GetErrorName)},
                             {"hipStreamCreateWithFlags", SlotOf(&StreamCreateWithFlags)},
                             {"hipStreamDestroy", SlotOf(&StreamDestroy)},
                             {"hipEventCreateWithFlags", SlotOf(&EventCreateWithFlags)},
                             {"hipEventRecord", SlotOf(&EventRecord)},
                             {"hipEventQuery", SlotOf(&EventQuery)},
                             {"hipEventElapsedTime", SlotOf(&EventElapsedTime)},
                             {"hipEventDestroy", SlotOf(&EventDestroy)}},
                            why);
  if (ok) BindProperties(this);
  return ok;
}

std::string HipErrorText(const HipApi& api, hipError_t e) {
  const char* name = api.GetErrorName != nullptr ? api.GetErrorName(e) : nullptr;
  return std::string(name != nullptr ? name : "hipError") + " (" + std::to_string(static_cast<int>(e)) + ")";
}

bool ReadHipDevice(const HipApi& api, int index, HipDeviceFacts* out, std::string* why) {
  char name[256] = {};
  char bus[64] = {};
  hipError_t e = api.DeviceGetName(name, sizeof(name) - 1, index);
  if (e == hipSuccess) e = api.DeviceGetPCIBusId(bus, sizeof(bus) - 1, index);
  if (e != hipSuccess) {
    *why = "HIP device " + std::to_string(index) + ": " + HipErrorText(api, e);
    return false;
  }
  out->index = index;
  out->name = name;
  out->pci_bus_id = bus;
  out->clock_instruction_hz = 0;
  if (api.GetDeviceProperties5 != nullptr) {
    std::vector<uint64_t> buffer((sizeof(hipDeviceProp_t) + kPropertiesSlack) / sizeof(uint64_t));
    auto* props = reinterpret_cast<hipDeviceProp_t*>(buffer.data());
    if (api.GetDeviceProperties5(props, index) == hipSuccess && props->clockInstructionRate > 0) {
      out->clock_instruction_hz = static_cast<uint64_t>(props->clockInstructionRate) * 1000;
    }
  }
  return true;
}

HipDeviceGuard::HipDeviceGuard(const HipApi& api, int device) : api_(api) {
  if (api_.GetDevice(&previous_) != hipSuccess) previous_ = -1;
  ok_ = api_.SetDevice(device) == hipSuccess;
}

HipDeviceGuard::~HipDeviceGuard() {
  // Best effort: a destructor has no one to report a failed restore to.
  if (previous_ >= 0) (void)api_.SetDevice(previous_);
}

}  // namespace chronolink::collector
