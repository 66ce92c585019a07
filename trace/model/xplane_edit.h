// Small helpers every XSpace transform needs: find or create planes, lines
// and metadata by name with fresh ids that collide with nothing already in
// the plane, read and write plane stats by name, and the `Task Environment`
// plane's `profile_start_time` / `profile_stop_time` that XProf reads.
//
// Lookups are linear scans (planes and metadata maps are small next to the
// events); callers that resolve a name per event should resolve it once.
// Pointers returned stay valid until the containing repeated field or map
// is changed. Not thread-safe; one XSpace per thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto/xplane.pb.h"

namespace chronolink::trace {

inline constexpr std::string_view kTaskEnvPlaneName = "Task Environment";
inline constexpr std::string_view kProfileStartTimeStat = "profile_start_time";
inline constexpr std::string_view kProfileStopTimeStat = "profile_stop_time";

// Planes.
const xspace::XPlane* FindPlane(const xspace::XSpace& space, std::string_view name);
xspace::XPlane* FindMutablePlane(xspace::XSpace* space, std::string_view name);
// One past the largest plane id (0 for an empty space).
int64_t NextPlaneId(const xspace::XSpace& space);
// Existing plane named `name`, or a new one with id NextPlaneId().
xspace::XPlane* GetOrCreatePlane(xspace::XSpace* space, std::string_view name);

// Lines (by name within a plane; a new line gets one past the largest id).
xspace::XLine* GetOrCreateLine(xspace::XPlane* plane, std::string_view name);

// Metadata. Ids are map keys; a fresh id is one past the largest key or
// `id` field in the map (never 0, which reads as "unset").
std::optional<int64_t> FindStatMetadataId(const xspace::XPlane& plane, std::string_view name);
std::optional<int64_t> FindEventMetadataId(const xspace::XPlane& plane, std::string_view name);
xspace::XStatMetadata* GetOrCreateStatMetadata(xspace::XPlane* plane, std::string_view name);
xspace::XEventMetadata* GetOrCreateEventMetadata(xspace::XPlane* plane, std::string_view name);

// Plane stats by their metadata name. Getters return nullopt when the stat
// is absent or holds another type (a str getter also resolves ref_value).
const xspace::XStat* FindPlaneStat(const xspace::XPlane& plane, std::string_view name);
std::optional<uint64_t> GetPlaneStatUint64(const xspace::XPlane& plane, std::string_view name);
std::optional<int64_t> GetPlaneStatInt64(const xspace::XPlane& plane, std::string_view name);
std::optional<double> GetPlaneStatDouble(const xspace::XPlane& plane, std::string_view name);
std::optional<std::string> GetPlaneStatStr(const xspace::XPlane& plane, std::string_view name);
// Setters replace the stat's value (whatever its type was) or add it.
void SetPlaneStatUint64(xspace::XPlane* plane, std::string_view name, uint64_t value);
void SetPlaneStatInt64(xspace::XPlane* plane, std::string_view name, int64_t value);
void SetPlaneStatDouble(xspace::XPlane* plane, std::string_view name, double value);
void SetPlaneStatStr(xspace::XPlane* plane, std::string_view name, std::string_view value);

// `Task Environment` start/stop (epoch ns). Read as uint64, or as an int64
// that is not negative (some writers use it); nullopt when absent.
std::optional<uint64_t> ProfileStartTime(const xspace::XSpace& space);
std::optional<uint64_t> ProfileStopTime(const xspace::XSpace& space);
// Creates the plane when missing; writes uint64 stats as XProf expects.
void SetProfileStartTime(xspace::XSpace* space, uint64_t ns);
void SetProfileStopTime(xspace::XSpace* space, uint64_t ns);

// Replaces `hostnames` (XProf names the host by hostnames[0]).
void SetHostnames(xspace::XSpace* space, const std::vector<std::string>& hostnames);

}  // namespace chronolink::trace
