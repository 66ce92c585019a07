// Writes what the collector gathered into a host's XSpace, as XProf draws it
// (docs/xspace.md): one `/device:GPU:<ordinal>` plane per device (plane id =
// ordinal), lines `Stream #<n>(<kinds>)`, kernel events with
// `correlation_id` and `kernel_details`, copies with `memcpy_details`;
// host-side launches on the `/host:CPU` plane; and the snapshot pairs and
// fitted map on `/host:chronolink-gpu-clock`, a plane XProf does not draw.
// Every device event carries `chronolink_gpu_bound_ns`: the bound of its
// GPU -> host conversion. Events that cannot be converted (across a step,
// too far outside the sampled span) are not written: they are counted and
// listed in the space's warnings.
//
// Times are host CLOCK_REALTIME of the node (chronolink-trace align moves
// them to cluster time like any host trace). Line timestamps follow the
// space: absolute when it already holds absolute lines, else relative to its
// `profile_start_time`, which is set (with `profile_stop_time`) to the
// exported span when the space has neither events nor a start time.
//
// A device's times reach REALTIME through its GPU clock map (the backends'
// records, on ClockDomain::kGpuDevice) or, for records an imported profiler
// stamped on a host clock (rocprofv3: BOOTTIME), through a HostDomainConversion.
// A space that already has a `/device:GPU:<n>` plane for an exported ordinal
// is refused (another profiler's device planes are not merged with ours).
//
// Not thread-safe; one call per space at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collector/clock/device_clock_map.h"
#include "collector/device/gpu_activity.h"
#include "collector/device/gpu_backend.h"
#include "trace/correct/recorded_mapping.h"
#include "trace/model/host_trace.h"

namespace chronolink::collector {

// The plane chronolink-trace reads a recorded clock page mapping from.
inline constexpr const char* kGpuClockPlane = trace::kRecordedMappingPlane;
inline constexpr char kGpuBoundStat[] = "chronolink_gpu_bound_ns";

// Times on a host clock other than REALTIME -> REALTIME with a bound, for
// records stamped on that clock (collector/importers/host_clock_domains.h
// implements it from a recording of the node's clock domains).
class HostDomainConversion {
 public:
  virtual ~HostDomainConversion() = default;
  virtual std::string_view domain_name() const = 0;  // "boottime", "monotonic", ...
  virtual ConvertedStamp ToRealtime(int64_t domain_ns) const = 0;
  // The samples behind the conversion, for the clock plane: device_ns holds
  // the domain's instant, host_ns the REALTIME one.
  virtual std::vector<DeviceClockKnot> Samples() const = 0;
};

struct DeviceExport {
  GpuDeviceInfo info;
  // Exactly one of the two. With `map`, the activity's start/end_device_ns
  // are kGpuDevice; with `host_domain`, they are on that host clock (the
  // field names stay; the domain is the conversion's).
  const DeviceClockMap* map = nullptr;
  const HostDomainConversion* host_domain = nullptr;
  std::vector<GpuActivity> activity;  // this device's records, any order
};

struct DeviceExportOptions {
  std::string backend;  // recorded on the clock plane
  bool host_launch_events = true;
  // Host -> cluster mappings read from the agent's clock page while the
  // collector ran, recorded on the clock plane (not applied): chronolink-trace
  // align --recorded-mapping applies them when no offsets file is at hand
  // (trace/correct/recorded_mapping.h). Empty: none was read "ok".
  trace::RecordedMappings cluster_mappings;
  // A stopped run's stop (host clock; 0: still running). Mappings read after
  // it (the collector waits for one that maps the stop) are placed at it,
  // so that the clock plane stays within the profile; their read stat says
  // when they were read.
  int64_t stopped_at_ns = 0;
};

struct DeviceExportStats {
  int64_t events_written = 0;         // device events
  int64_t events_unconvertible = 0;   // not placed: across a step, outside the span
  int64_t events_invalid = 0;         // not placed: end before start, wrong device, span too long
  int64_t launch_events_written = 0;  // on /host:CPU
  int64_t max_bound_ns = 0;           // of the written device events' GPU -> host bounds
  double mean_bound_ns = 0;
};

// Appends the devices' planes, the launches and the clock plane to `trace`
// (a host trace on its own REALTIME clock) and fills *stats. False with
// *error, and the trace unchanged, when the request cannot be honoured: a
// device with no conversion or a repeated ordinal, a device plane that
// already exists, a trace already on cluster time or with an unknown line
// base. Events that cannot be placed are counted and summarised in the
// space's warnings (one line per device), never an error.
bool AppendDevicePlanes(const std::vector<DeviceExport>& devices, const DeviceExportOptions& options,
                        trace::HostTrace* trace, DeviceExportStats* stats, std::string* error);

}  // namespace chronolink::collector
