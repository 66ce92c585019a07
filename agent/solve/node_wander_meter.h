// How much of every edge's error a node shares with all its other edges
// through its own clock's wander (docs/solver.md, "A node's own wander").
//
// A fit over a span S sees a node's phase walk as a line: at x0 it misses
// by the walk's departure from that line, the same for every edge of the
// node (its peers' walks add their own). The solve averages a node's edges
// as if their errors were independent, so this shared part stays in the
// node's offset whatever its degree; chronolink-sim at 20-50 ns/√s of
// phase walk: the solved 3σ covered 92-98 % without it.
//
// Measured from the windows themselves, without the truth: the second
// difference of an edge's offsets at a lag of L windows, β(k) − 2β(k−L) +
// β(k−2L), cancels the edge's drift and holds each end's walk over 2L
// windows. Two edges of one node, on different links, share only that
// node's part, so the mean product of their second differences (each
// signed as the node's clock enters it) is the node's alone: load, queueing
// and the peers' walks, independent between links, average out. For a
// random walk of w² ns²/s seen through a centred span S, that product is
// w²·(2D − S), D = L windows in seconds, and the fit's miss at x0 has the
// variance w²·S/12 (a line through a walk over S at its middle). With S the
// longest centred span the agents take: the trailing spans miss less
// (a least-squares model of the walk: 0.38-0.42 w² at 6-10 s trailing
// against 0.5 w² at 6 s centred; 0.35 w² at 4 s), so this errs wide, by
// up to 1.3x in σ (chronolink-sim, whose fits mostly took 4 s). The lag is
// at least the span plus a window (4 windows, 8 s, at the default 6 s):
// short, so that a node is measured 20 s after its first window.
// Pure: no I/O, no clocks.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/solve/global_solver.h"

namespace chronolink {

struct NodeWanderOptions {
  // L: the second difference spans 2L windows. Longer than the span (the
  // span's smoothing takes S of the 2D; raised to span + 1 window where
  // it is not), short against the oscillators' frequency walk, which grows
  // as the cube of it, and against the wait for a node's first figure.
  int lag_windows = 4;
  // A centre's products are taken once the newest window seen is this many
  // windows past the last one they need (windows come from every prober, a
  // few late).
  int settle_windows = 2;
  // The products are forgotten exponentially, over this many windows.
  double memory_windows = 60;
  // No figure for a node until its products weigh this many (pairs of its
  // edges at one centre, forgotten as above).
  double min_pairs = 60;
  // A larger second difference is no walk (a fit clock re-anchored, a step
  // the markers missed, a wild window): left out, counted.
  double max_abs_second_difference_ns = 2000;
};

struct NodeWanderStats {
  uint64_t second_differences = 0;  // taken
  uint64_t rejected = 0;            // over max_abs_second_difference_ns
  uint64_t late = 0;                // came after their centre was taken
};

class NodeWanderMeter {
 public:
  // window_ns: the windows' length (their indices are window_start / it);
  // fit_span_ns: the longest centred span the agents fit.
  NodeWanderMeter(int64_t window_ns, int64_t fit_span_ns, NodeWanderOptions options = {});

  // One window's estimate of a directed edge; its index is its window's
  // start on the prober's clock over window_ns. Any order; a second one of
  // the same edge and index (a resend) changes nothing.
  void Add(const EdgeEstimate& e, int64_t window_index);
  // The edge's clock stepped: its offsets before do not difference with
  // those after.
  void ResetEdge(uint32_t node, uint32_t peer);

  // The node's phase walk, ns/√s, and the σ of what its walk makes every
  // edge of it miss at the fit span; nullopt until measured.
  std::optional<double> WanderNsPerSqrtS(uint32_t node) const;
  std::optional<double> SharedSigmaNs(uint32_t node) const;
  // Until it is measured (the first 2L + settle windows), the worst a
  // node's share can be: all of its edges' σ² split between their two ends,
  // σ/√2 at the median of its edges' last σ (chronolink-sim: 0.45-0.49 of
  // an edge's error variance was each end's wander at 5-50 ns/√s; on the
  // test bed 0.05-0.3). None for a node of one link, which nothing can
  // measure and whose link's σ holds its wander.
  std::optional<double> ProvisionalSigmaNs(uint32_t node) const;
  // Every node seen: measured, or else provisional
  // (SolverOptions::node_shared_sigma_ns).
  std::unordered_map<uint32_t, double> SharedSigmas() const;

  const NodeWanderStats& stats() const { return stats_; }
  int lag_windows() const { return options_.lag_windows; }

 private:
  // One directed edge: its recent offsets and second differences, in rings
  // by window index (flat: a 10 000-node leader holds 120 000 of them).
  struct EdgeHistory {
    std::vector<int64_t> index;  // of the offset in each slot; kEmpty
    std::vector<double> beta;
    std::vector<int64_t> centre;  // of the second difference in each slot; kEmpty
    std::vector<double> d2;
  };
  // One node's second differences at one centre, each signed as its clock
  // enters them: the sums that give the products of pairs on different
  // links, ((Σv)² − Σv²)/2 less the pairs of one link's two directions.
  struct CentreSums {
    int64_t centre;
    double sum = 0, sum_sq = 0, count = 0, same_link = 0, same_link_pairs = 0;
  };
  struct NodeState {
    std::vector<CentreSums> centres;  // ring by centre
    double products = 0, pairs = 0;   // forgotten sums
    int64_t last_centre = 0;
    std::vector<std::pair<uint64_t, double>> last_sigma;  // its edges' (key) last σ
  };
  static constexpr int64_t kEmpty = INT64_MIN;
  static uint64_t Key(uint32_t node, uint32_t peer) { return (uint64_t{node} << 32) | peer; }

  EdgeHistory& HistoryOf(uint64_t key);
  NodeState& StateOf(uint32_t node);
  std::optional<double> Beta(const EdgeHistory& h, int64_t index) const;
  void TakeSecondDifference(uint32_t node, uint32_t peer, EdgeHistory& h, int64_t centre);
  void AddToNode(uint32_t node, int64_t centre, double v, double same_link_product, bool same_link);
  void Settle();

  int64_t window_ns_;
  double fit_span_s_;
  NodeWanderOptions options_;
  double forget_per_window_;
  size_t offset_slots_, centre_slots_;
  std::unordered_map<uint64_t, EdgeHistory> edges_;
  std::unordered_map<uint32_t, NodeState> nodes_;
  int64_t newest_index_ = kEmpty;
  int64_t settled_before_ = kEmpty;  // centres below it are taken
  NodeWanderStats stats_;
};

}  // namespace chronolink
