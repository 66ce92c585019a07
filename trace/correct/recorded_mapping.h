// A host's own record of its node's clock → cluster mapping, as the GPU
// collector copied it from the agent's clock page while it ran
// (collector/export/clock_plane.h writes it; docs/collector.md). It lets a
// run be aligned without the leader's offsets.jsonl: every mapping the page
// showed (one per solved instant) is a solved instant of the host's node,
// and the host's correction is built from them exactly as from offsets.jsonl
// (trace/correct/clock_correction.h): interpolated between them, widened
// across gaps, extrapolated beyond them at the drift floor.
//
// Files written before the collector kept every mapping hold only the last
// one (the plane's stats): a series of one, extrapolated both ways.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "proto/xplane.pb.h"
#include "trace/correct/clock_correction.h"

namespace chronolink::trace {

// The format contract between the collector and the trace tools. The plane
// carries the last mapping as plane stats, and every mapping as an event of
// kRecordedMappingLine whose stats are the same names, placed where the
// collector first read it (kRecordedReadStat: within the run, where its
// reference instant may lie before it).
inline constexpr char kRecordedMappingPlane[] = "/host:chronolink-gpu-clock";
inline constexpr char kRecordedMappingLine[] = "cluster clock mappings";
inline constexpr char kRecordedMappingEvent[] = "mapping";
inline constexpr char kRecordedRefStat[] = "cluster_ref_ns";            // host clock, ns
inline constexpr char kRecordedOffsetStat[] = "cluster_offset_ns";      // cluster − host at ref
inline constexpr char kRecordedDriftStat[] = "cluster_drift_ppt";       // d(cluster − host)/d(host), 1e-12
inline constexpr char kRecordedUncertaintyStat[] = "cluster_uncertainty_ns";   // one sigma at ref
inline constexpr char kRecordedGrowthStat[] = "cluster_uncertainty_growth_ppt";  // per ns from ref, 1e-12
inline constexpr char kRecordedValidUntilStat[] = "cluster_valid_until_ns";      // host clock, ns
inline constexpr char kRecordedNodeStat[] = "cluster_node_id";                   // the page's node (plane)
inline constexpr char kRecordedReadStat[] = "cluster_read_ns";                   // host clock, ns (line)

struct RecordedMapping {
  int64_t ref_ns = 0;
  int64_t offset_ns = 0;
  int64_t drift_ppt = 0;
  int64_t uncertainty_ns = 0;
  int64_t growth_ppt = 0;
  int64_t valid_until_ns = 0;
  int64_t read_ns = 0;  // when the collector first read it, host clock (0: not recorded)
};

// A mapping's fields as the stats it is written as (the names above; its
// read instant apart), in one place for the writer and its tests.
std::array<std::pair<const char*, int64_t>, 6> RecordedMappingStats(const RecordedMapping& m);

struct RecordedMappings {
  uint32_t node_id = 0;  // 0: not recorded
  std::vector<RecordedMapping> mappings;  // by ref_ns, one per ref_ns
};

// The mappings a space carries; nullopt with *why when it has none (no
// collector plane, or the collector saw no valid clock page) or when one is
// not sane (negative uncertainty or growth, |drift| over 25 %, an
// offset over a day). `why` may be null.
std::optional<RecordedMappings> ReadRecordedMappings(const xspace::XSpace& space, std::string* why);

// The host's correction from its mappings: one solved instant per mapping
// (T = ref + offset on the cluster clock, the node's offset −offset there).
// False with *error when they cannot make a monotonic map; `name` (the
// file) stands in its messages, "name:K" for the K-th mapping.
bool RecordedCorrection(const RecordedMappings& recorded, const std::string& name, ClusterCorrection* out,
                        std::string* error);

}  // namespace chronolink::trace
