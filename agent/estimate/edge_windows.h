// Groups the finalised tuples of one edge into fixed windows of the local
// node clock and, when a window closes, estimates it once per configured
// source class. Each window's fit takes the probes of a span centred on the
// window, which may be longer than it (docs/estimator.md §10): more pairs
// per fit at the same cadence, while the windows, and so the cluster's solve
// instants, stay on one grid. A span longer than the longest centred one
// ends where that one ends and reaches further back (fit_span_range.h). The
// span is fixed (--fit-span-s) or chosen per edge and class from the noise
// and wander its windows show (fit_span_chooser.h). Pure: no I/O; the
// caller exports the records.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "agent/estimate/edge_drift_history.h"
#include "agent/estimate/fit_span_chooser.h"
#include "agent/estimate/window_estimator.h"
#include "agent/estimate/window_scatter.h"
#include "agent/pair/tuple_assembler.h"
#include "clock/fit_clock_remap.h"
#include "clock/timestamp.h"

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
  // The probes the fit took: created in [fit_start_ns, fit_end_ns), a span
  // centred on the window (shorter where a clock step cut it).
  int64_t fit_start_ns = 0;
  int64_t fit_end_ns = 0;
  SourceClass source_class = SourceClass::kKernel;
  WindowCounts counts;  // the window's own probes, not the span's
  WindowEstimate estimate;
  // Sources of the stamps of every tuple offered in this class (8 per tuple).
  std::array<int64_t, kNumStampSources> stamp_sources{};
  bool clock_step = false;  // the window was discarded because the clock stepped
  // Where our fit clock or the peer's changed rate in this window (a bend,
  // not a step: the estimate stands), on our clock (a peer's: when its
  // notice came); the leader carries no estimate across these instants.
  std::vector<int64_t> clock_remaps_ns;
  // Of the tuples the fit took (estimate.tuples), those of the peer's
  // session: where there are any, the link's other direction fits on the
  // same probes, so its whole sigma is shared (SolveShared).
  int peer_session_tuples = 0;
  // Where a long chosen span's line was averaged with its later half's
  // (FitSpanRange::later_half): that half's span and line, as read at x0.
  // estimate.fit then holds the mean line (beta_ns, alpha); its margin,
  // band, floors and own_alpha are the whole span's, so the offset may lie
  // outside that band by up to half the two lines' difference.
  struct LaterHalf {
    int64_t fit_start_ns = 0;
    int64_t fit_end_ns = 0;
    LineFit fit;
  };
  std::optional<LaterHalf> later_half;
  // The later half fitted but its line lay farther from the span's than
  // their two bands reach: a failed fit, left out (the span's line alone).
  bool later_half_refused = false;
  // One-sigma of estimate.fit.beta_ns from the edge's recent windows
  // (window_scatter.h); a min-delay window's own bound; 0 while unknown.
  double sigma_ns = 0;
  // With an adaptive span: what the span of this fit was chosen on, and
  // whether this window is the first on a new span.
  std::optional<FitSpanEvidence> span_evidence;
  bool span_changed = false;
  // The fit on this window's own probes that the span chooser was fed (as
  // read at x0, as estimate.fit is): what its evidence rests on, recorded
  // so a replay can rebuild that evidence from the records.
  std::optional<LineFit> own_window_fit;
  // The part of sigma_ns both directions of the link share (WindowSigma);
  // unknown for a min-delay window's own bound.
  std::optional<double> sigma_shared_ns;
  // The scatter part of sigma_ns (WindowSigma::scatter_ns); unknown where
  // sigma_ns is not a fit's.
  std::optional<double> sigma_scatter_ns;
  // What the cluster solve takes as the window's one-sigma: sigma_ns when
  // known, else the fit's uncertainty (a wide bound, never an understatement).
  double SolveSigma() const { return sigma_ns > 0 ? sigma_ns : estimate.fit.uncertainty_ns; }
  // And the shared part of it, where the sigma is the scatter's.
  std::optional<double> SolveShared() const { return sigma_ns > 0 ? sigma_shared_ns : std::nullopt; }
};

