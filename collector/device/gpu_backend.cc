// Names of backend statuses, for the one line a caller prints after Open().
#include "collector/device/gpu_backend.h"

namespace chronolink::collector {

std::string_view BackendStatusName(BackendStatus s) {
  switch (s) {
    case BackendStatus::kReady: return "ready";
    case BackendStatus::kNotCompiledIn: return "not_compiled_in";
    case BackendStatus::kNoLibrary: return "no_library";
    case BackendStatus::kNoDevice: return "no_device";
    case BackendStatus::kFailed: return "failed";
  }
  return "unknown";
}

}  // namespace chronolink::collector
