#include "collector/clock/cluster_mapping_series.h"

#include <vector>

namespace chronolink::collector {

namespace {
// The agent republishes its page every 100 ms between solutions, following
// its clock's discipline (docs/formats.md "Clock-mapping page"): a
// republication of the same solution on the same line (a clock nothing
// disciplines, or between two of the daemon's updates) adds nothing.
bool ContinuesLine(const trace::RecordedMapping& last, const ClockMapping& next) {
  if (last.valid_until_ns != next.valid_until_ns || last.drift_ppt != next.drift_ppt) return false;
  const int64_t apart = next.ToCluster(last.ref_ns) - (last.ref_ns + last.offset_ns);
  return apart >= -1 && apart <= 1;
}
}  // namespace

void ClusterMappingSeries::Add(const ClockMapping& m, int64_t read_ns) {
  if (!recorded_.mappings.empty() && recorded_.node_id != m.node_id) {
    discarded_ += recorded_.mappings.size();
    recorded_.mappings.clear();
  }
  recorded_.node_id = m.node_id;
  const trace::RecordedMapping r{.ref_ns = m.local_ref_ns,
                                 .offset_ns = m.offset_ns,
                                 .drift_ppt = m.drift_ppt,
                                 .uncertainty_ns = m.uncertainty_ns,
                                 .growth_ppt = m.uncertainty_growth_ppt,
                                 .valid_until_ns = m.valid_until_ns,
                                 .read_ns = read_ns};
  if (!recorded_.mappings.empty() && recorded_.mappings.back().ref_ns == r.ref_ns) {
    const int64_t first_read = recorded_.mappings.back().read_ns;
    recorded_.mappings.back() = r;
    recorded_.mappings.back().read_ns = first_read;
    return;
  }
  if (!recorded_.mappings.empty() && ContinuesLine(recorded_.mappings.back(), m)) return;
  if (recorded_.mappings.size() >= capacity_) Thin();
  recorded_.mappings.push_back(r);
}

void ClusterMappingSeries::Thin() {
  std::vector<trace::RecordedMapping>& v = recorded_.mappings;
  std::vector<trace::RecordedMapping> kept;
  kept.reserve(v.size() / 2 + 1);
  for (size_t i = 0; i + 1 < v.size(); i += 2) kept.push_back(v[i]);
  kept.push_back(v.back());
  thinned_ += v.size() - kept.size();
  v = std::move(kept);
}

}  // namespace chronolink::collector