// Whether a later half's line may be averaged with its span's: two lines
// on nested probe sets whose values at x0 lie farther apart than their two
// bands reach cannot both hold, and the half rests on fewer probes. On a
// starved VM one half strayed 38 us at 2.5 times the bands, where the runs
// before reached 0.07 times (docs/estimator.md §10).
bool LaterHalfAgreesWithSpan(const LineFit& span, const LineFit& half);

class EdgeWindows {
 public:
  // spans: the span each window's fit covers, fixed (never under the
  // window itself; by default the window alone) or chosen per edge between
  // a shortest and a longest; the longest centred one sets when windows
  // close, the longest of all how far back tuples are kept. drift: the
  // recent slopes each window's line leans on (docs/estimator.md §4c).
  EdgeWindows(uint32_t node, uint32_t peer, int64_t window_ns, std::vector<SourceClass> classes,
              WindowEstimatorOptions options, WindowScatterOptions scatter = {},
              FitSpanRange spans = FitSpanRange::Fixed(0), EdgeDriftHistoryOptions drift = {});

  int64_t WindowStart(int64_t node_ns) const;
  // Where a span of span_ns of the window starting at `start` ends: its
  // end if centred, and no later than the longest centred span's (0: that
  // one, where every span of the window ends at the latest).
  int64_t FitEnd(int64_t start, int64_t span_ns = 0) const {
    const int64_t centred = span_ns > 0 ? std::min(span_ns, centred_span_ns_) : centred_span_ns_;
    return start + window_ns_ / 2 - centred / 2 + centred;
  }
  // Where it starts (0: the longest span, the earliest any fit reaches).
  int64_t FitStart(int64_t start, int64_t span_ns = 0) const {
    return FitEnd(start, span_ns) - (span_ns > 0 ? span_ns : longest_span_ns_);
  }
  // The latest instant <= node_ns at which some window's span ends: what
  // CloseUpTo can close through, and before which tuples must be final.
  int64_t ClosableBefore(int64_t node_ns) const;
  // The same when no probe comes after node_ns (the agent stops): every
  // window ended by then closes, on the part of its span there is.
  int64_t ClosableAtEnd(int64_t node_ns) const { return FitEnd(WindowStart(node_ns) - window_ns_); }

  // Counts a forward pair as sent in the window of its first probe.
  void OnPairSent(int64_t node_ns);
  void OnTupleFinalized(const FullTuple& t);
  // A tuple of the peer's session, mirrored into ours (ProbeEngine's
  // MirrorSink): a fit takes it like its own, so that the link's two
  // directions lean neither way (docs/estimator.md §11). One whose window
  // has closed already comes too late and is dropped.
  void OnPeerTuple(const FullTuple& t);
  // The clock stepped from before_ns to after_ns (node clock; a peer's step
  // is seen as one spanning the notice's delay): the windows holding either
  // side are discarded. After a step back, so is every window the clock
  // reaches again before it passes before_ns: they would reuse window starts
  // already written, with tuples on the new clock.
  void OnClockStep(int64_t before_ns, int64_t after_ns);
  // This node's fit clock took a new rate without a jump, bending F
  // (fit_clock_remap.h). Nothing is discarded: every fit whose span holds
  // stamps from before the bend fits them on the new rate's line drawn back
  // (the straight frame) and reports its line at x0 as F reads there; the
  // drift, scatter and span histories move to the new frame. The window
  // holding the bend says where (EdgeWindowRecord::clock_remaps_ns).
  void OnNodeClockRemap(const FitClockRemap& remap);
  // The peer's fit clock did (its ClockRemap notice, which came at node_ns
  // on ours): the same for its stamps.
  void OnPeerClockRemap(const FitClockRemap& remap, int64_t node_ns);

  // Windows centred before node_ns close without a record and feed no
  // history (span chooser, scatter, drift): the agent cannot map them back
  // to REALTIME (FitClock::FirstRead), and a history fed windows no one sees
  // cannot be rebuilt from the records. In a loaded run of 2026-12-06 two
  // such windows doubled the chooser's noise for 256 s. Their probes still
  // serve later windows' spans.
  void CloseWithoutRecordBefore(int64_t centre_ns) { unrecorded_before_ns_ = centre_ns; }

