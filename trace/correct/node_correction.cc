#include "trace/correct/node_correction.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace chronolink::trace {

const char* ToString(CorrectionQuality quality) {
  switch (quality) {
    case CorrectionQuality::kSolved:
      return "solved";
    case CorrectionQuality::kGap:
      return "gap";
    case CorrectionQuality::kExtrapolated:
      return "extrapolated";
    case CorrectionQuality::kUnreachable:
      return "unreachable";
  }
  return "?";
}

NodeCorrection::Segment NodeCorrection::MakeSegment(size_t k, bool gap) const {
  const CorrectionKnot& a = knots_[k];
  const CorrectionKnot& b = knots_[k + 1];
  Segment s;
  s.length_ps = *DiffPs(b.node, a.node);  // checked to fit and be positive by ClusterCorrection
  const int64_t offset_change_ps = b.offset_ps - a.offset_ps;
  s.slope = static_cast<double>(offset_change_ps) / static_cast<double>(s.length_ps);
  s.inverse_length = 1.0 / static_cast<double>(s.length_ps);
  s.dt_ns = static_cast<double>(b.t_ns - a.t_ns);
  const double change_ns = static_cast<double>(offset_change_ps) / 1000.0;
  s.mismatch_left_ns = std::fabs(change_ns - a.drift * s.dt_ns);
  s.mismatch_right_ns = std::fabs(change_ns - b.drift * s.dt_ns);
  s.drift_uncertainty =
      is_reference_ ? 0.0 : std::max(options_.drift_floor, std::fabs(b.drift - a.drift));
  s.gap = gap;
  // A frequency that moved from d_k to d_{k+1} changes the phase by a chord
  // drift between the two; more than that, beyond the noise, is a jump.
  const double chord = change_ns / s.dt_ns;
  const double excess_ns =
      std::max({0.0, chord - std::max(a.drift, b.drift), std::min(a.drift, b.drift) - chord}) * s.dt_ns;
  const double noise_ns = options_.coverage_factor * (a.sigma_ns + b.sigma_ns) +
                          options_.drift_floor * s.dt_ns + options_.step_tolerance_ns;
  s.jump = !is_reference_ && excess_ns > noise_ns;
  s.bound = InterpolationBound{.sigma_left_ns = a.sigma_ns,
                               .sigma_right_ns = b.sigma_ns,
                               .inverse_length = s.inverse_length,
                               .mismatch_left_ns = s.mismatch_left_ns,
                               .mismatch_right_ns = s.mismatch_right_ns,
                               .dt_ns = s.dt_ns,
                               .drift_uncertainty = s.drift_uncertainty,
                               .coverage_factor = options_.coverage_factor,
                               .rounding_ns = Rounding(),
                               .jump = s.jump,
                               .gap = s.gap};
  return s;
}

void NodeCorrection::Finish(const std::vector<bool>& gap_after) {
  segments_.clear();
  knot_ns_.clear();
  for (const CorrectionKnot& k : knots_) knot_ns_.push_back(k.node.ns);
  for (size_t k = 0; k + 1 < knots_.size(); ++k) segments_.push_back(MakeSegment(k, gap_after[k]));
}

double NodeCorrection::ExtrapolationDriftUncertainty(size_t knot) const {
  if (is_reference_) return 0.0;
  if (knots_.size() < 2) return options_.drift_floor;
  const size_t neighbour = knot == 0 ? 1 : knot - 1;
  return std::max(options_.drift_floor, std::fabs(knots_[knot].drift - knots_[neighbour].drift));
}

bool NodeCorrection::KnotsBefore(const TraceInstant& x, size_t i) const {
  return i <= knots_.size() && (i == 0 || !(x < knots_[i - 1].node)) && (i == knots_.size() || x < knots_[i].node);
}

