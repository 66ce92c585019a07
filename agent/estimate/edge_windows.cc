#include "agent/estimate/edge_windows.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace chronolink {
namespace {

// A node changes its fit clock's rate once per agent start: a peer that
// restarted often still needs only its latest few.
constexpr size_t kMaxRemapsKept = 8;

int64_t Straight(const std::vector<FitClockRemap>& remaps, int64_t v) {
  for (const FitClockRemap& m : remaps) v = m.Apply(v);
  return v;
}

int64_t AsRead(const std::vector<FitClockRemap>& remaps, int64_t v) {
  for (auto it = remaps.rbegin(); it != remaps.rend(); ++it) v = it->Invert(v);
  return v;
}

void StraightenStamp(const std::vector<FitClockRemap>& remaps, ProbeStamp* s) {
  if (s->present()) s->ns = Straight(remaps, s->ns);
}

// Ours are the forward pair's TX and the reverse pair's RX (a mirrored
// tuple of the peer's session keeps that layout), the peer's the rest.
void Straighten(const std::vector<FitClockRemap>& ours, const std::vector<FitClockRemap>& peers, PtPrTuple* t) {
  for (int i = 0; i < 2; ++i) {
    StraightenStamp(ours, &t->fwd_tx[i]);
    StraightenStamp(ours, &t->rev_rx[i]);
    StraightenStamp(peers, &t->fwd_rx[i]);
    StraightenStamp(peers, &t->rev_tx[i]);
  }
}

// A slope d(other)/d(this) − 1 where this clock reads 1/k as fast, or the
// other k times as fast: (1 + slope)·k − 1.
double SlopeScaled(double slope, double k) { return (1.0 + slope) * k - 1.0; }

bool IsMaxMargin(const WindowEstimate& e) {
  return e.fit.ok && (e.estimator == EstimatorKind::kMaxMargin || e.estimator == EstimatorKind::kMaxMarginPure);
}

// The product of the rate ratios of the remaps a value before each bend went
// through: how much faster the straight frame runs than the clock did there.
double RateRatioAt(const std::vector<FitClockRemap>& remaps, int64_t as_read_ns) {
  double k = 1.0;
  for (const FitClockRemap& m : remaps) {
    if (as_read_ns < m.at_fit_ns) k *= m.RateRatio();
    as_read_ns = m.Apply(as_read_ns);
  }
  return k;
}

void Keep(const FitClockRemap& m, std::vector<FitClockRemap>* kept) {
  kept->push_back(m);
  if (kept->size() > kMaxRemapsKept) kept->erase(kept->begin());
}

}  // namespace

EdgeWindows::EdgeWindows(uint32_t node, uint32_t peer, int64_t window_ns, std::vector<SourceClass> classes,
                         WindowEstimatorOptions options, WindowScatterOptions scatter, FitSpanRange spans,
                         EdgeDriftHistoryOptions drift)
    : node_(node),
      peer_(peer),
      window_ns_(window_ns),
      centred_span_ns_(std::max(spans.longest_ns, window_ns)),
      longest_span_ns_(std::max(spans.longest_trailing_ns, centred_span_ns_)),
      classes_(std::move(classes)),
      options_(options),
      scatter_options_(scatter),
      spans_(spans),
      adaptive_span_(ChooserOptionsFor(spans)),
      drift_options_(drift) {}

int64_t EdgeWindows::WindowStart(int64_t node_ns) const {
  // Aligned to multiples of the window length so every node's windows line up.
  int64_t q = node_ns / window_ns_;
  if (node_ns % window_ns_ < 0) --q;
  return q * window_ns_;
}

int64_t EdgeWindows::ClosableBefore(int64_t node_ns) const {
  const int64_t end_past_start = FitEnd(0);  // every span ends this far past its window's start
  return WindowStart(node_ns - end_past_start) + end_past_start;
}

EdgeWindows::Window& EdgeWindows::At(int64_t node_ns) {
  auto [it, made] = windows_.try_emplace(WindowStart(node_ns));
  if (made && it->first < replayed_until_ns_) it->second.clock_step = true;
  return it->second;
}

void EdgeWindows::OnPairSent(int64_t node_ns) { ++At(node_ns).counts.pairs_sent; }

void EdgeWindows::OnClockStep(int64_t before_ns, int64_t after_ns) {
  At(before_ns).clock_step = true;
  At(after_ns).clock_step = true;
  if (after_ns < before_ns) replayed_until_ns_ = std::max(replayed_until_ns_, WindowStart(before_ns) + window_ns_);
}