  // Closes every window whose fit span ended at or before
  // `closed_before_ns`, oldest first, appending one record per source class.
  // Returns how many windows closed without a record.
  size_t CloseUpTo(int64_t closed_before_ns, std::vector<EdgeWindowRecord>* out);

 private:
  struct Window {
    WindowCounts counts;
    std::vector<FullTuple> tuples;
    bool clock_step = false;
    bool closed = false;  // its records are out; kept for the spans of later windows
  };
  Window& At(int64_t node_ns);
  // The tuples of a span of span_ns centred on the window at `start`, cut
  // at the nearest clock step on either side (tuples across it are on
  // another clock); the span taken goes into r.
  std::vector<const FullTuple*> SpanTuples(int64_t start, int64_t span_ns, EdgeWindowRecord* r) const;
  void Close(int64_t start, const Window& w, std::vector<EdgeWindowRecord>* out);
  // The window's fit, its slope leaning on the class's recent drift as the
  // chooser's evidence weighs it; the fit's own slope feeds that drift (a
  // step restarts it).
  // x0_ns: the window's x0 in the straight frame the tuples are in.
  // later_half: the span's tuples from half_start on (none: no half).
  void Estimate(const std::vector<PtPrTuple>& projected, const std::vector<PtPrTuple>& later_half, int64_t half_start,
                int64_t x0_ns, const FitSpanChooser* chooser, EdgeWindowRecord* r);
  // Where r's span's later half starts (INT64_MAX: it takes none).
  int64_t LaterHalfStart(const EdgeWindowRecord& r, bool chosen) const;
  // r's line becomes the mean of its own and its later half's, where the
  // half fits (its slope leaning on the same drift as the whole's).
  void AverageWithLaterHalf(const std::vector<PtPrTuple>& later_half, int64_t half_start, int64_t x0_ns,
                            const std::function<std::optional<DriftPrior>(int64_t)>& prior_for,
                            EdgeWindowRecord* r) const;
  // Fits the window on its own probes, for the span chooser of r's class.
  void FeedSpanChooser(FitSpanChooser& chooser, const std::vector<PtPrTuple>& own, int64_t x0_ns, EdgeWindowRecord* r);
  // Every window feeds the scatter, though overlapping spans share probes:
  // fed only windows with disjoint spans, its 12 windows covered 48 s and
  // one bad window widened 24 windows' sigma (docs/estimator.md §10).
  void AddSigma(EdgeWindowRecord* r);
  // A straight-frame fit as the clocks read at x0_ns (as read).
  void FitAsRead(LineFit* fit, int64_t x0_ns) const;
  void MapHistories(const std::function<double(int64_t, double)>& offset, const std::function<double(double)>& slope);

  uint32_t node_;
  uint32_t peer_;
  int64_t window_ns_;
  int64_t centred_span_ns_;  // the longest centred span (FitSpanRange::longest_ns)
  int64_t unrecorded_before_ns_ = INT64_MIN;  // CloseWithoutRecordBefore
  int64_t longest_span_ns_;  // the longest span (FitSpanRange::longest_trailing_ns)
  std::vector<SourceClass> classes_;
  WindowEstimatorOptions options_;
  std::map<int64_t, Window> windows_;  // by start; closed ones kept while a span needs them
  WindowScatterOptions scatter_options_;
  std::map<SourceClass, WindowScatter> scatter_;
  FitSpanRange spans_;
  std::optional<FitSpanChooserOptions> adaptive_span_;
  std::map<SourceClass, FitSpanChooser> span_chooser_;
  EdgeDriftHistoryOptions drift_options_;
  std::map<SourceClass, EdgeDriftHistory> drift_;
  int64_t replayed_until_ns_ = INT64_MIN;  // windows starting before this are discarded when made
  std::vector<FitClockRemap> node_remaps_, peer_remaps_;  // oldest first
  std::map<int64_t, std::vector<int64_t>> remap_marks_;   // by window start: where remaps came in it
};

}  // namespace chronolink
