// One bracketed read of a GPU clock: the host clock read just before, the
// device counter, the host clock read just after. The device read happened
// somewhere inside [host_before_ns, host_after_ns]; the narrower the
// bracket, the better the pair. Backends produce these; collector/clock/
// turns them into a map. Pure data, no I/O.
#pragma once

#include <cstdint>

namespace chronolink::collector {

struct SnapshotReading {
  int64_t host_before_ns = 0;  // ClockDomain::kNodeRealtime
  int64_t device_ns = 0;       // ClockDomain::kGpuDevice (unwrapped, nominal ns)
  int64_t host_after_ns = 0;   // ClockDomain::kNodeRealtime

  int64_t width_ns() const { return host_after_ns - host_before_ns; }
};

}  // namespace chronolink::collector