// Fits feed their class's scatter; a min-delay window keeps its own bound
// (its error is not a fit's), a step restarts the history.
void EdgeWindows::AddSigma(EdgeWindowRecord* r) {
  auto it = scatter_.find(r->source_class);
  if (it == scatter_.end()) it = scatter_.emplace(r->source_class, WindowScatter(window_ns_, scatter_options_)).first;
  if (r->clock_step) {
    it->second.Reset();
    return;
  }
  const EstimatorKind k = r->estimate.estimator;
  if (k == EstimatorKind::kMinDelay) {
    r->sigma_ns = r->estimate.fit.uncertainty_ns;
    return;
  }
  if (k != EstimatorKind::kMaxMargin && k != EstimatorKind::kMaxMarginPure) return;
  const WindowLine line = r->later_half ? WindowLine::kMeanWithLaterHalf : WindowLine::kSpan;
  if (const auto sigma = it->second.Add(r->x0_ns, r->estimate.fit, r->fit_end_ns - r->fit_start_ns, line)) {
    r->sigma_ns = sigma->sigma_ns;
    // A fit on the peer's session too rests on the probes the link's other
    // direction fits on: the two are one measurement, not two.
    r->sigma_shared_ns = r->peer_session_tuples > 0 ? sigma->sigma_ns : sigma->shared_ns;
    r->sigma_scatter_ns = sigma->scatter_ns;
  }
}

void EdgeWindows::MapHistories(const std::function<double(int64_t, double)>& offset,
                               const std::function<double(double)>& slope) {
  for (auto& [c, d] : drift_) d.MapSlopes(slope);
  for (auto& [c, s] : scatter_) s.MapOffsets(offset);
  for (auto& [c, s] : span_chooser_) s.MapOffsets(offset);
}

// The histories hold straight-frame values; a new remap moves the frame.
// A window's offset is the peer's clock less ours at its x0: where our
// clock is read faster, the same instant reads Apply(x0), and the offset
// there is smaller by what Apply added. The histories stay keyed by x0
// (the grid): the instants are ms apart at most, where the drift changes
// the offset by a fraction of a ns.
void EdgeWindows::OnNodeClockRemap(const FitClockRemap& m) {
  Keep(m, &node_remaps_);
  remap_marks_[WindowStart(m.at_fit_ns)].push_back(m.at_fit_ns);
  const double k = m.RateRatio();
  MapHistories([&m](int64_t x0, double beta) { return beta - static_cast<double>(m.Apply(x0) - x0); },
               [k](double a) { return SlopeScaled(a, 1.0 / k); });
}

// The peer's clock at our x0 reads x0 + offset; on its new rate, Apply of that.
void EdgeWindows::OnPeerClockRemap(const FitClockRemap& m, int64_t node_ns) {
  Keep(m, &peer_remaps_);
  remap_marks_[WindowStart(node_ns)].push_back(node_ns);
  const double k = m.RateRatio();
  MapHistories(
      [&m](int64_t x0, double beta) {
        const int64_t peer = x0 + std::llround(beta);
        return beta + static_cast<double>(m.Apply(peer) - peer);
      },
      [k](double a) { return SlopeScaled(a, k); });
}

// The estimate at x0 as read, from the straight frame's: the offset through
// both clocks' inverses, the slopes by the rate ratios at x0 and at the
// peer's reading there.
void EdgeWindows::FitAsRead(LineFit* fit, int64_t x0_ns) const {
  const int64_t x0_straight = fit->x0_ns;
  const int64_t peer_straight = x0_straight + std::llround(fit->beta_ns);
  const int64_t peer_as_read = AsRead(peer_remaps_, peer_straight);
  const double k = RateRatioAt(node_remaps_, x0_ns) / RateRatioAt(peer_remaps_, peer_as_read);
  fit->beta_ns =
      static_cast<double>(peer_as_read - x0_ns) + (fit->beta_ns - static_cast<double>(peer_straight - x0_straight));
  fit->alpha = SlopeScaled(fit->alpha, k);
  fit->own_alpha = SlopeScaled(fit->own_alpha, k);
  fit->x0_ns = x0_ns;
}

