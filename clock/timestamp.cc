#include "clock/timestamp.h"

namespace chronolink {

std::string_view ClockDomainName(ClockDomain d) {
  switch (d) {
    case ClockDomain::kNodeRealtime: return "node_realtime";
    case ClockDomain::kMonotonic: return "monotonic";
    case ClockDomain::kTai: return "tai";
    case ClockDomain::kBoottime: return "boottime";
    case ClockDomain::kPeerRealtime: return "peer_realtime";
    case ClockDomain::kMonotonicRaw: return "monotonic_raw";
    case ClockDomain::kGpuDevice: return "gpu_device";
  }
  return "unknown";
}

std::string_view StampSourceName(StampSource s) {
  switch (s) {
    case StampSource::kNone: return "none";
    case StampSource::kUserspace: return "userspace";
    case StampSource::kSocketSched: return "socket_sched";
    case StampSource::kSocketSoftware: return "socket_software";
    case StampSource::kBpfTc: return "bpf_tc";
    case StampSource::kBpfXdp: return "bpf_xdp";
    case StampSource::kHardware: return "hardware";
  }
  return "unknown";
}

bool ParseStampSource(std::string_view name, StampSource* out) {
  for (int i = 0; i < kNumStampSources; ++i) {
    auto s = static_cast<StampSource>(i);
    if (StampSourceName(s) == name) {
      *out = s;
      return true;
    }
  }
  return false;
}

std::string_view SourceClassName(SourceClass c) {
  switch (c) {
    case SourceClass::kUserspace: return "userspace";
    case SourceClass::kKernel: return "kernel";
  }
  return "unknown";
}

bool ParseSourceClass(std::string_view name, SourceClass* out) {
  if (name == "userspace") { *out = SourceClass::kUserspace; return true; }
  if (name == "kernel") { *out = SourceClass::kKernel; return true; }
  return false;
}

}  // namespace chronolink
