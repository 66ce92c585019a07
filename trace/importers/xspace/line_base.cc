#include "trace/importers/xspace/line_base.h"

#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "common/quoted_text.h"
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
  return "plane " + QuotedText(plane.name()) + " line " + QuotedText(line.name()) + " (timestamp_ns " +
         std::to_string(line.timestamp_ns()) + ")";
}

}  // namespace

LineBaseVerdict DecideLineBase(std::optional<uint64_t> raw_start, std::span<const int64_t> nonempty_line_ts,
                               LineBase* out, size_t* first_absolute, size_t* first_relative) {
  *out = LineBase{};
  std::optional<int64_t> start;
  if (raw_start) {
    if (*raw_start > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return LineBaseVerdict::kStartTooLarge;
    }
    start = static_cast<int64_t>(*raw_start);
  }
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  *first_absolute = *first_relative = kNone;
  for (size_t i = 0; i < nonempty_line_ts.size(); ++i) {
    size_t& first = LooksAbsolute(nonempty_line_ts[i], start) ? *first_absolute : *first_relative;
    if (first == kNone) first = i;
  }
  if (*first_absolute != kNone && *first_relative != kNone) return LineBaseVerdict::kMixed;
  if (*first_absolute != kNone) return LineBaseVerdict::kOk;  // absolute: base 0
  if (start) {
    out->base_ns = *start;
    out->relative = true;
  } else if (*first_relative != kNone) {
    out->known = false;  // relative to a start nobody recorded
    out->relative = true;
  }
  return LineBaseVerdict::kOk;
}

bool DetectLineBase(const xspace::XSpace& space, LineBase* out, std::string* error) {
  const auto raw = ProfileStartTime(space);
  std::vector<int64_t> stamps;
  std::vector<std::pair<const xspace::XPlane*, const xspace::XLine*>> where;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      if (line.events().empty()) continue;  // XProf skips empty lines; so do we
      stamps.push_back(line.timestamp_ns());
      where.emplace_back(&plane, &line);
    }
  }
  size_t abs_i = 0, rel_i = 0;
  switch (DecideLineBase(raw, stamps, out, &abs_i, &rel_i)) {
    case LineBaseVerdict::kOk:
      return true;
    case LineBaseVerdict::kStartTooLarge:
      *error = "Task Environment profile_start_time " + std::to_string(*raw) + " does not fit int64 ns";
      return false;
    case LineBaseVerdict::kMixed:
      *error = "line timestamps mix absolute epoch ns (" + DescribeLine(*where[abs_i].first, *where[abs_i].second) +
               ") and times relative to the profile start (" +
               DescribeLine(*where[rel_i].first, *where[rel_i].second) + ")";
      return false;
  }
  return false;
}

}  // namespace chronolink::trace
