// The backends this build knows, by name, in the order "auto" tries them.
// A backend left out of the build is still listed and its factory returns a
// backend whose Open() says kNotCompiledIn (chrony's null refclock entry).
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "collector/device/gpu_backend.h"

namespace chronolink::collector {

struct BackendEntry {
  std::string_view name;         // "rocm", "cuda", "simulated"
  std::string_view description;  // one line for --help
  bool compiled_in;
  std::unique_ptr<GpuBackend> (*create)();
};

std::span<const BackendEntry> Backends();
// nullptr for an unknown name.
const BackendEntry* FindBackend(std::string_view name);

}  // namespace chronolink::collector
