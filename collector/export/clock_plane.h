// The `/host:chronolink-gpu-clock` plane (XProf does not draw it): what each
// device's times were converted with, so a reader can check or redo the
// conversion. One line per GPU clock map (`GPU <n> clock map`) and one per
// host clock domain an imported device used (`<domain> -> realtime`), each
// with a `map` event over the sampled span carrying the map's statistics,
// then one event per knot / sample at its REALTIME instant with stats
// `device_ns` (the device's or the domain's instant), `error_ns` and
// `segment`. Plane stats: `backend`, the export's counts, and the last host
// -> cluster mapping read from the agent's clock page when there was one;
// every mapping read is an event of the `cluster clock mappings` line
// (trace/correct/recorded_mapping.h has the names: recorded, not applied).
//
// Internal to device_planes.cc; not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "collector/export/device_planes.h"

namespace chronolink::collector {

// The earliest and latest REALTIME instants the clock plane will hold
// (false when it holds none), so the caller can choose a line base first.
bool ClockPlaneSpan(const std::vector<DeviceExport>& devices, const DeviceExportOptions& options, int64_t* first_ns,
                    int64_t* last_ns);

void WriteClockPlane(const std::vector<DeviceExport>& devices, const DeviceExportOptions& options,
                     const DeviceExportStats& stats, int64_t line_base_ns, xspace::XSpace* space);

}  // namespace chronolink::collector
