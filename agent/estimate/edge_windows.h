// Groups the finalised tuples of one edge into fixed windows of the local
// node clock and, when a window closes, estimates it once per configured
// source class. Pure: no I/O; the caller exports the records.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "agent/clock/timestamp.h"
#include "agent/estimate/window_estimator.h"
#include "agent/estimate/window_scatter.h"
#include "agent/pair/tuple_assembler.h"

namespace chronolink {

struct WindowCounts {
  int64_t pairs_sent = 0;
  int64_t complete = 0;
  int64_t tx_stamps_missing = 0;
  int64_t lost = 0;
};

struct EdgeWindowRecord {
  uint32_t node = 0;
  uint32_t peer = 0;
  int64_t window_start_ns = 0;  // node clock
  int64_t window_end_ns = 0;
  int64_t x0_ns = 0;
  SourceClass source_class = SourceClass::kKernel;
  WindowCounts counts;
  WindowEstimate estimate;
  // Sources of the stamps of every tuple offered in this class (8 per tuple).
  std::array<int64_t, kNumStampSources> stamp_sources{};
  bool clock_step = false;  // the window was discarded because the clock stepped
  // One-sigma of estimate.fit.beta_ns from the edge's recent windows
  // (window_scatter.h); a min-delay window's own bound; 0 while unknown.
  double sigma_ns = 0;
  // The part of sigma_ns both directions of the link share (WindowSigma);
  // unknown for a min-delay window's own bound.
  std::optional<double> sigma_shared_ns;
  // What the cluster solve takes as the window's one-sigma: sigma_ns when
  // known, else the fit's uncertainty (a wide bound, never an understatement).
  double SolveSigma() const { return sigma_ns > 0 ? sigma_ns : estimate.fit.uncertainty_ns; }
  // And the shared part of it, where the sigma is the scatter's.
  std::optional<double> SolveShared() const { return sigma_ns > 0 ? sigma_shared_ns : std::nullopt; }
};

class EdgeWindows {
 public:
  EdgeWindows(uint32_t node, uint32_t peer, int64_t window_ns,
              std::vector<SourceClass> classes, WindowEstimatorOptions options,
              WindowScatterOptions scatter = {});

  int64_t WindowStart(int64_t node_ns) const;

  // Counts a forward pair as sent in the window of its first probe.
  void OnPairSent(int64_t node_ns);
  void OnTupleFinalized(const FullTuple& t);
  // The clock stepped from before_ns to after_ns (node clock; a peer's step
  // is seen as one spanning the notice's delay): the windows holding either
  // side are discarded. After a step back, so is every window the clock
  // reaches again before it passes before_ns: they would reuse window starts
  // already written, with tuples on the new clock.
  void OnClockStep(int64_t before_ns, int64_t after_ns);

  // Closes every window that ended at or before `closed_before_ns`, oldest
  // first, appending one record per source class.
  void CloseUpTo(int64_t closed_before_ns, std::vector<EdgeWindowRecord>* out);

 private:
  struct Window {
    WindowCounts counts;
    std::vector<FullTuple> tuples;
    bool clock_step = false;
  };
  Window& At(int64_t node_ns);
  void AddSigma(EdgeWindowRecord* r);

  uint32_t node_;
  uint32_t peer_;
  int64_t window_ns_;
  std::vector<SourceClass> classes_;
  WindowEstimatorOptions options_;
  std::map<int64_t, Window> windows_;  // by start
  WindowScatterOptions scatter_options_;
  std::map<SourceClass, WindowScatter> scatter_;
  int64_t replayed_until_ns_ = INT64_MIN;  // windows starting before this are discarded when made
};

}  // namespace chronolink
