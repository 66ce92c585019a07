#include "trace/correct/clock_correction.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace chronolink::trace {

namespace {

constexpr int64_t kMaxKnotSpacingNs = 100LL * 86'400'000'000'000LL;  // 100 days

std::vector<int64_t> DistinctInstants(const std::vector<OffsetRecord>& records) {
  std::vector<int64_t> instants;
  instants.reserve(records.size());
  for (const OffsetRecord& r : records) instants.push_back(r.t_ns);
  std::sort(instants.begin(), instants.end());
  instants.erase(std::unique(instants.begin(), instants.end()), instants.end());
  return instants;
}

// The solve period: the median spacing, robust to a few missed instants.
int64_t MedianSpacing(const std::vector<int64_t>& instants) {
  if (instants.size() < 2) return 0;
  std::vector<int64_t> spacing;
  spacing.reserve(instants.size() - 1);
  for (size_t i = 1; i < instants.size(); ++i) spacing.push_back(instants[i] - instants[i - 1]);
  std::nth_element(spacing.begin(), spacing.begin() + spacing.size() / 2, spacing.end());
  return spacing[spacing.size() / 2];
}

bool CheckOptions(const CorrectionOptions& o, std::string* error) {
  if (!(o.coverage_factor >= 0) || !(o.drift_floor >= 0) || !(o.gap_periods > 0) || !(o.step_tolerance_ns >= 0) ||
      !(o.stalled_sigma_factor >= 0)) {
    *error =
        "correction options: coverage_factor, drift_floor, step_tolerance_ns and stalled_sigma_factor must "
        "be >= 0 and gap_periods > 0";
    return false;
  }
  return true;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

}  // namespace

bool ClusterCorrection::FromOffsets(const OffsetsInput& solved, ClusterCorrection* out, std::string* error,
                                    const CorrectionOptions& options, const EdgeCoverage* edges,
                                    const Timebases* timebases) {
  if (!CheckOptions(options, error)) return false;
  if (solved.records.empty()) {
    *error = "no offsets to build a correction from (" + JoinNames(solved.files) + ")";
    return false;
  }
  if (timebases != nullptr && solved.reference.is_mean) {
    *error = "following the clocks' discipline (timebase files) needs a named reference: the offsets are "
             "against the mean of all nodes, whose REALTIME shape is every node's at once";
    return false;
  }
  ClusterCorrection c;
  c.options_ = options;
  const std::vector<int64_t> instants = DistinctInstants(solved.records);
  OffsetsInput input = solved;
  CorrectionSource& s = c.source_;
  s.offsets_files = input.files;
  if (edges != nullptr) s.edges_files = edges->files();
  s.reference = input.reference;
  s.instants = instants.size();
  s.first_t_ns = instants.front();
  s.last_t_ns = instants.back();
  s.period_ns = MedianSpacing(instants);
  s.lines_read = input.lines_read;
  s.solutions_read = input.solutions_read;
  s.lines_replaced = input.lines_replaced;
  s.lines_skipped = input.lines_skipped;
  // Before the discipline is followed between solved instants: across a
  // stalled one it is followed from the instants on either side.
  s.stalled_set_aside =
      SetAsideStalledInstants(&input.records, StalledInstantOptions{.sigma_factor = options.stalled_sigma_factor});
  if (timebases != nullptr) {
    s.timebase_files = timebases->files;
    input.records = FollowDiscipline(input.records, solved.reference, timebases->nodes, &s.discipline);
  }
  const std::vector<OffsetRecord>& records = input.records;
  for (size_t begin = 0; begin < records.size();) {
    size_t end = begin;
    while (end < records.size() && records[end].node == records[begin].node) ++end;
    if (!c.AddNode(input, begin, end, instants, edges, error)) return false;
    begin = end;
  }
  *out = std::move(c);
  return true;
}

// records[begin, end): one node, sorted by t_ns, one per instant.
bool ClusterCorrection::AddNode(const OffsetsInput& input, size_t begin, size_t end,
                                const std::vector<int64_t>& instants, const EdgeCoverage* edges,
                                std::string* error) {
  const std::vector<OffsetRecord>& records = input.records;
  const uint32_t id = records[begin].node;
  const bool is_reference = !source_.reference.is_mean && source_.reference.node == id;
  NodeCorrection n(id, is_reference, options_);
  const OffsetRecord* previous = nullptr;
  for (size_t i = begin; i < end; ++i) {
    const OffsetRecord& r = records[i];
    if (!r.reachable) {
      n.unreachable_t_ns_.push_back(r.t_ns);
      continue;
    }
    CorrectionKnot k{.t_ns = r.t_ns, .node = {}, .offset_ps = std::llround(r.offset_ns * 1000.0), .drift = r.drift,
                     .sigma_ns = r.uncertainty_ns, .between_instants = r.between_instants};
    const auto node_time = AddPs({r.t_ns, 0}, k.offset_ps);
    if (!node_time) {
      *error = input.Where(r) + ": t_ns + offset_ns of node " + std::to_string(id) + " overflows int64";
      return false;
    }
    k.node = *node_time;
    if (previous != nullptr) {
      const CorrectionKnot& last = n.knots_.back();
      if (!(last.node < k.node)) {
        *error = input.Where(r) + ": node " + std::to_string(id) + "'s clock goes back between solved instants: " +
                 "at t_ns " + std::to_string(last.t_ns) + " (" + input.Where(*previous) + ") it read " +
                 std::to_string(last.node.ns) + " ns, at t_ns " + std::to_string(k.t_ns) + " it reads " +
                 std::to_string(k.node.ns) + " ns; a correction through both would reorder events " +
                 "(a clock step the solve did not see?)";
        return false;
      }
      int64_t spacing = 0;
      if (__builtin_sub_overflow(r.t_ns, last.t_ns, &spacing) || spacing > kMaxKnotSpacingNs ||
          !DiffPs(k.node, last.node)) {
        *error = input.Where(r) + ": node " + std::to_string(id) + "'s solved instants at t_ns " +
                 std::to_string(last.t_ns) + " and " + std::to_string(k.t_ns) + " are more than 100 days apart";
        return false;
      }
    }
    n.knots_.push_back(k);
    previous = &r;
  }
  // A segment is a gap when an instant lies between the node's solved
  // instants around it (the node was unreachable or absent there) or when
  // the instants themselves are sparse; knots between solved instants (a
  // daemon's bends) do not change that.
  const size_t count = n.knots_.size();
  std::vector<size_t> solved_after(count, count - 1);  // the first solved knot at or after each
  for (size_t k = count; k-- > 0;) {
    solved_after[k] = (!n.knots_[k].between_instants || k + 1 == count) ? k : solved_after[k + 1];
  }
  std::vector<bool> gap_after;
  size_t solved_before = 0;  // the last solved knot at or before k
  for (size_t k = 0; k + 1 < count; ++k) {
    if (!n.knots_[k].between_instants) solved_before = k;
    const CorrectionKnot& a = n.knots_[solved_before];
    const CorrectionKnot& b = n.knots_[solved_after[k + 1]];
    const auto at = [&](int64_t t) { return std::lower_bound(instants.begin(), instants.end(), t); };
    const bool missed = at(b.t_ns) - at(a.t_ns) > 1;
    const double dt = static_cast<double>(b.t_ns - a.t_ns);
    const bool sparse = source_.period_ns > 0 && dt > options_.gap_periods * static_cast<double>(source_.period_ns);
    gap_after.push_back(missed || sparse);
  }
  if (edges != nullptr && !is_reference) n.holes_ = edges->Holes(id);
  n.Finish(gap_after);
  nodes_.emplace(id, std::move(n));
  return true;
}

const NodeCorrection* ClusterCorrection::Node(uint32_t id) const {
  const auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

std::vector<uint32_t> ClusterCorrection::Nodes() const {
  std::vector<uint32_t> ids;
  ids.reserve(nodes_.size());
  for (const auto& [id, n] : nodes_) ids.push_back(id);
  return ids;
}

std::string ClusterCorrection::Describe() const {
  const CorrectionSource& s = source_;
  size_t never = 0;
  for (const auto& [id, n] : nodes_) never += n.reachable() ? 0 : 1;
  char numbers[160];
  std::snprintf(numbers, sizeof numbers, "%zu instants every %.3f s over %.1f s", s.instants,
                static_cast<double>(s.period_ns) / 1e9, static_cast<double>(s.last_t_ns - s.first_t_ns) / 1e9);
  std::string text = "offsets " + JoinNames(s.offsets_files);
  if (!s.edges_files.empty()) text += " (edges " + JoinNames(s.edges_files) + ")";
  text += ": reference " + s.reference.ToString() + ", " + numbers + " from t_ns " + std::to_string(s.first_t_ns) +
          ", " + std::to_string(nodes_.size()) + " nodes";
  if (never > 0) text += " (" + std::to_string(never) + " never reachable)";
  if (s.stalled_set_aside > 0) {
    char factor[32];
    std::snprintf(factor, sizeof factor, "%g", options_.stalled_sigma_factor);
    text += "; " + std::to_string(s.stalled_set_aside) + " solved instant(s) set aside as a stalled agent's " +
            "(sigma over " + factor + "x the instants' around them): mapped as missed";
  }
  if (!s.timebase_files.empty()) {
    text += "; following the clocks' discipline (timebases " + JoinNames(s.timebase_files) + "): " +
            std::to_string(s.discipline.intervals_followed) + " intervals, " +
            std::to_string(s.discipline.instants_added) + " instants between solved ones";
    if (s.discipline.intervals_uncovered > 0) {
      text += ", " + std::to_string(s.discipline.intervals_uncovered) + " a timebase did not cover";
    }
  }
  return text;
}

nlohmann::json ClusterCorrection::ProvenanceJson() const {
  const CorrectionSource& s = source_;
  nlohmann::json j;
  j["offsets_files"] = s.offsets_files;
  j["edges_files"] = s.edges_files;
  j["reference"] = s.reference.is_mean ? nlohmann::json("mean") : nlohmann::json(s.reference.node);
  j["instants"] = s.instants;
  j["first_t_ns"] = s.first_t_ns;
  j["last_t_ns"] = s.last_t_ns;
  j["period_ns"] = s.period_ns;
  j["lines_read"] = s.lines_read;
  j["solutions_read"] = s.solutions_read;
  j["lines_replaced"] = s.lines_replaced;
  j["lines_skipped"] = s.lines_skipped;
  j["coverage_factor"] = options_.coverage_factor;
  j["drift_floor"] = options_.drift_floor;
  j["stalled_sigma_factor"] = options_.stalled_sigma_factor;
  j["stalled_set_aside"] = s.stalled_set_aside;
  j["nodes"] = Nodes();
  if (!s.timebase_files.empty()) {
    j["timebase_files"] = s.timebase_files;
    j["discipline"] = {{"intervals_followed", s.discipline.intervals_followed},
                       {"intervals_uncovered", s.discipline.intervals_uncovered},
                       {"instants_added", s.discipline.instants_added}};
  }
  return j;
}

}  // namespace chronolink::trace
