// One node's correction (trace/correct/node_correction.h) as the clock map
// alignment uses (trace/correct/host_clock_map.h): Map is defined through the
// piece API, so a caller that keeps a piece (MapCursor) gets Map's values
// exactly. Immutable; const calls are thread-safe.
#pragma once

#include <memory>

#include "trace/correct/clock_correction.h"
#include "trace/correct/host_clock_map.h"

namespace chronolink::trace {

// `node` belongs to `owner`, which the map keeps alive.
std::unique_ptr<HostClockMap> MakeNodeClockMap(std::shared_ptr<const ClusterCorrection> owner,
                                               const NodeCorrection* node);

}  // namespace chronolink::trace
