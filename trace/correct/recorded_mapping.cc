#include "trace/correct/recorded_mapping.h"

#include <cstdlib>

#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

constexpr int64_t kPsPerNs = 1000;
constexpr __int128 kPpt = 1'000'000'000'000;
// The page states one sigma; the bound is three, as for offsets.jsonl
// (CorrectionOptions::coverage_factor, docs/trace-correction.md).
constexpr double kCoverageFactor = 3.0;

}  // namespace

std::optional<RecordedMapping> ReadRecordedMapping(const xspace::XSpace& space, std::string* why) {
  std::string ignored;
  if (why == nullptr) why = &ignored;
  const xspace::XPlane* plane = FindPlane(space, kRecordedMappingPlane);
  if (plane == nullptr) {
    *why = "no collector clock plane (" + std::string(kRecordedMappingPlane) + ")";
    return std::nullopt;
  }
  const auto ref = GetPlaneStatInt64(*plane, kRecordedRefStat);
  const auto offset = GetPlaneStatInt64(*plane, kRecordedOffsetStat);
  const auto drift = GetPlaneStatInt64(*plane, kRecordedDriftStat);
  const auto uncertainty = GetPlaneStatInt64(*plane, kRecordedUncertaintyStat);
  if (!ref || !offset || !drift || !uncertainty) {
    *why = "the collector recorded no clock page mapping (no agent, or its page was not valid)";
    return std::nullopt;
  }
  RecordedMapping m{*ref, *offset, *drift, *uncertainty,
                    GetPlaneStatInt64(*plane, kRecordedGrowthStat).value_or(0),
                    GetPlaneStatInt64(*plane, kRecordedValidUntilStat).value_or(*ref)};
  const int64_t node = GetPlaneStatInt64(*plane, kRecordedNodeStat).value_or(0);
  m.node_id = node > 0 && node <= UINT32_MAX ? static_cast<uint32_t>(node) : 0;
  if (m.uncertainty_ns < 0 || m.growth_ppt < 0 || std::llabs(m.drift_ppt) > 1'000'000'000 ||
      std::llabs(m.offset_ns) > 1'000'000'000'000'000LL) {
    *why = "the recorded clock page mapping is not sane (negative bound, or drift over 1000 ppm)";
    return std::nullopt;
  }
  return m;
}

std::optional<MappedInstant> RecordedMappingClockMap::Map(const TraceInstant& host_time) const {
  // In picoseconds relative to ref: dt fits int64 for ±106 days.
  const __int128 dt_ps = (static_cast<__int128>(host_time.ns) - m_.ref_ns) * kPsPerNs + host_time.ps;
  const __int128 correction_ps = static_cast<__int128>(m_.offset_ns) * kPsPerNs + dt_ps * m_.drift_ppt / kPpt;
  if (correction_ps > INT64_MAX || correction_ps < INT64_MIN) return std::nullopt;
  const auto cluster = AddPs(host_time, static_cast<int64_t>(correction_ps));
  if (!cluster) return std::nullopt;
  MappedInstant out;
  out.cluster = *cluster;
  out.correction_ns = static_cast<double>(correction_ps) / kPsPerNs;
  const __int128 abs_dt_ps = dt_ps < 0 ? -dt_ps : dt_ps;
  out.uncertainty_ns = kCoverageFactor * (static_cast<double>(m_.uncertainty_ns) +
                                           static_cast<double>(abs_dt_ps * m_.growth_ppt / kPpt) / kPsPerNs);
  if (host_time.ns > m_.valid_until_ns) {
    out.quality = MapQuality::kExtrapolated;
    out.beyond_span_ns = host_time.ns - m_.valid_until_ns;
  }
  return out;
}

std::string RecordedMappingClockMap::Describe() const {
  return "host " + host_ + ": the clock page mapping its collector recorded (offset " +
         std::to_string(m_.offset_ns) + " ns at host " + std::to_string(m_.ref_ns) + " ns, drift " +
         std::to_string(static_cast<double>(m_.drift_ppt) / 1e6) + " ppm)";
}

}  // namespace chronolink::trace
