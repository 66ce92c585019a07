#include "agent/cluster/fit_point_book.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "clock/clock_trajectory.h"
#include "clock/realtime_raw_map.h"

namespace chronolink {

void FitPointBook::Add(const WindowSummary& w, int64_t window_ns) {
  const int64_t centre = w.window_start_ns + window_ns / 2;
  Add(w.estimate.node, w.prober_clock.value_or(FitPoint{centre, centre, 0}));
  if (w.prober_anchor && w.prober_knots) AddKnots(w.estimate.node, *w.prober_anchor, *w.prober_knots);
}

void FitPointBook::AddKnots(uint32_t node, const FitAnchor& anchor, const TimebaseExcerpt& excerpt) {
  if (excerpt.knots.size() < 2) return;
  auto& book = knots_[node];
  if (anchors_[node].try_emplace(anchor.raw_ns, anchor).second) {
    if (const FitAnchor* bent = BentFrom(node, anchor)) ClipAtBend(node, *bent, anchor);
  }
  const auto fit_of = [&](const TimebaseKnot& k) { return InForce(node, anchor, k.raw_ns).FitOfRaw(k.raw_ns); };
  const int64_t lo = fit_of(excerpt.knots.front());
  const int64_t hi = fit_of(excerpt.knots.back());
  // A summary that came out of order ends on a knot a later one went on from.
  const auto old_last = book.find(hi);
  const bool last_continues =
      !excerpt.last_provisional && old_last != book.end() && old_last->second.continues &&
      old_last->second.anchor_raw_ns == InForce(node, anchor, excerpt.knots.back().raw_ns).raw_ns;
  std::map<int64_t, FitSpan> spans;  // per anchor in force: the fit span of its knots here
  for (const TimebaseKnot& k : excerpt.knots) {
    const int64_t f = fit_of(k);
    FitSpan& span = spans.try_emplace(InForce(node, anchor, k.raw_ns).raw_ns, FitSpan{f, f}).first->second;
    span = {std::min(span.lo, f), std::max(span.hi, f)};
  }
  for (const auto& [raw, span] : spans) NoteAnchorSpan(node, raw, span.lo, span.hi);
  book.erase(book.lower_bound(lo), book.upper_bound(hi));
  if (auto after = book.lower_bound(lo); after != book.begin()) {
    BookKnot& before = std::prev(after)->second;
    const FitAnchor& first = InForce(node, anchor, excerpt.knots.front().raw_ns);
    if (before.anchor_raw_ns != first.raw_ns && !Bends(node, before.anchor_raw_ns, first.raw_ns)) {
      before.continues = false;
    }
  }
  for (size_t i = 0; i < excerpt.knots.size(); ++i) {
    const TimebaseKnot& k = excerpt.knots[i];
    const bool last = i + 1 == excerpt.knots.size();
    book[fit_of(k)] =
        BookKnot{k.realtime_ns, InForce(node, anchor, k.raw_ns).raw_ns, last ? last_continues : true, k.raw_ns};
  }
}

const FitAnchor* FitPointBook::BentFrom(uint32_t node, const FitAnchor& anchor) const {
  const auto n = anchors_.find(node);
  if (n == anchors_.end()) return nullptr;
  const auto at = n->second.lower_bound(anchor.raw_ns);
  if (at == n->second.begin()) return nullptr;
  const FitAnchor& before = std::prev(at)->second;
  return std::llabs(before.FitOfRaw(anchor.raw_ns) - anchor.realtime_ns) <= 1 ? &before : nullptr;
}

bool FitPointBook::Bends(uint32_t node, int64_t from_raw_ns, int64_t to_raw_ns) const {
  const auto n = anchors_.find(node);
  if (n == anchors_.end()) return false;
  const auto to = n->second.find(to_raw_ns);
  if (to == n->second.end()) return false;
  const FitAnchor* from = BentFrom(node, to->second);
  return from != nullptr && from->raw_ns == from_raw_ns;
}

const FitAnchor& FitPointBook::InForce(uint32_t node, const FitAnchor& anchor, int64_t raw_ns) const {
  const auto n = anchors_.find(node);
  if (n == anchors_.end()) return anchor;
  if (raw_ns < anchor.raw_ns) {
    const FitAnchor* before = BentFrom(node, anchor);
    return before != nullptr ? *before : anchor;
  }
  const auto next = n->second.upper_bound(anchor.raw_ns);
  if (next == n->second.end() || raw_ns < next->first) return anchor;
  const FitAnchor* bent = BentFrom(node, next->second);
  return bent != nullptr && bent->raw_ns == anchor.raw_ns ? next->second : anchor;
}

void FitPointBook::ClipAtBend(uint32_t node, const FitAnchor& before, const FitAnchor& bend) {
  // Knots of `before` past the bend (a window's excerpt ends on the first
  // knot after it, which may lie past the bend) were keyed on the F the
  // node no longer read there: the bend's own excerpts key them again.
  auto& book = knots_[node];
  for (auto it = book.upper_bound(bend.realtime_ns); it != book.end();) {
    it = it->second.anchor_raw_ns == before.raw_ns && it->second.raw_ns >= bend.raw_ns ? book.erase(it) : std::next(it);
  }
  auto& spans = anchor_spans_[node];
  if (auto it = spans.find(before.raw_ns); it != spans.end()) it->second.hi = std::min(it->second.hi, bend.realtime_ns);
}

void FitPointBook::NoteAnchorSpan(uint32_t node, int64_t anchor_raw_ns, int64_t lo, int64_t hi) {
  auto& spans = anchor_spans_[node];
  for (const auto& [raw, span] : spans) {
    if (raw == anchor_raw_ns || span.hi < lo || hi < span.lo) continue;
    ambiguous_[node].push_back({std::max(lo, span.lo), std::min(hi, span.hi)});
  }
  auto [it, fresh] = spans.try_emplace(anchor_raw_ns, FitSpan{lo, hi});
  if (!fresh) it->second = {std::min(it->second.lo, lo), std::max(it->second.hi, hi)};
}

bool FitPointBook::Ambiguous(uint32_t node, int64_t fit_ns) const {
  const auto n = ambiguous_.find(node);
  if (n == ambiguous_.end()) return false;
  for (const FitSpan& span : n->second) {
    if (span.lo <= fit_ns && fit_ns <= span.hi) return true;
  }
  return false;
}

void FitPointBook::ExpireBefore(int64_t fit_ns) {
  for (auto& [node, spans] : ambiguous_) {
    std::erase_if(spans, [&](const FitSpan& s) { return s.hi < fit_ns; });
  }
  for (auto& [node, spans] : anchor_spans_) {
    std::erase_if(spans, [&](const auto& entry) { return entry.second.hi < fit_ns; });
  }

  for (auto it = points_.begin(); it != points_.end();) {
    auto& byfit = it->second;
    byfit.erase(byfit.begin(), byfit.lower_bound(fit_ns));
    it = byfit.empty() ? points_.erase(it) : std::next(it);
  }
  for (auto it = knots_.begin(); it != knots_.end();) {
    auto& byfit = it->second;
    auto keep = byfit.upper_bound(fit_ns);  // and the knot before it, whose segment holds fit_ns
    if (keep != byfit.begin()) byfit.erase(byfit.begin(), std::prev(keep));
    it = byfit.empty() ? knots_.erase(it) : std::next(it);
  }
  // The anchors before the one the oldest knot kept came with.
  for (auto it = anchors_.begin(); it != anchors_.end();) {
    const auto k = knots_.find(it->first);
    if (k == knots_.end()) {
      it = anchors_.erase(it);
      continue;
    }
    it->second.erase(it->second.begin(), it->second.lower_bound(k->second.begin()->second.anchor_raw_ns));
    it = std::next(it);
  }
}

std::optional<FitPointBook::Mapped> FitPointBook::ByKnots(uint32_t node, int64_t fit_ns) const {
  const auto n = knots_.find(node);
  if (n == knots_.end()) return std::nullopt;
  const auto after = n->second.upper_bound(fit_ns);
  if (after == n->second.begin() || after == n->second.end()) return std::nullopt;
  const auto before = std::prev(after);
  const BookKnot& k0 = before->second;
  const BookKnot& k1 = after->second;
  if (!k0.continues) return std::nullopt;
  if (k0.anchor_raw_ns != k1.anchor_raw_ns) return AcrossBend(node, fit_ns, k0, k1);
  const int64_t realtime = Interpolate(fit_ns, before->first, k0.realtime_ns, after->first, k1.realtime_ns);
  const auto d_fit = static_cast<double>(after->first - before->first);
  const auto d_rt = static_cast<double>(k1.realtime_ns - k0.realtime_ns);
  return Mapped{realtime - fit_ns, (d_rt - d_fit) / d_fit};
}

std::optional<FitPointBook::Mapped> FitPointBook::AcrossBend(uint32_t node, int64_t fit_ns, const BookKnot& k0,
                                                             const BookKnot& k1) const {
  if (!Bends(node, k0.anchor_raw_ns, k1.anchor_raw_ns)) return std::nullopt;  // both anchors known, then
  const auto& anchors = anchors_.at(node);
  const FitAnchor& bend = anchors.at(k1.anchor_raw_ns);
  const FitAnchor& side = fit_ns < bend.realtime_ns ? anchors.at(k0.anchor_raw_ns) : bend;
  const int64_t raw = side.RawOfFit(fit_ns);
  const int64_t realtime = Interpolate(raw, k0.raw_ns, k0.realtime_ns, k1.raw_ns, k1.realtime_ns);
  const double per_raw =
      static_cast<double>(k1.realtime_ns - k0.realtime_ns) / static_cast<double>(k1.raw_ns - k0.raw_ns);
  return Mapped{realtime - fit_ns, per_raw / (1.0 + static_cast<double>(side.rate_fine) / kFinePerNs) - 1.0};
}

std::optional<FitPointBook::Mapped> FitPointBook::MapAt(uint32_t node, int64_t fit_ns) {
  if (Ambiguous(node, fit_ns)) return std::nullopt;
  if (const std::optional<Mapped> m = ByKnots(node, fit_ns)) {
    ++stats_.mapped_by_knots;
    return m;
  }
  // A node that sends knots but whose knots do not cover the instant: its
  // own windows there were discarded (its clock stepped, its fit clock was
  // anchored again) or lost. A point's extrapolation to there errs by the
  // daemon's rate swings × the distance (12 µs under a PLL): unmapped, a
  // gap, which the trace tools cross with the node's knots.
  if (knots_.contains(node)) return std::nullopt;
  if (const std::optional<FitPoint> p = Near(node, fit_ns)) {
    ++stats_.mapped_by_point;
    return Mapped{p->RealtimeMinusFitAt(fit_ns), static_cast<double>(p->rate_fine) / kFinePerNs};
  }
  return std::nullopt;
}

std::optional<FitPoint> FitPointBook::Near(uint32_t node, int64_t fit_ns) const {
  const auto n = points_.find(node);
  if (n == points_.end()) return std::nullopt;
  const auto& byfit = n->second;
  auto after = byfit.lower_bound(fit_ns);
  const FitPoint* best = nullptr;
  if (after != byfit.end()) best = &after->second;
  if (after != byfit.begin()) {
    const FitPoint& before = std::prev(after)->second;
    if (best == nullptr || fit_ns - before.fit_ns < best->fit_ns - fit_ns) best = &before;
  }
  if (best == nullptr || std::llabs(best->fit_ns - fit_ns) > horizon_ns_) return std::nullopt;
  return *best;
}

bool FitPointBook::ToRealtime(OffsetsSnapshot* s) {
  const int64_t t = s->reference_instant_ns;
  std::vector<std::optional<Mapped>> mapped(s->nodes.size());  // at each node's own instant of T
  for (size_t i = 0; i < s->nodes.size(); ++i) {
    const NodeSolution& n = s->nodes[i];
    if (!n.reachable) continue;
    mapped[i] = MapAt(n.node, t + static_cast<int64_t>(std::llround(n.offset_ns)));
  }
  // The reference's d: the named node's, or the mean of the mapped nodes'
  // (the mean reference is the mean of the reachable nodes, which stay
  // reachable only where they are mapped).
  Mapped ref{0, 0};
  if (s->reference_node) {
    const std::optional<Mapped> m = MapAt(*s->reference_node, t);
    if (!m) {
      ++stats_.instants_unmapped;
      return false;
    }
    ref = *m;
  } else {
    __int128 sum = 0;
    double rate_sum = 0;
    int count = 0;
    for (const auto& m : mapped) {
      if (!m) continue;
      sum += m->d_ns;
      rate_sum += m->rate;
      ++count;
    }
    if (count > 0) ref = {static_cast<int64_t>(sum / count), rate_sum / count};
  }
  double mean_shift = 0;  // the mean reference moves with the nodes it lost
  int kept = 0;
  for (size_t i = 0; i < s->nodes.size(); ++i) {
    NodeSolution& n = s->nodes[i];
    if (!n.reachable) continue;
    if (!mapped[i]) {
      ++stats_.nodes_unmapped;
      n = NodeSolution{.node = n.node};
      continue;
    }
    n.offset_ns += static_cast<double>(mapped[i]->d_ns - ref.d_ns);
    n.drift = (1 + n.drift) * (1 + mapped[i]->rate) / (1 + ref.rate) - 1;
    if (n.page_drift) n.page_drift = (1 + *n.page_drift) * (1 + mapped[i]->rate) / (1 + ref.rate) - 1;
    n.discipline = FitDiscipline{mapped[i]->d_ns, mapped[i]->rate};
    mean_shift += n.offset_ns;
    ++kept;
  }
  if (!s->reference_node && kept > 0) {
    // Offsets against the mean of the nodes published.
    mean_shift /= kept;
    for (NodeSolution& n : s->nodes) {
      if (n.reachable) n.offset_ns -= mean_shift;
    }
  }
  s->reference_instant_ns = t + ref.d_ns;
  return true;
}

}  // namespace chronolink
