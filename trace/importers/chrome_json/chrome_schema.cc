#include "trace/importers/chrome_json/chrome_schema.h"

namespace chronolink::trace::chrome {

std::string_view DescriptionOf(StatKind kind) {
  switch (kind) {
    case StatKind::kArg: return "";
    case StatKind::kArgJson: return kDescArgJson;
    case StatKind::kField: return kDescField;
    case StatKind::kFieldJson: return kDescFieldJson;
    case StatKind::kRefTarget: return kDescRefTarget;
  }
  return "";
}

StatKind KindOfDescription(std::string_view description) {
  if (description == kDescArgJson) return StatKind::kArgJson;
  if (description == kDescField) return StatKind::kField;
  if (description == kDescFieldJson) return StatKind::kFieldJson;
  if (description == kDescRefTarget) return StatKind::kRefTarget;
  return StatKind::kArg;
}

int64_t DefaultKeys(std::string_view ph, bool has_arg_stats) {
  int64_t keys = kHasName;
  if (ph != "M") keys |= kHasTs;
  if (ph == "X") keys |= kHasDur;
  if (has_arg_stats) keys |= kHasArgs;
  return keys;
}

const xspace::XPlane* FindTopLevelPlane(const xspace::XSpace& space) {
  // By its name and its form stat: a process may be named like it.
  for (const auto& plane : space.planes()) {
    if (plane.name() != kTopLevelPlane) continue;
    for (const auto& stat : plane.stats()) {
      const auto md = plane.stat_metadata().find(stat.metadata_id());
      if (md != plane.stat_metadata().end() && md->second.name() == kForm &&
          KindOfDescription(md->second.description()) == StatKind::kField) {
        return &plane;
      }
    }
  }
  return nullptr;
}

}  // namespace chronolink::trace::chrome
