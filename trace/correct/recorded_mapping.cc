#include "trace/correct/recorded_mapping.h"

#include <algorithm>
#include <cstdlib>

#include "trace/correct/offsets_file.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

// offsets.jsonl's limits (offsets_file.h), in the page's units.
constexpr auto kMaxAbsDriftPpt = static_cast<int64_t>(kMaxAbsDrift * 1e12);
constexpr auto kMaxAbsRecordedOffsetNs = static_cast<int64_t>(kMaxAbsOffsetNs);

// The stat ids of one plane, found once.
struct MappingStatIds {
  std::optional<int64_t> ref, offset, drift, uncertainty, growth, valid_until, read;
};

MappingStatIds FindIds(const xspace::XPlane& plane) {
  return {FindStatMetadataId(plane, kRecordedRefStat),         FindStatMetadataId(plane, kRecordedOffsetStat),
          FindStatMetadataId(plane, kRecordedDriftStat),       FindStatMetadataId(plane, kRecordedUncertaintyStat),
          FindStatMetadataId(plane, kRecordedGrowthStat),      FindStatMetadataId(plane, kRecordedValidUntilStat),
          FindStatMetadataId(plane, kRecordedReadStat)};
}

std::optional<int64_t> EventStat(const xspace::XEvent& e, const std::optional<int64_t>& id) {
  if (!id) return std::nullopt;
  for (const xspace::XStat& s : e.stats()) {
    if (s.metadata_id() == *id && s.value_case() == xspace::XStat::kInt64Value) return s.int64_value();
  }
  return std::nullopt;
}

// One mapping from its fields; nullopt when one of the four that make it is missing.
std::optional<RecordedMapping> Make(std::optional<int64_t> ref, std::optional<int64_t> offset,
                                    std::optional<int64_t> drift, std::optional<int64_t> uncertainty,
                                    std::optional<int64_t> growth, std::optional<int64_t> valid_until) {
  if (!ref || !offset || !drift || !uncertainty) return std::nullopt;
  return RecordedMapping{.ref_ns = *ref,
                         .offset_ns = *offset,
                         .drift_ppt = *drift,
                         .uncertainty_ns = *uncertainty,
                         .growth_ppt = growth.value_or(0),
                         .valid_until_ns = valid_until.value_or(*ref)};
}

bool Sane(const RecordedMapping& m) {
  return m.uncertainty_ns >= 0 && m.growth_ppt >= 0 && std::llabs(m.drift_ppt) <= kMaxAbsDriftPpt &&
         std::llabs(m.offset_ns) <= kMaxAbsRecordedOffsetNs;
}

// Every mapping of the plane's line; false when an event lacks a field.
bool ReadLine(const xspace::XPlane& plane, std::vector<RecordedMapping>* out) {
  const MappingStatIds ids = FindIds(plane);
  for (const xspace::XLine& line : plane.lines()) {
    if (line.name() != kRecordedMappingLine) continue;
    for (const xspace::XEvent& e : line.events()) {
      const auto m = Make(EventStat(e, ids.ref), EventStat(e, ids.offset), EventStat(e, ids.drift),
                          EventStat(e, ids.uncertainty), EventStat(e, ids.growth), EventStat(e, ids.valid_until));
      if (!m) return false;
      out->push_back(*m);
      out->back().read_ns = EventStat(e, ids.read).value_or(0);
    }
  }
  return true;
}

}  // namespace

std::array<std::pair<const char*, int64_t>, 6> RecordedMappingStats(const RecordedMapping& m) {
  return {{{kRecordedRefStat, m.ref_ns},
           {kRecordedOffsetStat, m.offset_ns},
           {kRecordedDriftStat, m.drift_ppt},
           {kRecordedUncertaintyStat, m.uncertainty_ns},
           {kRecordedGrowthStat, m.growth_ppt},
           {kRecordedValidUntilStat, m.valid_until_ns}}};
}

