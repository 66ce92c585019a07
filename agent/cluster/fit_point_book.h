// Each prober's REALTIME against its fit clock, as its window summaries
// brought it (clock/fit_point.h), and the mapping of a solution solved on
// the fit clocks back to REALTIME (docs/leader.md "From fit clocks to
// REALTIME"):
//
//   REALTIME_n − REALTIME_ref = (F_n − F_ref) + d_n − d_ref,  d = REALTIME − F,
//
// each d at the node's own instant of T. Where the node's summaries
// brought its REALTIME/RAW knots (clock/timebase_knots.h), d comes from
// them: exact wherever the daemon changed the rate, as the node saw it.
// A node that sends knots is mapped through them only: where they do not
// cover its instant (its windows there discarded or lost) it is unmapped.
// A node that sends none (an older agent) is mapped from its nearest point,
// along its rate, and only within the solve's validity horizon of T: REALTIME's rate changes with every daemon
// update, so an older point would err by the change × the distance (a PLL
// swinging 500 ppm, 20 ms from the point: 10 µs).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "agent/cluster/cluster_messages.h"
#include "clock/fit_point.h"

namespace chronolink {

struct FitPointBookStats {
  uint64_t nodes_unmapped = 0;      // solved, but no knots (or point) of theirs at T, or two anchors share it: published unreachable
  uint64_t instants_unmapped = 0;   // the named reference had none at T: not published
  uint64_t mapped_by_knots = 0;     // node solutions (and references) mapped through knots
  uint64_t mapped_by_point = 0;     // ... along a point's rate
};

class FitPointBook {
 public:
  explicit FitPointBook(int64_t horizon_ns) : horizon_ns_(horizon_ns) {}

  // The point of a summary (the identity at its window centre when it has
  // none: the prober fits in REALTIME).
  void Add(const WindowSummary& w, int64_t window_ns);
  void Add(uint32_t node, const FitPoint& p) { points_[node][p.fit_ns] = p; }
  // A node's knots over a window, on the fit clock of `anchor`: they replace
  // what the book held between their first and last.
  void AddKnots(uint32_t node, const FitAnchor& anchor, const TimebaseExcerpt& knots);
  void ExpireBefore(int64_t fit_ns);

  // Maps snapshot `s`, solved at T = s->reference_instant_ns on the fit
  // clocks, to REALTIME: offsets, drifts and T itself. False when the
  // named reference has no point near T (nothing can be said in REALTIME).
  bool ToRealtime(OffsetsSnapshot* s);

  const FitPointBookStats& stats() const { return stats_; }

 private:
  struct Mapped {
    int64_t d_ns;  // REALTIME − F at the node's own instant
    double rate;   // REALTIME's rate against F there, less 1
  };
  // REALTIME − F at fit instant `fit_ns` of a node: by its knots, else its
  // nearest point; counted.
  std::optional<Mapped> MapAt(uint32_t node, int64_t fit_ns);
  std::optional<Mapped> ByKnots(uint32_t node, int64_t fit_ns) const;
  std::optional<FitPoint> Near(uint32_t node, int64_t fit_ns) const;

  struct BookKnot {
    int64_t realtime_ns = 0;
    int64_t anchor_raw_ns = 0;  // which anchor made its F: no segment joins two, but across a bend
    bool continues = false;     // the node's REALTIME is straight from here to the next knot
    int64_t raw_ns = 0;
  };
  // The anchor `anchor` bends (fit_clock_remap.h: F took a new rate at
  // anchor.raw_ns and kept its value there), where the node's previous
  // anchor is known and joins it so; else null. Knots before the bend were
  // F-read through that one: a summary whose window holds the bend carries
  // the new anchor only.
  const FitAnchor* BentFrom(uint32_t node, const FitAnchor& anchor) const;
  // Whether the anchor at to_raw_ns bends the one at from_raw_ns.
  bool Bends(uint32_t node, int64_t from_raw_ns, int64_t to_raw_ns) const;
  // The anchor whose F a knot at raw_ns of an excerpt that came with
  // `anchor` was read on: `anchor`, or across a bend the one it bent or the
  // one that bent it.
  const FitAnchor& InForce(uint32_t node, const FitAnchor& anchor, int64_t raw_ns) const;
  // A bend came: `before`'s knots and span stop at it.
  void ClipAtBend(uint32_t node, const FitAnchor& before, const FitAnchor& bend);
  // REALTIME − F at fit_ns between two knots across a bend: F back to RAW
  // through the anchor in force on its side, REALTIME along the segment.
  std::optional<Mapped> AcrossBend(uint32_t node, int64_t fit_ns, const BookKnot& k0, const BookKnot& k1) const;

  // Where two of a node's anchors cover the same fit instants (its fit clock
  // jumped back when anchored again), a fit instant could be either's: the
  // knots of one would map the other's solution off by the whole jump
  // (26 ms once in the demo). Nothing there is mapped.
  struct FitSpan {
    int64_t lo = 0, hi = 0;
  };
  void NoteAnchorSpan(uint32_t node, int64_t anchor_raw_ns, int64_t lo, int64_t hi);
  bool Ambiguous(uint32_t node, int64_t fit_ns) const;

  int64_t horizon_ns_;
  std::map<uint32_t, std::map<int64_t, FitPoint>> points_;  // node -> fit_ns -> point
  std::map<uint32_t, std::map<int64_t, BookKnot>> knots_;   // node -> fit_ns -> knot
  std::map<uint32_t, std::map<int64_t, FitAnchor>> anchors_;     // node -> raw_ns -> the anchors its knots came with
  std::map<uint32_t, std::map<int64_t, FitSpan>> anchor_spans_;  // node -> anchor raw_ns -> its knots' fit span
  std::map<uint32_t, std::vector<FitSpan>> ambiguous_;           // node -> fit spans two anchors share
  FitPointBookStats stats_;
};

}  // namespace chronolink
