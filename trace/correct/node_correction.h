// One node's clock → cluster time: a piecewise-linear map through the
// node's solved instants, with a bound on its error (docs/trace-correction.md).
//
// A solved instant ("knot") of the reference clock T, with the node's
// offset o_k (node − cluster) and drift d_k, sits at node-clock instant
// x_k = T + o_k. Between knots the offset is interpolated linearly in the
// node's clock; a node reading x becomes cluster time x − o(x), o rounded
// to the picosecond. Outside the knots it extrapolates with the nearest
// knot's drift: o(x) = o_k + d_k·(x − x_k)/(1 + d_k), the exact inverse of
// docs/formats.md's x − (o + d·(x − T − o)) for a constant drift (which is
// off by d²·(x − x_k): 0.6 µs after 60 s at 100 ppm).
//
// Order: the map is non-decreasing at picosecond resolution and strictly
// increasing for instants ≥ 2 ps apart (knots strictly increasing on both
// clocks make every slope of o below 1; ps rounding of o can tie instants
// 1 ps apart — no map onto whole picoseconds with slope below 1 can avoid
// that). Instants equal before are equal after.
//
// Built by ClusterCorrection (trace/correct/clock_correction.h), which
// checks the knots; immutable afterwards, so const calls are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace/correct/edge_coverage.h"
#include "trace/model/trace_time.h"

namespace chronolink::trace {

enum class CorrectionQuality {
  kSolved,        // between solved instants of one stretch of consecutive reachable instants
  kGap,           // across missed or unreachable instants, an edge hole, or a phase jump: bound widened
  kExtrapolated,  // before the first or after the last solved instant: see beyond_span_ns
  kUnreachable,   // the node was never solved: no correction exists (cluster = node time, bound infinite)
};

const char* ToString(CorrectionQuality quality);

struct CorrectedInstant {
  TraceInstant cluster;
  // Bound on |cluster − true cluster time|, ns: coverage_factor solved
  // sigmas plus the model's worst-case terms (docs/trace-correction.md).
  double uncertainty_ns = 0;
  CorrectionQuality quality = CorrectionQuality::kSolved;
  int64_t beyond_span_ns = 0;  // extrapolated: node-clock distance to the nearest solved instant
  int64_t correction_ps = 0;   // cluster − node at this instant (−o, ps)
};

// A node's solved instant.
struct CorrectionKnot {
  int64_t t_ns = 0;       // T, reference (cluster) clock
  TraceInstant node;      // T + offset: the node-clock reading at T
  int64_t offset_ps = 0;  // node − cluster at T, rounded to ps
  double drift = 0;       // d(node − cluster)/d(cluster)
  double sigma_ns = 0;    // the solver's one sigma of the offset
  // Not solved: placed between two solved instants where a clock's
  // discipline bent the offset (discipline_knots.h).
  bool between_instants = false;
};

struct CorrectionOptions {
  double coverage_factor = 3.0;     // solved sigmas in the bound (3: ~99.7 % for Gaussian errors)
  double drift_floor = 1e-7;        // least drift uncertainty in gaps, holes, extrapolation (0.1 ppm)
  double gap_periods = 2.0;         // consecutive solved instants further apart: a gap
  double step_tolerance_ns = 1000;  // phase change no drift explains, beyond noise: a gap
  // A solved instant whose sigma exceeds this many times its node's around
  // it is set aside as a stalled agent's (stalled_instants.h); 0: none.
  double stalled_sigma_factor = 8.0;
};

class NodeCorrection {
 public:
  // nullopt only when the arithmetic would overflow int64 (instants ±106
  // days from the nearest knot, or at the ends of int64). `segment_hint`
  // (optional, the caller's, start it at 0) remembers where the previous
  // instant fell: instants in order (a trace line's events) then skip the
  // binary search. Any value is safe; a wrong one only costs the search.
  std::optional<CorrectedInstant> ToCluster(const TraceInstant& node_time, size_t* segment_hint = nullptr) const;