std::optional<RecordedMappings> ReadRecordedMappings(const xspace::XSpace& space, std::string* why) {
  std::string ignored;
  if (why == nullptr) why = &ignored;
  const xspace::XPlane* plane = FindPlane(space, kRecordedMappingPlane);
  if (plane == nullptr) {
    *why = "no collector clock plane (" + std::string(kRecordedMappingPlane) + ")";
    return std::nullopt;
  }
  RecordedMappings out;
  if (!ReadLine(*plane, &out.mappings)) {
    *why = "a recorded clock page mapping lacks its offset, drift, uncertainty or instant";
    return std::nullopt;
  }
  if (out.mappings.empty()) {
    // Written before the collector kept every mapping: the last one alone.
    const auto last = Make(GetPlaneStatInt64(*plane, kRecordedRefStat), GetPlaneStatInt64(*plane, kRecordedOffsetStat),
                           GetPlaneStatInt64(*plane, kRecordedDriftStat),
                           GetPlaneStatInt64(*plane, kRecordedUncertaintyStat),
                           GetPlaneStatInt64(*plane, kRecordedGrowthStat),
                           GetPlaneStatInt64(*plane, kRecordedValidUntilStat));
    if (last) out.mappings.push_back(*last);
  }
  if (out.mappings.empty()) {
    *why = "the collector recorded no clock page mapping (no agent, or its page was not valid)";
    return std::nullopt;
  }
  if (!std::all_of(out.mappings.begin(), out.mappings.end(), Sane)) {
    *why = "a recorded clock page mapping is not sane (negative bound, drift over 25 % or offset over a day)";
    return std::nullopt;
  }
  // By instant, the last of each instant kept (a re-read page repeats one).
  std::stable_sort(out.mappings.begin(), out.mappings.end(),
                   [](const RecordedMapping& a, const RecordedMapping& b) { return a.ref_ns < b.ref_ns; });
  std::vector<RecordedMapping> unique;
  for (const RecordedMapping& m : out.mappings) {
    if (!unique.empty() && unique.back().ref_ns == m.ref_ns) {
      unique.back() = m;
    } else {
      unique.push_back(m);
    }
  }
  out.mappings = std::move(unique);
  const int64_t node = GetPlaneStatInt64(*plane, kRecordedNodeStat).value_or(0);
  out.node_id = node > 0 && node <= UINT32_MAX ? static_cast<uint32_t>(node) : 0;
  return out;
}

bool RecordedCorrection(const RecordedMappings& recorded, const std::string& name, ClusterCorrection* out,
                        std::string* error) {
  OffsetsInput input;
  input.reference = ClockReference{.is_mean = false, .node = 0};  // the page does not say which
  input.files = {name};
  uint32_t line = 0;
  for (const RecordedMapping& m : recorded.mappings) {
    OffsetRecord r;
    r.node = recorded.node_id;
    // The page: cluster = host + offset + D·(host − ref). The node's offset
    // against the cluster is −offset at T = ref + offset, and its drift
    // d(host − cluster)/d(cluster) = −D/(1 + D).
    r.t_ns = m.ref_ns + m.offset_ns;
    r.reachable = true;
    r.offset_ns = -static_cast<double>(m.offset_ns);
    const double d = static_cast<double>(m.drift_ppt) * 1e-12;
    r.drift = -d / (1.0 + d);
    r.uncertainty_ns = static_cast<double>(m.uncertainty_ns);
    r.line_number = ++line;
    input.records.push_back(r);
  }
  input.lines_read = line;
  // By instant, as the correction expects (the reader's order is by host
  // instant; where the two disagree, the correction says so); an instant
  // the page published again (a re-solve) counts once, as last published.
  input.lines_replaced = MergeSameInstants(&input.records);
  return ClusterCorrection::FromOffsets(input, out, error);
}

}  // namespace chronolink::trace