void EdgeWindows::OnTupleFinalized(const FullTuple& t) {
  Window& w = At(t.created_ns);
  switch (ClassifyTuple(t)) {
    case TupleOutcome::kComplete:
      ++w.counts.complete;
      w.tuples.push_back(t);
      break;
    case TupleOutcome::kTxMissing:
      ++w.counts.tx_stamps_missing;
      // Userspace stamps may still be whole: keep it for that class.
      w.tuples.push_back(t);
      break;
    case TupleOutcome::kLost:
      ++w.counts.lost;
      break;
  }
}

void EdgeWindows::OnPeerTuple(const FullTuple& t) {
  const int64_t start = WindowStart(t.created_ns);
  if (!windows_.empty() && start < windows_.rbegin()->first) {
    // Older than the newest window: it may have closed, or gone.
    auto it = windows_.find(start);
    if (it == windows_.end() || it->second.closed) return;
  }
  if (ClassifyTuple(t) == TupleOutcome::kLost) return;
  Window& w = At(t.created_ns);
  w.tuples.push_back(t);
  w.tuples.back().peer_session = true;
}

std::vector<const FullTuple*> EdgeWindows::SpanTuples(int64_t start, int64_t span_ns,
                                                      EdgeWindowRecord* r) const {
  int64_t lo = FitStart(start, span_ns), hi = FitEnd(start, span_ns);
  for (auto it = windows_.lower_bound(WindowStart(lo)); it != windows_.end() && it->first < hi; ++it) {
    if (!it->second.clock_step) continue;
    if (it->first < start) lo = std::max(lo, it->first + window_ns_);
    if (it->first > start) hi = std::min(hi, it->first);
  }
  r->fit_start_ns = lo;
  r->fit_end_ns = hi;
  std::vector<const FullTuple*> span;
  for (auto it = windows_.lower_bound(WindowStart(lo)); it != windows_.end() && it->first < hi; ++it) {
    for (const FullTuple& t : it->second.tuples) {
      if (t.created_ns >= lo && t.created_ns < hi) span.push_back(&t);
    }
  }
  return span;
}

void EdgeWindows::Close(int64_t start, const Window& w, std::vector<EdgeWindowRecord>* out) {
  // Stamps from before a bend of either clock go onto the straight frame.
  const bool bent = !node_remaps_.empty() || !peer_remaps_.empty();
  const int64_t x0_straight = Straight(node_remaps_, start + window_ns_ / 2);
  for (SourceClass c : classes_) {
    EdgeWindowRecord r;
    r.node = node_;
    r.peer = peer_;
    r.window_start_ns = start;
    r.window_end_ns = start + window_ns_;
    r.x0_ns = start + window_ns_ / 2;
    r.source_class = c;
    r.counts = w.counts;
    r.clock_step = w.clock_step;
    if (auto it = remap_marks_.find(start); it != remap_marks_.end()) r.clock_remaps_ns = it->second;
    FitSpanChooser* chooser = nullptr;
    if (adaptive_span_) chooser = &span_chooser_.try_emplace(c, window_ns_, *adaptive_span_).first->second;
    if (w.clock_step && chooser) chooser->AfterClockStep();
    if (!w.clock_step) {
      std::vector<PtPrTuple> projected, own, later_half;
      const std::vector<const FullTuple*> span = SpanTuples(start, chooser ? chooser->span_ns() : 0, &r);
      const int64_t half_from = LaterHalfStart(r, chooser != nullptr);
      projected.reserve(span.size());
      for (const FullTuple* t : span) {
        PtPrTuple p;
        if (!t->Project(c, &p)) continue;
        if (bent) Straighten(node_remaps_, peer_remaps_, &p);
        projected.push_back(p);
        if (t->created_ns >= half_from) later_half.push_back(p);
        r.peer_session_tuples += t->peer_session;
        if (chooser && t->created_ns >= start && t->created_ns < r.window_end_ns) own.push_back(p);
        for (int i = 0; i < 2; ++i) {
          for (const ProbeStamp* st : {&p.fwd_tx[i], &p.fwd_rx[i], &p.rev_tx[i], &p.rev_rx[i]}) {
            ++r.stamp_sources[static_cast<int>(st->source)];
          }
        }
      }
      Estimate(projected, later_half, half_from, x0_straight, chooser, &r);
      if (chooser) FeedSpanChooser(*chooser, own, x0_straight, &r);
    } else if (auto it = drift_.find(c); it != drift_.end()) {
      it->second.Reset();  // the drift before a step tells nothing of the one after
    }
    AddSigma(&r);  // the histories are the straight frame's
    if (bent && r.estimate.fit.ok) FitAsRead(&r.estimate.fit, r.x0_ns);
    if (bent && r.later_half) FitAsRead(&r.later_half->fit, r.x0_ns);
    if (bent && r.own_window_fit) FitAsRead(&*r.own_window_fit, r.x0_ns);
    out->push_back(std::move(r));
  }
  remap_marks_.erase(start);
}

