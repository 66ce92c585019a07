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
// them to cluster time like any host trace). Line timestamps are relative to
// the space's `profile_start_time` when it has one, else it is set to the
// earliest exported instant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector/clock/device_clock_map.h"
#include "collector/device/gpu_activity.h"
#include "collector/device/gpu_backend.h"
#include "trace/model/host_trace.h"

namespace chronolink::collector {

inline constexpr char kGpuClockPlane[] = "/host:chronolink-gpu-clock";
inline constexpr char kGpuBoundStat[] = "chronolink_gpu_bound_ns";

struct DeviceExport {
  GpuDeviceInfo info;
  const DeviceClockMap* map = nullptr;   // required
  std::vector<GpuActivity> activity;     // this device's records, any order
};

struct DeviceExportOptions {
  std::string backend;           // recorded on the clock plane
  bool host_launch_events = true;
  // Host -> cluster mapping read from the agent's clock page at export time,
  // recorded on the clock plane (not applied): offset, drift, uncertainty.
  bool have_cluster_mapping = false;
  int64_t cluster_ref_ns = 0, cluster_offset_ns = 0, cluster_drift_ppt = 0, cluster_uncertainty_ns = 0;
};

struct DeviceExportStats {
  int64_t events_written = 0;
  int64_t events_unconvertible = 0;
  int64_t max_bound_ns = 0;
  double mean_bound_ns = 0;
};

bool AppendDevicePlanes(const std::vector<DeviceExport>& devices, const DeviceExportOptions& options,
                        trace::HostTrace* trace, DeviceExportStats* stats, std::string* error);

}  // namespace chronolink::collector
