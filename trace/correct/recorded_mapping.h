// A host's own record of its node's clock → cluster mapping, as the GPU
// collector copied it from the agent's clock page while it ran
// (collector/export/clock_plane.h writes it; docs/collector.md). It lets a
// run be aligned without the leader's offsets.jsonl: one linear mapping per
// host (the page's offset and drift at its reference instant), its bound
// growing with the distance from that instant as the page says.
//
// Offsets files are the better source when there are any: they hold the
// solution at every instant of the run, this only the one the page held
// when the collector exported. Immutable; const calls are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "proto/xplane.pb.h"
#include "trace/align/host_clock_map.h"

namespace chronolink::trace {

// The format contract between the collector and the trace tools.
inline constexpr char kRecordedMappingPlane[] = "/host:chronolink-gpu-clock";
inline constexpr char kRecordedRefStat[] = "cluster_ref_ns";            // host clock, ns
inline constexpr char kRecordedOffsetStat[] = "cluster_offset_ns";      // cluster − host at ref
inline constexpr char kRecordedDriftStat[] = "cluster_drift_ppt";       // d(cluster − host)/d(host), 1e-12
inline constexpr char kRecordedUncertaintyStat[] = "cluster_uncertainty_ns";   // at ref
inline constexpr char kRecordedGrowthStat[] = "cluster_uncertainty_growth_ppt";  // per ns from ref, 1e-12
inline constexpr char kRecordedValidUntilStat[] = "cluster_valid_until_ns";      // host clock, ns
inline constexpr char kRecordedNodeStat[] = "cluster_node_id";                   // the page's node

struct RecordedMapping {
  int64_t ref_ns = 0;
  int64_t offset_ns = 0;
  int64_t drift_ppt = 0;
  int64_t uncertainty_ns = 0;
  int64_t growth_ppt = 0;
  int64_t valid_until_ns = 0;
  uint32_t node_id = 0;  // 0: not recorded
};

// The mapping a space carries; nullopt with *why when it has none (no
// collector plane, or the collector saw no valid clock page) or when it
// is not sane (negative uncertainty or growth, |drift| over 1000 ppm).
// `why` may be null.
std::optional<RecordedMapping> ReadRecordedMapping(const xspace::XSpace& space, std::string* why);

class RecordedMappingClockMap : public HostClockMap {
 public:
  RecordedMappingClockMap(const RecordedMapping& m, std::string host) : m_(m), host_(std::move(host)) {}

  // cluster = host + offset + drift·(host − ref), in integers; the bound is
  // three of the page's sigmas (its uncertainty plus its growth). Quality
  // kSolved from ref back to the start and up to valid_until; beyond
  // valid_until kExtrapolated, beyond_span_ns saying how far.
  std::optional<MappedInstant> Map(const TraceInstant& host_time) const override;
  std::string Describe() const override;

 private:
  RecordedMapping m_;
  std::string host_;
};

}  // namespace chronolink::trace