int64_t EdgeWindows::LaterHalfStart(const EdgeWindowRecord& r, bool chosen) const {
  const int64_t half = chosen ? spans_.LaterHalfNs(r.fit_end_ns - r.fit_start_ns, window_ns_) : 0;
  return half > 0 ? r.fit_end_ns - half : INT64_MAX;
}

void EdgeWindows::Estimate(const std::vector<PtPrTuple>& projected, const std::vector<PtPrTuple>& later_half,
                           int64_t half_start, int64_t x0_ns, const FitSpanChooser* chooser, EdgeWindowRecord* r) {
  EdgeDriftHistory& drift = drift_.try_emplace(r->source_class, drift_options_).first->second;
  const auto prior_for = [&](int64_t span_ns) {
    return chooser ? drift.PriorFor(chooser->evidence(), span_ns, window_ns_) : std::nullopt;
  };
  r->estimate = EstimateWindow(projected, x0_ns, options_, prior_for(r->fit_end_ns - r->fit_start_ns));
  if (!IsMaxMargin(r->estimate)) return;
  if (!later_half.empty()) AverageWithLaterHalf(later_half, half_start, x0_ns, prior_for, r);
  drift.Add(r->estimate.fit.own_alpha);  // the whole span's own slope, half or not
}

bool LaterHalfAgreesWithSpan(const LineFit& span, const LineFit& half) {
  return std::abs(half.beta_ns - span.beta_ns) <= half.uncertainty_ns + span.uncertainty_ns;
}

void EdgeWindows::AverageWithLaterHalf(const std::vector<PtPrTuple>& later_half, int64_t half_start, int64_t x0_ns,
                                       const std::function<std::optional<DriftPrior>(int64_t)>& prior_for,
                                       EdgeWindowRecord* r) const {
  const WindowEstimate half = EstimateWindow(later_half, x0_ns, options_, prior_for(r->fit_end_ns - half_start));
  if (!IsMaxMargin(half)) return;  // the whole span's line alone
  LineFit& fit = r->estimate.fit;
  if (!LaterHalfAgreesWithSpan(fit, half.fit)) {
    r->later_half_refused = true;
    return;
  }
  r->later_half = EdgeWindowRecord::LaterHalf{half_start, r->fit_end_ns, half.fit};
  fit.beta_ns = (fit.beta_ns + half.fit.beta_ns) / 2;
  fit.alpha = (fit.alpha + half.fit.alpha) / 2;
}

// The fit on the window's own probes gauges the edge's noise and wander;
// only a max-margin fit's offset is a fit's (a min-delay one is a bound).
void EdgeWindows::FeedSpanChooser(FitSpanChooser& chooser, const std::vector<PtPrTuple>& own, int64_t x0_ns,
                                  EdgeWindowRecord* r) {
  const WindowEstimate e = EstimateWindow(own, x0_ns, options_);
  if (IsMaxMargin(e)) {
    r->span_changed = chooser.Add(r->x0_ns, e.fit);
    r->own_window_fit = e.fit;
  }
  r->span_evidence = chooser.evidence();
}

size_t EdgeWindows::CloseUpTo(int64_t closed_before_ns, std::vector<EdgeWindowRecord>* out) {
  int64_t newest_closed = INT64_MIN;
  size_t unrecorded = 0;
  for (auto& [start, w] : windows_) {
    if (w.closed) {
      newest_closed = start;
      continue;
    }
    if (FitEnd(start) > closed_before_ns) break;
    if (start + window_ns_ / 2 < unrecorded_before_ns_) {
      ++unrecorded;
    } else {
      Close(start, w, out);
    }
    w.closed = true;
    newest_closed = start;
  }
  if (newest_closed == INT64_MIN) return unrecorded;
  // No window still to close reaches back before the next one's span.
  const int64_t needed_from = FitStart(newest_closed + window_ns_);
  while (!windows_.empty() && windows_.begin()->second.closed &&
         windows_.begin()->first + window_ns_ <= needed_from) {
    windows_.erase(windows_.begin());
  }
  return unrecorded;
}

}  // namespace chronolink
