#include "trace/importers/xspace/line_base.h"

#include <limits>
#include <optional>

#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

bool LooksAbsolute(int64_t ts, std::optional<int64_t> start) {
  if (ts >= kAbsoluteLineThresholdNs) return true;
  if (!start || *start < kOneDayNs) return false;
  // |ts - start| <= 1 day, without overflow: both are in [0, 1e17) here or
  // start is larger, and ts >= start - day keeps the difference small.
  return ts >= *start - kOneDayNs && ts - *start <= kOneDayNs;
}

std::string DescribeLine(const xspace::XPlane& plane, const xspace::XLine& line) {
  return "plane '" + plane.name() + "' line '" + line.name() + "' (timestamp_ns " +
         std::to_string(line.timestamp_ns()) + ")";
}

}  // namespace

bool DetectLineBase(const xspace::XSpace& space, LineBase* out, std::string* error) {
  std::optional<int64_t> start;
  if (const auto raw = ProfileStartTime(space)) {
    if (*raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      *error = "Task Environment profile_start_time " + std::to_string(*raw) +
               " does not fit int64 ns";
      return false;
    }
    start = static_cast<int64_t>(*raw);
  }
  std::string first_absolute;
  std::string first_relative;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      if (line.events().empty()) continue;  // XProf skips empty lines; so do we
      std::string& first = LooksAbsolute(line.timestamp_ns(), start) ? first_absolute : first_relative;
      if (first.empty()) first = DescribeLine(plane, line);
    }
  }
  if (!first_absolute.empty() && !first_relative.empty()) {
    *error = "line timestamps mix absolute epoch ns (" + first_absolute +
             ") and times relative to the profile start (" + first_relative + ")";
    return false;
  }
  *out = LineBase{};
  if (!first_absolute.empty()) return true;  // absolute: base 0
  if (start) {
    out->base_ns = *start;
    out->relative = true;
    return true;
  }
  if (!first_relative.empty()) {
    out->known = false;  // relative to a start nobody recorded
    out->relative = true;
  }
  return true;
}

}  // namespace chronolink::trace