size_t NodeCorrection::Locate(const TraceInstant& x, size_t* hint) const {
  if (hint != nullptr) {
    if (KnotsBefore(x, *hint)) return *hint;
    if (KnotsBefore(x, *hint + 1)) return ++*hint;
  }
  // The knots at or before x: search the whole ns (a dense array), then
  // step back over a knot in the same ns but later in ps.
  size_t i = static_cast<size_t>(std::upper_bound(knot_ns_.begin(), knot_ns_.end(), x.ns) - knot_ns_.begin());
  while (i > 0 && x < knots_[i - 1].node) --i;
  if (hint != nullptr) *hint = i;
  return i;
}

NodeCorrection::Piece NodeCorrection::PieceAt(const TraceInstant& x) const {
  constexpr TraceInstant kFirst{std::numeric_limits<int64_t>::min(), 0};
  constexpr TraceInstant kLast{std::numeric_limits<int64_t>::max(), 999};  // exclusive: the last ps never covered
  const size_t i = knots_.empty() ? 0 : Locate(x, nullptr);
  return Piece{.from = i == 0 ? kFirst : knots_[i - 1].node,
               .to = i == knots_.size() ? kLast : knots_[i].node,
               .knots_before = i};
}

std::optional<CorrectedInstant> NodeCorrection::ToCluster(const TraceInstant& x, size_t* hint) const {
  return ToClusterIn(knots_.empty() ? 0 : Locate(x, hint), x);
}

std::optional<CorrectedInstant> NodeCorrection::ToClusterIn(size_t i, const TraceInstant& x) const {
  if (knots_.empty()) {
    return CorrectedInstant{.cluster = x,
                            .uncertainty_ns = std::numeric_limits<double>::infinity(),
                            .quality = CorrectionQuality::kUnreachable};
  }
  if (i == 0) return Extrapolate(0, LinearAt(i), x);
  if (i == knots_.size()) return Extrapolate(i - 1, LinearAt(i), x);
  return Interpolate(i - 1, LinearAt(i), x);
}

LinearClockPiece NodeCorrection::LinearAt(size_t i) const {
  if (i == 0 || i == knots_.size()) {
    // d o / d x for a constant drift d(node − cluster)/d(cluster).
    const CorrectionKnot& e = knots_[i == 0 ? 0 : i - 1];
    return {.anchor = e.node, .offset_ps = e.offset_ps, .slope = e.drift / (1 + e.drift)};
  }
  return {.anchor = knots_[i - 1].node, .offset_ps = knots_[i - 1].offset_ps, .slope = segments_[i - 1].slope};
}

std::optional<CorrectedInstant> NodeCorrection::Interpolate(size_t k, const LinearClockPiece& line,
                                                            const TraceInstant& x) const {
  const Segment& s = segments_[k];
  int64_t offset_ps = 0, d = 0;  // 0 <= d < length_ps
  const auto cluster = line.Map(x, &offset_ps, &d);
  if (!cluster) return std::nullopt;
  bool widened = false;
  const double uncertainty_ns = s.bound.At(d, &widened);  // sigma, model and gap terms (trace_time.h)
  CorrectedInstant out{.cluster = *cluster,
                       .uncertainty_ns = uncertainty_ns,
                       .quality = widened ? CorrectionQuality::kGap : CorrectionQuality::kSolved,
                       .beyond_span_ns = 0,
                       .correction_ps = -offset_ps};
  WidenInHole(x, s.drift_uncertainty, &out);
  return out;
}

bool NodeCorrection::InterpolationBoundAt(size_t knots_before, InterpolationBound* bound) const {
  if (knots_before == 0 || knots_before >= knots_.size()) return false;
  // WidenInHole widens x when some hole has start_ns <= x.ns < end_ns; the
  // piece's instants have from.ns <= x.ns <= to.ns.
  const int64_t from_ns = knots_[knots_before - 1].node.ns, to_ns = knots_[knots_before].node.ns;
  for (const NodeClockInterval& hole : holes_) {
    if (hole.start_ns <= to_ns && hole.end_ns > from_ns) return false;
  }
  *bound = segments_[knots_before - 1].bound;
  return true;
}

