#include "agent/estimate/edge_windows.h"

#include <algorithm>
#include <utility>

namespace chronolink {

EdgeWindows::EdgeWindows(uint32_t node, uint32_t peer, int64_t window_ns,
                         std::vector<SourceClass> classes, WindowEstimatorOptions options,
                         WindowScatterOptions scatter, int64_t fit_span_ns)
    : node_(node), peer_(peer), window_ns_(window_ns),
      fit_span_ns_(std::max(fit_span_ns, window_ns)),
      classes_(std::move(classes)), options_(options), scatter_options_(scatter) {}

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
  if (const auto sigma = it->second.Add(r->x0_ns, r->estimate.fit)) {
    r->sigma_ns = sigma->sigma_ns;
    r->sigma_shared_ns = sigma->shared_ns;
  }
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

std::vector<const FullTuple*> EdgeWindows::SpanTuples(int64_t start, EdgeWindowRecord* r) const {
  int64_t lo = FitStart(start), hi = FitEnd(start);
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
    if (!w.clock_step) {
      std::vector<PtPrTuple> projected;
      const std::vector<const FullTuple*> span = SpanTuples(start, &r);
      projected.reserve(span.size());
      for (const FullTuple* t : span) {
        PtPrTuple p;
        if (!t->Project(c, &p)) continue;
        projected.push_back(p);
        for (int i = 0; i < 2; ++i) {
          for (const ProbeStamp* st : {&p.fwd_tx[i], &p.fwd_rx[i], &p.rev_tx[i], &p.rev_rx[i]}) {
            ++r.stamp_sources[static_cast<int>(st->source)];
          }
        }
      }
      r.estimate = EstimateWindow(projected, r.x0_ns, options_);
    }
    AddSigma(&r);
    out->push_back(std::move(r));
  }
}

void EdgeWindows::CloseUpTo(int64_t closed_before_ns, std::vector<EdgeWindowRecord>* out) {
  int64_t newest_closed = INT64_MIN;
  for (auto& [start, w] : windows_) {
    if (w.closed) {
      newest_closed = start;
      continue;
    }
    if (FitEnd(start) > closed_before_ns) break;
    Close(start, w, out);
    w.closed = true;
    newest_closed = start;
  }
  if (newest_closed == INT64_MIN) return;
  // No window still to close reaches back before the next one's span.
  const int64_t needed_from = FitStart(newest_closed + window_ns_);
  while (!windows_.empty() && windows_.begin()->second.closed &&
         windows_.begin()->first + window_ns_ <= needed_from) {
    windows_.erase(windows_.begin());
  }
}

}  // namespace chronolink
