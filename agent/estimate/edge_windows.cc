#include "agent/estimate/edge_windows.h"

#include <algorithm>
#include <utility>

namespace chronolink {

EdgeWindows::EdgeWindows(uint32_t node, uint32_t peer, int64_t window_ns,
                         std::vector<SourceClass> classes, WindowEstimatorOptions options,
                         WindowScatterOptions scatter)
    : node_(node), peer_(peer), window_ns_(window_ns), classes_(std::move(classes)),
      options_(options), scatter_options_(scatter) {}

int64_t EdgeWindows::WindowStart(int64_t node_ns) const {
  // Aligned to multiples of the window length so every node's windows line up.
  int64_t q = node_ns / window_ns_;
  if (node_ns % window_ns_ < 0) --q;
  return q * window_ns_;
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

void EdgeWindows::CloseUpTo(int64_t closed_before_ns, std::vector<EdgeWindowRecord>* out) {
  while (!windows_.empty()) {
    auto it = windows_.begin();
    const int64_t start = it->first;
    const int64_t end = start + window_ns_;
    if (end > closed_before_ns) break;
    Window& w = it->second;
    for (SourceClass c : classes_) {
      EdgeWindowRecord r;
      r.node = node_;
      r.peer = peer_;
      r.window_start_ns = start;
      r.window_end_ns = end;
      r.x0_ns = start + window_ns_ / 2;
      r.source_class = c;
      r.counts = w.counts;
      r.clock_step = w.clock_step;
      if (!w.clock_step) {
        std::vector<PtPrTuple> projected;
        projected.reserve(w.tuples.size());
        for (const FullTuple& t : w.tuples) {
          PtPrTuple p;
          if (!t.Project(c, &p)) continue;
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
    windows_.erase(it);
  }
}

}  // namespace chronolink
