// dlopen of libhsakmt and the node-property reading.
#include "collector/device/rocm/hsakmt_api.h"

#include <cstring>
#include <vector>

namespace chronolink::collector {

namespace {

// ROCm >= 6.2 builds the thunk into the HSA runtime; the separate library
// is then absent and the calls may be exported by libhsa-runtime64 instead.
LibrarySpec HsakmtSpec() {
  return {"libhsakmt (the ROCm thunk to amdkfd)",
          "CHRONOLINK_HSAKMT_LIBRARY",
          {"libhsakmt.so.1", "/opt/rocm/lib/libhsakmt.so.1", "libhsa-runtime64.so.1"},
          "apt-get install libhsakmt1"};
}

// Room for fields a newer libhsakmt appends to HsaNodeProperties.
constexpr size_t kNodePropertiesSlack = 4096;

std::string Utf16ToAscii(const HSAuint16* text, size_t max_chars) {
  std::string out;
  for (size_t i = 0; i < max_chars && text[i] != 0; ++i) {
    out.push_back(text[i] < 0x80 ? static_cast<char>(text[i]) : '?');
  }
  return out;
}

}  // namespace

bool HsakmtApi::Load(std::string* why) {
  if (!library.loaded() && !library.Open(HsakmtSpec(), why)) return false;
  return library.Resolve({{"hsaKmtOpenKFD", SlotOf(&OpenKFD)},
                          {"hsaKmtCloseKFD", SlotOf(&CloseKFD)},
                          {"hsaKmtAcquireSystemProperties", SlotOf(&AcquireSystemProperties)},
                          {"hsaKmtReleaseSystemProperties", SlotOf(&ReleaseSystemProperties)},
                          {"hsaKmtGetNodeProperties", SlotOf(&GetNodeProperties)},
                          {"hsaKmtGetClockCounters", SlotOf(&GetClockCounters)}},
                         why);
}

std::string HsakmtStatusText(HSAKMT_STATUS s) {
  const char* name = "error";
  switch (s) {
    case HSAKMT_STATUS_SUCCESS:
      name = "SUCCESS";
      break;
    case HSAKMT_STATUS_ERROR:
      name = "ERROR";
      break;
    case HSAKMT_STATUS_DRIVER_MISMATCH:
      name = "DRIVER_MISMATCH";
      break;
    case HSAKMT_STATUS_INVALID_PARAMETER:
      name = "INVALID_PARAMETER";
      break;
    case HSAKMT_STATUS_INVALID_NODE_UNIT:
      name = "INVALID_NODE_UNIT";
      break;
    case HSAKMT_STATUS_NOT_SUPPORTED:
      name = "NOT_SUPPORTED";
      break;
    case HSAKMT_STATUS_UNAVAILABLE:
      name = "UNAVAILABLE";
      break;
    case HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED:
      name = "KERNEL_IO_CHANNEL_NOT_OPENED";
      break;
    case HSAKMT_STATUS_KERNEL_COMMUNICATION_ERROR:
      name = "KERNEL_COMMUNICATION_ERROR";
      break;
    case HSAKMT_STATUS_KERNEL_ALREADY_OPENED:
      name = "KERNEL_ALREADY_OPENED";
      break;
    default:
      break;
  }
  return std::string(name) + " (" + std::to_string(static_cast<int>(s)) + ")";
}

bool ReadKfdNode(const HsakmtApi& api, uint32_t node_id, KfdNode* out, std::string* why) {
  std::vector<uint64_t> buffer((sizeof(HsaNodeProperties) + kNodePropertiesSlack) / sizeof(uint64_t));
  auto* props = reinterpret_cast<HsaNodeProperties*>(buffer.data());
  HSAKMT_STATUS s = api.GetNodeProperties(node_id, props);
  if (s != HSAKMT_STATUS_SUCCESS) {
    *why = "hsaKmtGetNodeProperties(" + std::to_string(node_id) + "): " + HsakmtStatusText(s);
    return false;
  }
  out->node_id = node_id;
  out->is_gpu = props->NumFComputeCores > 0;
  out->pci_domain = props->Domain;
  out->location_id = props->LocationId;
  out->vendor_id = props->VendorId;
  out->device_id = props->DeviceId;
  out->marketing_name = Utf16ToAscii(props->MarketingName, HSA_PUBLIC_NAME_SIZE);
  return true;
}

}  // namespace chronolink::collector
