// PCI bus id parsing and the HIP -> KFD node match.
#include "collector/device/rocm/kfd_topology.h"

namespace chronolink::collector {

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads hex digits up to `stop` (or the end); false unless 1..max_digits
// digits were read and `stop` (if any) follows them.
bool ReadHexField(std::string_view* text, char stop, size_t max_digits, uint32_t* out) {
  size_t n = 0;
  uint32_t value = 0;
  while (n < text->size() && (*text)[n] != stop) {
    int d = HexDigit((*text)[n]);
    if (d < 0 || n >= max_digits) return false;
    value = value * 16 + static_cast<uint32_t>(d);
    ++n;
  }
  if (n == 0) return false;
  const bool at_end = n == text->size();
  if (stop != '\0' && at_end) return false;
  if (stop == '\0' && !at_end) return false;
  text->remove_prefix(at_end ? n : n + 1);
  *out = value;
  return true;
}

}  // namespace

bool ParsePciBusId(std::string_view text, PciLocation* out) {
  PciLocation p;
  if (!ReadHexField(&text, ':', 8, &p.domain) || !ReadHexField(&text, ':', 2, &p.bus) ||
      !ReadHexField(&text, '.', 2, &p.device) || !ReadHexField(&text, '\0', 1, &p.function)) {
    return false;
  }
  if (p.device > 31 || p.function > 7) return false;
  *out = p;
  return true;
}

const KfdNode* FindKfdNode(std::span<const KfdNode> nodes, const PciLocation& where) {
  for (const KfdNode& n : nodes) {
    if (n.is_gpu && n.pci_domain == where.domain && n.location_id == where.KfdLocationId()) return &n;
  }
  return nullptr;
}

}  // namespace chronolink::collector
