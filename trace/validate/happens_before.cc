#include "trace/validate/happens_before.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace chronolink::trace {
namespace {

// to - from in ps, saturated: a difference beyond ±106 days is still ordered.
int64_t SaturatingDiffPs(const TraceInstant& to, const TraceInstant& from) {
  if (const auto d = DiffPs(to, from)) return *d;
  return to > from ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

const CollectiveEvent* EarliestEnd(const std::vector<const CollectiveEvent*>& events) {
  return *std::min_element(events.begin(), events.end(),
                           [](const auto* a, const auto* b) { return a->end < b->end; });
}

const CollectiveEvent* LatestStart(const std::vector<const CollectiveEvent*>& events) {
  return *std::max_element(events.begin(), events.end(),
                           [](const auto* a, const auto* b) { return a->start < b->start; });
}

// Nearest rank: the smallest value with at least q of the sample at or below it.
int64_t NearestRank(const std::vector<int64_t>& sorted, double q) {
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

std::optional<Violation> CheckInstance(const MatchedInstance& instance, int64_t tolerance_ps,
                                       const ParticipantNamer& name) {
  if (!instance.checked || instance.events.size() < 2) return std::nullopt;
  const CollectiveEvent* ended = EarliestEnd(instance.events);
  const CollectiveEvent* started = LatestStart(instance.events);
  const int64_t by = SaturatingDiffPs(started->start, ended->end);
  if (by <= tolerance_ps) return std::nullopt;
  Violation v;
  v.family = instance.family;
  v.key = instance.key;
  v.seq = instance.seq;
  v.ordinal = instance.ordinal;
  v.ended_first = name(*ended);
  v.started_last = name(*started);
  v.ended_first_at = ended->end;
  v.started_last_at = started->start;
  v.by_ps = by;
  v.participants = static_cast<int>(instance.events.size());
  return v;
}

std::optional<Violation> CheckTransfer(const MatchedTransfer& transfer, int64_t tolerance_ps,
                                       const ParticipantNamer& name) {
  if (!transfer.checked) return std::nullopt;
  const int64_t by = SaturatingDiffPs(transfer.send->start, transfer.recv->end);
  if (by <= tolerance_ps) return std::nullopt;
  Violation v;
  v.family = transfer.recv->name->family;
  v.key = transfer.key;
  v.seq = transfer.recv->seq;
  v.ordinal = transfer.ordinal;
  v.transfer = true;
  v.ended_first = name(*transfer.recv);
  v.started_last = name(*transfer.send);
  v.ended_first_at = transfer.recv->end;
  v.started_last_at = transfer.send->start;
  v.by_ps = by;
  v.participants = 2;
  return v;
}

InstanceSkew SkewOf(const MatchedInstance& instance) {
  const auto& ev = instance.events;
  const auto [first_start, last_start] = std::minmax_element(
      ev.begin(), ev.end(), [](const auto* a, const auto* b) { return a->start < b->start; });
  const auto [first_end, last_end] =
      std::minmax_element(ev.begin(), ev.end(), [](const auto* a, const auto* b) { return a->end < b->end; });
  return {SaturatingDiffPs((*last_start)->start, (*first_start)->start),
          SaturatingDiffPs((*last_end)->end, (*first_end)->end)};
}

SkewStats Summarise(std::vector<int64_t>& values) {
  SkewStats s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = static_cast<int64_t>(values.size());
  s.p50_ps = NearestRank(values, 0.50);
  s.p90_ps = NearestRank(values, 0.90);
  s.p99_ps = NearestRank(values, 0.99);
  s.max_ps = values.back();
  return s;
}

}  // namespace chronolink::trace
