#include "trace/model/xplane_edit.h"

#include <algorithm>
#include <limits>

namespace chronolink::trace {
namespace {

template <typename Map>
int64_t FreshMetadataId(const Map& map) {
  int64_t max_id = 0;
  for (const auto& [key, value] : map) max_id = std::max({max_id, key, value.id()});
  if (max_id < std::numeric_limits<int64_t>::max()) return max_id + 1;
  // A hostile file used the largest id: take the smallest free positive one
  // (one of the first size()+1 candidates is free).
  for (int64_t id = 1;; ++id) {
    if (!map.contains(id)) return id;
  }
}

// The smallest id with that name: a map's iteration order differs between
// two parses of the same bytes, and a file may name two entries alike.
template <typename Map>
std::optional<int64_t> FindMetadataId(const Map& map, std::string_view name) {
  std::optional<int64_t> found;
  for (const auto& [key, value] : map) {
    if (value.name() == name && (!found || key < *found)) found = key;
  }
  return found;
}

template <typename Map>
auto* GetOrCreateMetadata(Map* map, std::string_view name) {
  if (const auto id = FindMetadataId(*map, name)) return &map->at(*id);
  const int64_t id = FreshMetadataId(*map);
  auto& created = (*map)[id];
  created.set_id(id);
  created.set_name(std::string(name));
  return &created;
}

xspace::XStat* FindMutablePlaneStat(xspace::XPlane* plane, std::string_view name) {
  const auto id = FindStatMetadataId(*plane, name);
  if (!id) return nullptr;
  for (auto& stat : *plane->mutable_stats()) {
    if (stat.metadata_id() == *id) return &stat;
  }
  return nullptr;
}

// The stat named `name`, created (with its metadata) when missing.
xspace::XStat* GetOrCreatePlaneStat(xspace::XPlane* plane, std::string_view name) {
  if (auto* stat = FindMutablePlaneStat(plane, name)) return stat;
  const int64_t id = GetOrCreateStatMetadata(plane, name)->id();
  auto* stat = plane->add_stats();
  stat->set_metadata_id(id);
  return stat;
}

std::optional<uint64_t> TaskEnvTime(const xspace::XSpace& space, std::string_view stat_name) {
  const auto* plane = FindPlane(space, kTaskEnvPlaneName);
  if (!plane) return std::nullopt;
  const auto* stat = FindPlaneStat(*plane, stat_name);
  if (!stat) return std::nullopt;
  if (stat->value_case() == xspace::XStat::kUint64Value) return stat->uint64_value();
  if (stat->value_case() == xspace::XStat::kInt64Value && stat->int64_value() >= 0) {
    return static_cast<uint64_t>(stat->int64_value());
  }
  return std::nullopt;
}

}  // namespace

const xspace::XPlane* FindPlane(const xspace::XSpace& space, std::string_view name) {
  for (const auto& plane : space.planes()) {
    if (plane.name() == name) return &plane;
  }
  return nullptr;
}

xspace::XPlane* FindMutablePlane(xspace::XSpace* space, std::string_view name) {
  for (auto& plane : *space->mutable_planes()) {
    if (plane.name() == name) return &plane;
  }
  return nullptr;
}

int64_t NextPlaneId(const xspace::XSpace& space) {
  if (space.planes().empty()) return 0;
  int64_t max_id = space.planes(0).id();
  for (const auto& plane : space.planes()) max_id = std::max(max_id, plane.id());
  if (max_id < std::numeric_limits<int64_t>::max()) return max_id + 1;
  for (int64_t id = 0;; ++id) {  // the largest id is taken: the smallest free one
    const bool taken = std::any_of(space.planes().begin(), space.planes().end(),
                                   [id](const xspace::XPlane& p) { return p.id() == id; });
    if (!taken) return id;
  }
}

xspace::XPlane* GetOrCreatePlane(xspace::XSpace* space, std::string_view name) {
  if (auto* plane = FindMutablePlane(space, name)) return plane;
  const int64_t id = NextPlaneId(*space);
  auto* plane = space->add_planes();
  plane->set_id(id);
  plane->set_name(std::string(name));
  return plane;
}

xspace::XLine* GetOrCreateLine(xspace::XPlane* plane, std::string_view name) {
  int64_t max_id = -1;
  for (auto& line : *plane->mutable_lines()) {
    if (line.name() == name) return &line;
    max_id = std::max(max_id, line.id());
  }
  auto* line = plane->add_lines();
  // Line ids are thread ids to XProf; a clash only merges display rows, so
  // the rare INT64_MAX case may reuse 0 rather than search.
  line->set_id(max_id < std::numeric_limits<int64_t>::max() ? max_id + 1 : 0);
  line->set_name(std::string(name));
  return line;
}

std::optional<int64_t> FindStatMetadataId(const xspace::XPlane& plane, std::string_view name) {
  return FindMetadataId(plane.stat_metadata(), name);
}

std::optional<int64_t> FindEventMetadataId(const xspace::XPlane& plane, std::string_view name) {
  return FindMetadataId(plane.event_metadata(), name);
}

xspace::XStatMetadata* GetOrCreateStatMetadata(xspace::XPlane* plane, std::string_view name) {
  return GetOrCreateMetadata(plane->mutable_stat_metadata(), name);
}

xspace::XEventMetadata* GetOrCreateEventMetadata(xspace::XPlane* plane, std::string_view name) {
  return GetOrCreateMetadata(plane->mutable_event_metadata(), name);
}

const xspace::XStat* FindPlaneStat(const xspace::XPlane& plane, std::string_view name) {
  const auto id = FindStatMetadataId(plane, name);
  if (!id) return nullptr;
  for (const auto& stat : plane.stats()) {
    if (stat.metadata_id() == *id) return &stat;
  }
  return nullptr;
}

std::optional<uint64_t> GetPlaneStatUint64(const xspace::XPlane& plane, std::string_view name) {
  const auto* stat = FindPlaneStat(plane, name);
  if (!stat || stat->value_case() != xspace::XStat::kUint64Value) return std::nullopt;
  return stat->uint64_value();
}

std::optional<int64_t> GetPlaneStatInt64(const xspace::XPlane& plane, std::string_view name) {
  const auto* stat = FindPlaneStat(plane, name);
  if (!stat || stat->value_case() != xspace::XStat::kInt64Value) return std::nullopt;
  return stat->int64_value();
}

std::optional<double> GetPlaneStatDouble(const xspace::XPlane& plane, std::string_view name) {
  const auto* stat = FindPlaneStat(plane, name);
  if (!stat || stat->value_case() != xspace::XStat::kDoubleValue) return std::nullopt;
  return stat->double_value();
}

std::optional<std::string> GetPlaneStatStr(const xspace::XPlane& plane, std::string_view name) {
  const auto* stat = FindPlaneStat(plane, name);
  if (!stat) return std::nullopt;
  if (stat->value_case() == xspace::XStat::kStrValue) return stat->str_value();
  if (stat->value_case() == xspace::XStat::kRefValue) {
    // A ref_value names a stat metadata entry whose name is the string.
    const auto& md = plane.stat_metadata();
    const auto it = md.find(static_cast<int64_t>(stat->ref_value()));
    if (it != md.end()) return it->second.name();
  }
  return std::nullopt;
}

void SetPlaneStatUint64(xspace::XPlane* plane, std::string_view name, uint64_t value) {
  GetOrCreatePlaneStat(plane, name)->set_uint64_value(value);
}

void SetPlaneStatInt64(xspace::XPlane* plane, std::string_view name, int64_t value) {
  GetOrCreatePlaneStat(plane, name)->set_int64_value(value);
}

void SetPlaneStatDouble(xspace::XPlane* plane, std::string_view name, double value) {
  GetOrCreatePlaneStat(plane, name)->set_double_value(value);
}

void SetPlaneStatStr(xspace::XPlane* plane, std::string_view name, std::string_view value) {
  GetOrCreatePlaneStat(plane, name)->set_str_value(std::string(value));
}

std::optional<uint64_t> ProfileStartTime(const xspace::XSpace& space) {
  return TaskEnvTime(space, kProfileStartTimeStat);
}

std::optional<uint64_t> ProfileStopTime(const xspace::XSpace& space) {
  return TaskEnvTime(space, kProfileStopTimeStat);
}

void SetProfileStartTime(xspace::XSpace* space, uint64_t ns) {
  SetPlaneStatUint64(GetOrCreatePlane(space, kTaskEnvPlaneName), kProfileStartTimeStat, ns);
}

void SetProfileStopTime(xspace::XSpace* space, uint64_t ns) {
  SetPlaneStatUint64(GetOrCreatePlane(space, kTaskEnvPlaneName), kProfileStopTimeStat, ns);
}

void SetHostnames(xspace::XSpace* space, const std::vector<std::string>& hostnames) {
  space->clear_hostnames();
  for (const auto& name : hostnames) space->add_hostnames(name);
}

}  // namespace chronolink::trace
