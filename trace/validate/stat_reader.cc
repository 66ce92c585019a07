#include "trace/validate/stat_reader.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace chronolink::trace {
namespace {

std::string_view StripQuotes(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '"')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '"')) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  s = StripQuotes(s);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

}  // namespace

StatReader::StatReader(const xspace::XPlane& plane) : plane_(plane) {
  for (const auto& [id, metadata] : plane.stat_metadata()) {
    // The Chrome importer's interned string values are stat metadata too;
    // a value that happens to read "Seq" is not the key "Seq".
    if (metadata.description() == kInternedStringDescription) continue;
    ids_.emplace(metadata.name(), id);
  }
}

bool StatReader::Declares(std::string_view name) const { return ids_.find(name) != ids_.end(); }

const xspace::XStat* StatReader::FindIn(const google::protobuf::RepeatedPtrField<xspace::XStat>& stats,
                                        int64_t id) {
  for (const auto& stat : stats) {
    if (stat.metadata_id() == id) return &stat;
  }
  return nullptr;
}

std::optional<int64_t> StatReader::Id(std::string_view name) const {
  const auto id = ids_.find(name);
  if (id == ids_.end()) return std::nullopt;
  return id->second;
}

const xspace::XStat* StatReader::Find(const xspace::XEvent& event, int64_t id) const {
  if (const auto* stat = FindIn(event.stats(), id)) return stat;
  const auto metadata = plane_.event_metadata().find(event.metadata_id());
  if (metadata == plane_.event_metadata().end()) return nullptr;
  return FindIn(metadata->second.stats(), id);
}

const xspace::XStat* StatReader::FindByName(const xspace::XEvent& event, std::string_view name) const {
  const auto id = Id(name);
  return id ? Find(event, *id) : nullptr;
}

std::optional<std::string_view> StatReader::View(const xspace::XStat& stat) const {
  if (stat.value_case() == xspace::XStat::kStrValue) return StripQuotes(stat.str_value());
  if (stat.value_case() != xspace::XStat::kRefValue) return std::nullopt;
  const auto ref = plane_.stat_metadata().find(static_cast<int64_t>(stat.ref_value()));
  if (ref == plane_.stat_metadata().end()) return std::nullopt;
  return std::string_view(ref->second.name());
}

std::optional<std::string> StatReader::AsString(const xspace::XStat& stat) const {
  switch (stat.value_case()) {
    case xspace::XStat::kStrValue:
      return std::string(StripQuotes(stat.str_value()));
    case xspace::XStat::kRefValue: {
      const auto ref = plane_.stat_metadata().find(static_cast<int64_t>(stat.ref_value()));
      if (ref == plane_.stat_metadata().end()) return std::nullopt;
      return ref->second.name();
    }
    case xspace::XStat::kInt64Value:
      return std::to_string(stat.int64_value());
    case xspace::XStat::kUint64Value:
      return std::to_string(stat.uint64_value());
    default:
      return std::nullopt;  // doubles and bytes name nothing validate keys on
  }
}

std::optional<int64_t> StatReader::AsInt(const xspace::XStat& stat) const {
  switch (stat.value_case()) {
    case xspace::XStat::kInt64Value:
      return stat.int64_value();
    case xspace::XStat::kUint64Value:
      if (stat.uint64_value() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return std::nullopt;
      }
      return static_cast<int64_t>(stat.uint64_value());
    case xspace::XStat::kDoubleValue: {
      const double v = stat.double_value();
      // 2^53: beyond it a double no longer names one integer.
      if (!std::isfinite(v) || std::trunc(v) != v || std::fabs(v) > 9007199254740992.0) {
        return std::nullopt;
      }
      return static_cast<int64_t>(v);
    }
    case xspace::XStat::kStrValue:
      return ParseInt(stat.str_value());
    default:
      return std::nullopt;
  }
}

std::optional<std::string> StatReader::String(const xspace::XEvent& event, std::string_view name) const {
  const auto* stat = FindByName(event, name);
  return stat ? AsString(*stat) : std::nullopt;
}

std::optional<int64_t> StatReader::Int(const xspace::XEvent& event, std::string_view name) const {
  const auto* stat = FindByName(event, name);
  return stat ? AsInt(*stat) : std::nullopt;
}

std::optional<std::string> StatReader::PlaneString(std::string_view name) const {
  const auto id = ids_.find(name);
  if (id == ids_.end()) return std::nullopt;
  const auto* stat = FindIn(plane_.stats(), id->second);
  return stat ? AsString(*stat) : std::nullopt;
}

std::optional<int64_t> StatReader::PlaneInt(std::string_view name) const {
  const auto id = ids_.find(name);
  if (id == ids_.end()) return std::nullopt;
  const auto* stat = FindIn(plane_.stats(), id->second);
  return stat ? AsInt(*stat) : std::nullopt;
}

}  // namespace chronolink::trace