  // The stretch between two knots (or before the first, after the last)
  // that holds `node_time`: [from, to) on the node's clock, and how many
  // knots lie at or before it. ToCluster(x) is ToClusterIn(PieceAt(x), x):
  // a caller may keep a piece and map every instant it covers through it.
  struct Piece {
    TraceInstant from;
    TraceInstant to;
    size_t knots_before = 0;
  };
  Piece PieceAt(const TraceInstant& node_time) const;
  // `knots_before` must be the piece's that covers `node_time`.
  std::optional<CorrectedInstant> ToClusterIn(size_t knots_before, const TraceInstant& node_time) const;
  // The cluster instant on that piece is LinearAt(knots_before).Map(x):
  // ToClusterIn computes it so. Needs reachable().
  LinearClockPiece LinearAt(size_t knots_before) const;
  // Between two knots, when no edge hole touches the piece: the bound
  // ToClusterIn gives every instant x of the piece is bound->At(x − the
  // left knot, in ps), and its quality kGap exactly when At says widened
  // (beyond_span_ns 0). False before the first knot, after the last, or
  // with a hole in the piece.
  bool InterpolationBoundAt(size_t knots_before, InterpolationBound* bound) const;

  uint32_t node() const { return node_; }
  bool reachable() const { return !knots_.empty(); }
  bool is_reference() const { return is_reference_; }
  const std::vector<CorrectionKnot>& knots() const { return knots_; }
  // The solved span on the node's clock; meaningless when !reachable().
  TraceInstant first_node_time() const { return knots_.front().node; }
  TraceInstant last_node_time() const { return knots_.back().node; }
  const std::vector<int64_t>& unreachable_t_ns() const { return unreachable_t_ns_; }
  size_t gap_segments() const;
  size_t jump_segments() const;
  const std::vector<NodeClockInterval>& edge_holes() const { return holes_; }
  std::string Describe() const;  // one line: node, instants, span, gaps

 private:
  friend class ClusterCorrection;

  // Between knot k and k + 1.
  struct Segment {
    int64_t length_ps = 0;      // node clock
    double slope = 0;           // d o / d x, both in ps
    double inverse_length = 0;  // 1 / length_ps
    double dt_ns = 0;           // T_{k+1} − T_k
    double mismatch_left_ns = 0;   // |Δo − d_k·ΔT|: what the left drift does not explain
    double mismatch_right_ns = 0;  // |Δo − d_{k+1}·ΔT|
    double drift_uncertainty = 0;  // max(floor, |d_{k+1} − d_k|), 0 for the reference
    bool gap = false;              // instants missed or unreachable in between
    bool jump = false;             // a phase change no drift between d_k and d_{k+1} explains
    InterpolationBound bound;      // the above with the knots' sigmas: an instant's bound
  };

  NodeCorrection(uint32_t node, bool is_reference, const CorrectionOptions& options)
      : node_(node), is_reference_(is_reference), options_(options) {}
  // Computes the segments; `gap_after[k]` marks segment k a gap.
  void Finish(const std::vector<bool>& gap_after);
  Segment MakeSegment(size_t k, bool gap) const;
  // Whether exactly i knots lie at or before x.
  bool KnotsBefore(const TraceInstant& x, size_t i) const;
  // How many knots lie at or before x, via the hint when it is right.
  size_t Locate(const TraceInstant& x, size_t* hint) const;
  double ExtrapolationDriftUncertainty(size_t knot) const;
  // Knot offsets are rounded to the ps and the interpolated offset again:
  // the map is within 1 ps of the exact line through the reported offsets.
  // The reference's map is the identity: nothing is rounded.
  double Rounding() const { return is_reference_ ? 0.0 : 0.001; }

  std::optional<CorrectedInstant> Interpolate(size_t k, const LinearClockPiece& line, const TraceInstant& x) const;
  std::optional<CorrectedInstant> Extrapolate(size_t k, const LinearClockPiece& line, const TraceInstant& x) const;
  void WidenInHole(const TraceInstant& x, double drift_uncertainty, CorrectedInstant* out) const;

  uint32_t node_;
  bool is_reference_;
  CorrectionOptions options_;
  std::vector<CorrectionKnot> knots_;
  std::vector<int64_t> knot_ns_;   // knots_[i].node.ns: what ToCluster searches
  std::vector<Segment> segments_;  // knots_.size() − 1
  std::vector<int64_t> unreachable_t_ns_;
  std::vector<NodeClockInterval> holes_;  // from edges.jsonl, node clock
};

}  // namespace chronolink::trace
