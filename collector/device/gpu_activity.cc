// Names of activity kinds, as they appear in logs and in XSpace line names.
#include "collector/device/gpu_activity.h"

namespace chronolink::collector {

std::string_view ActivityKindName(ActivityKind k) {
  switch (k) {
    case ActivityKind::kKernel: return "kernel";
    case ActivityKind::kMemcpyHtoD: return "memcpy_htod";
    case ActivityKind::kMemcpyDtoH: return "memcpy_dtoh";
    case ActivityKind::kMemcpyDtoD: return "memcpy_dtod";
    case ActivityKind::kMemset: return "memset";
    case ActivityKind::kMarker: return "marker";
  }
  return "unknown";
}

}  // namespace chronolink::collector
