// HIP devices -> amdkfd topology nodes, by PCI location: HIP numbers the
// devices it can see (HIP_VISIBLE_DEVICES and friends renumber them), KFD
// numbers topology nodes (CPUs too); the clock-counter ioctl wants the
// node. Pure parsing and matching, tested without a GPU.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "collector/device/rocm/hsakmt_api.h"

namespace chronolink::collector {

struct PciLocation {
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t function = 0;

  // KFD's LocationId: (bus << 8) | (device << 3) | function.
  uint32_t KfdLocationId() const { return (bus << 8) | (device << 3) | function; }
};

// "0000:c1:00.0" (domain:bus:device.function, hex); HIP also writes the
// domain with fewer digits. False on anything else.
bool ParsePciBusId(std::string_view text, PciLocation* out);

// The GPU node at that PCI location; nullptr when none.
const KfdNode* FindKfdNode(std::span<const KfdNode> nodes, const PciLocation& where);

}  // namespace chronolink::collector
