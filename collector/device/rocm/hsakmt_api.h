// libhsakmt (the ROCm thunk to the amdkfd driver), loaded with dlopen: the
// few calls the ROCm backend needs (topology and the clock-counter ioctl),
// and the reading of a node's properties into the facts the backend uses.
// Headers come from libhsakmt-dev at build time; nothing is linked.
//
// Environment: CHRONOLINK_HSAKMT_LIBRARY names the library path to use
// instead of the usual names. Not thread-safe to load; the calls themselves
// are libhsakmt's (thread-safe after hsaKmtOpenKFD).
#pragma once

#include <hsakmt.h>

#include <cstdint>
#include <string>

#include "collector/device/dynamic_library.h"

namespace chronolink::collector {

struct HsakmtApi {
  HSAKMT_STATUS (*OpenKFD)() = nullptr;
  HSAKMT_STATUS (*CloseKFD)() = nullptr;
  HSAKMT_STATUS (*AcquireSystemProperties)(HsaSystemProperties*) = nullptr;
  HSAKMT_STATUS (*ReleaseSystemProperties)() = nullptr;
  HSAKMT_STATUS (*GetNodeProperties)(HSAuint32, HsaNodeProperties*) = nullptr;
  HSAKMT_STATUS (*GetClockCounters)(HSAuint32, HsaClockCounters*) = nullptr;

  // Loads the library and resolves every call; false with one line.
  bool Load(std::string* why);

  DynamicLibrary library;
};

// "KERNEL_IO_CHANNEL_NOT_OPENED (20)".
std::string HsakmtStatusText(HSAKMT_STATUS s);

// What the backend needs of a KFD topology node.
struct KfdNode {
  uint32_t node_id = 0;
  bool is_gpu = false;  // NumFComputeCores > 0
  uint32_t pci_domain = 0;
  uint32_t location_id = 0;  // (bus << 8) | (device << 3) | function
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  std::string marketing_name;  // ASCII of the UTF-16 MarketingName
};

// Reads node `node_id`. libhsakmt copies its own struct size, which newer
// versions may enlarge, so the properties land in a buffer with room to
// spare rather than in one HsaNodeProperties.
bool ReadKfdNode(const HsakmtApi& api, uint32_t node_id, KfdNode* out, std::string* why);

}  // namespace chronolink::collector