std::optional<CorrectedInstant> NodeCorrection::Extrapolate(size_t k, const LinearClockPiece& line,
                                                            const TraceInstant& x) const {
  const CorrectionKnot& e = knots_[k];
  int64_t offset_ps = 0, d = 0;
  const auto cluster = line.Map(x, &offset_ps, &d);
  if (!cluster) return std::nullopt;
  const uint64_t distance_ps = d < 0 ? 0 - static_cast<uint64_t>(d) : static_cast<uint64_t>(d);
  const int64_t distance_ns = static_cast<int64_t>(distance_ps / 1000);
  const double drift_uncertainty = ExtrapolationDriftUncertainty(k);
  CorrectedInstant out{
      .cluster = *cluster,
      .uncertainty_ns = options_.coverage_factor * e.sigma_ns +
                        drift_uncertainty * static_cast<double>(distance_ps) / 1000.0 + Rounding(),
      .quality = distance_ps == 0 ? CorrectionQuality::kSolved : CorrectionQuality::kExtrapolated,
      .beyond_span_ns = distance_ns,
      .correction_ps = -offset_ps};
  WidenInHole(x, drift_uncertainty, &out);
  return out;
}

// In a stretch without a usable edge the solver carried older windows'
// estimates over: the offset may have wandered by drift uncertainty × the
// distance to the nearest covered instant.
void NodeCorrection::WidenInHole(const TraceInstant& x, double drift_uncertainty,
                                 CorrectedInstant* out) const {
  if (holes_.empty()) return;
  const auto after = std::upper_bound(holes_.begin(), holes_.end(), x.ns,
                                      [](int64_t t, const NodeClockInterval& h) { return t < h.start_ns; });
  if (after == holes_.begin()) return;
  const NodeClockInterval& hole = *(after - 1);
  if (x.ns >= hole.end_ns) return;
  const int64_t distance_ns = std::min(x.ns - hole.start_ns, hole.end_ns - x.ns);
  out->uncertainty_ns +=
      std::max(options_.drift_floor, drift_uncertainty) * static_cast<double>(distance_ns);
  if (out->quality == CorrectionQuality::kSolved) out->quality = CorrectionQuality::kGap;
}

size_t NodeCorrection::gap_segments() const {
  return static_cast<size_t>(std::count_if(segments_.begin(), segments_.end(),
                                           [](const Segment& s) { return s.gap; }));
}

size_t NodeCorrection::jump_segments() const {
  return static_cast<size_t>(std::count_if(segments_.begin(), segments_.end(),
                                           [](const Segment& s) { return s.jump; }));
}

std::string NodeCorrection::Describe() const {
  std::string text = "node " + std::to_string(node_) + (is_reference_ ? " (the reference)" : "") + ": ";
  if (knots_.empty()) {
    return text + "never reachable (" + std::to_string(unreachable_t_ns_.size()) +
           " instants): no correction";
  }
  const double span_s =
      static_cast<double>(knots_.back().t_ns - knots_.front().t_ns) / 1e9;
  char span[64];
  std::snprintf(span, sizeof span, "%.1f s", span_s);
  const auto between = static_cast<size_t>(
      std::count_if(knots_.begin(), knots_.end(), [](const CorrectionKnot& k) { return k.between_instants; }));
  if (between > 0) text += std::to_string(between) + " instants following the clocks' discipline between ";
  return text + std::to_string(knots_.size() - between) + " solved instants over " + span + " from t_ns " +
         std::to_string(knots_.front().t_ns) + ", " + std::to_string(gap_segments()) + " gaps, " +
         std::to_string(jump_segments()) + " phase jumps, " + std::to_string(unreachable_t_ns_.size()) +
         " unreachable instants, " + std::to_string(holes_.size()) + " edge holes";
}

}  // namespace chronolink::trace
