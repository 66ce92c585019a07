// How many generated cases a property test runs: its own count, or
// CHRONOLINK_PROPERTY_CASES when set (higher for a long run, docs/traces.md;
// lower under qemu, where scripts/test-arm64.sh sets it: the architecture
// is what is tested there, not the generator's whole space again).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace chronolink::trace::testing {

inline int64_t CasesFromEnvironment(int64_t fallback) {
  const char* text = std::getenv("CHRONOLINK_PROPERTY_CASES");
  if (text == nullptr || *text == '\0') return fallback;
  return std::max<int64_t>(1, std::strtoll(text, nullptr, 10));
}

}  // namespace chronolink::trace::testing
