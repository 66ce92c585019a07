#include "trace/report/node_series.h"

#include <algorithm>

namespace chronolink::trace::report {
namespace {

// Appends index i to `runs`, extending the last run when i follows it.
void AddToRuns(size_t i, std::vector<IndexRange>* runs) {
  if (!runs->empty() && runs->back().last + 1 == i) {
    runs->back().last = i;
  } else {
    runs->push_back({i, i});
  }
}

void AccumulateRanges(const OffsetRecord& r, bool first, NodeSeries* s) {
  if (first) {
    s->offset_min_ns = s->offset_max_ns = r.offset_ns;
    s->sigma_min_ns = s->sigma_max_ns = r.uncertainty_ns;
    return;
  }
  s->offset_min_ns = std::min(s->offset_min_ns, r.offset_ns);
  s->offset_max_ns = std::max(s->offset_max_ns, r.offset_ns);
  s->sigma_min_ns = std::min(s->sigma_min_ns, r.uncertainty_ns);
  s->sigma_max_ns = std::max(s->sigma_max_ns, r.uncertainty_ns);
}

// Walks the node's records against the run's instants: missing instants,
// unreachable runs, set-aside instants and solved stretches in one pass.
// `set_aside(i)`: whether record i is a stalled agent's.
template <typename SetAside>
void Classify(const RunTimeline& timeline, SetAside set_aside, NodeSeries* s) {
  size_t plotted = 0;
  const std::vector<int64_t>& instants = timeline.instants;
  size_t j = 0;  // next run instant not yet accounted for
  for (size_t i = 0; i < s->records.size(); ++i) {
    const OffsetRecord& r = s->records[i];
    bool missed_before = false;
    while (j < instants.size() && instants[j] < r.t_ns) {
      AddToRuns(j++, &s->missing_runs);
      missed_before = true;
    }
    if (j < instants.size() && instants[j] == r.t_ns) ++j;  // the record's own instant
    if (!r.reachable) {
      AddToRuns(i, &s->unreachable_runs);
      ++s->unreachable;
      continue;
    }
    ++s->reachable;
    if (set_aside(i)) {
      AddToRuns(i, &s->set_aside_runs);
      ++s->set_aside;
      s->set_aside_sigma_max_ns = std::max(s->set_aside_sigma_max_ns, r.uncertainty_ns);
      continue;
    }
    AccumulateRanges(r, plotted++ == 0, s);
    const bool continues = i > 0 && s->records[i - 1].reachable && !missed_before &&
                           !s->solved_stretches.empty() && s->solved_stretches.back().last + 1 == i;
    if (continues) {
      s->solved_stretches.back().last = i;
    } else {
      s->solved_stretches.push_back({i, i});
    }
  }
  while (j < instants.size()) AddToRuns(j++, &s->missing_runs);
  for (const IndexRange& run : s->missing_runs) s->missing += run.last - run.first + 1;
}

}  // namespace

double RunTimeline::SecondsSinceFirst(int64_t t_ns) const {
  const __int128 difference = static_cast<__int128>(t_ns) - instants.front();
  return static_cast<double>(difference) * 1e-9;
}

RunTimeline BuildTimeline(const OffsetsInput& offsets) {
  RunTimeline timeline;
  timeline.instants.reserve(offsets.records.size());
  for (const OffsetRecord& r : offsets.records) timeline.instants.push_back(r.t_ns);
  std::sort(timeline.instants.begin(), timeline.instants.end());
  timeline.instants.erase(std::unique(timeline.instants.begin(), timeline.instants.end()),
                          timeline.instants.end());
  timeline.instants.shrink_to_fit();
  if (timeline.instants.size() >= 2) {
    std::vector<int64_t> spacings;
    spacings.reserve(timeline.instants.size() - 1);
    for (size_t i = 1; i < timeline.instants.size(); ++i) {
      // Instants are sorted and unique; a spacing beyond int64 saturates.
      int64_t spacing = 0;
      if (__builtin_sub_overflow(timeline.instants[i], timeline.instants[i - 1], &spacing)) spacing = INT64_MAX;
      spacings.push_back(spacing);
    }
    std::nth_element(spacings.begin(), spacings.begin() + spacings.size() / 2, spacings.end());
    timeline.period_ns = spacings[spacings.size() / 2];
  }
  return timeline;
}

std::vector<NodeSeries> BuildNodeSeries(const OffsetsInput& offsets, const RunTimeline& timeline,
                                        const std::vector<bool>& set_aside) {
  std::vector<NodeSeries> series;
  const std::span<const OffsetRecord> all(offsets.records);
  for (size_t begin = 0; begin < all.size();) {
    size_t end = begin;
    while (end < all.size() && all[end].node == all[begin].node) ++end;
    NodeSeries s;
    s.node = all[begin].node;
    s.records = all.subspan(begin, end - begin);
    Classify(
        timeline, [&](size_t i) { return !set_aside.empty() && set_aside[begin + i]; }, &s);
    series.push_back(std::move(s));
    begin = end;
  }
  return series;
}

}  // namespace chronolink::trace::report
