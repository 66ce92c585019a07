#include "trace/correct/stalled_instants.h"

#include <algorithm>
#include <deque>

namespace chronolink::trace {

namespace {

double MedianOf(std::vector<double> v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

// The least of sigmas[i - half, i + half] for every i (a monotonic deque).
std::vector<double> SlidingMin(const std::vector<double>& sigmas, size_t half) {
  const size_t n = sigmas.size();
  std::vector<double> out(n);
  std::deque<size_t> window;  // indices whose sigmas increase
  size_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    for (; next < n && next <= i + half; ++next) {
      while (!window.empty() && sigmas[window.back()] >= sigmas[next]) window.pop_back();
      window.push_back(next);
    }
    while (window.front() + half < i) window.pop_front();
    out[i] = sigmas[window.front()];
  }
  return out;
}

// Indices into `sigmas` to set aside (one node's solved instants in order).
std::vector<bool> Stalled(const std::vector<double>& sigmas, const StalledInstantOptions& o) {
  const size_t n = sigmas.size();
  const size_t half = o.neighbours_each_side;
  // The median is at least the window's least: an instant within the factor
  // of that needs no median (a day of a node's instants costs no sorting).
  const std::vector<double> least = SlidingMin(sigmas, half);
  std::vector<bool> candidate(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (!(sigmas[i] > o.sigma_factor * least[i])) continue;
    const size_t from = i > half ? i - half : 0;
    const size_t to = std::min(n, i + half + 1);
    const double median = MedianOf(
        {sigmas.begin() + static_cast<std::ptrdiff_t>(from), sigmas.begin() + static_cast<std::ptrdiff_t>(to)});
    candidate[i] = median > 0 && sigmas[i] > o.sigma_factor * median;
  }
  std::vector<bool> stalled(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (!candidate[i]) continue;
    size_t left = i, right = i;
    while (left > 0 && candidate[left]) --left;
    while (right + 1 < n && candidate[right]) ++right;
    // Both ordinary neighbours must exist and be far narrower: a run of wide
    // instants at the start (the first windows' sigmas) keeps them.
    if (candidate[left] || candidate[right]) continue;
    stalled[i] = sigmas[i] > o.sigma_factor * std::max(sigmas[left], sigmas[right]);
  }
  return stalled;
}

bool Ordinary(const OffsetRecord& r) { return r.reachable && !r.between_instants; }

}  // namespace

std::vector<bool> FindStalledInstants(const std::vector<OffsetRecord>& records, const StalledInstantOptions& options) {
  std::vector<bool> flags(records.size(), false);
  if (!(options.sigma_factor > 0)) return flags;
  for (size_t begin = 0; begin < records.size();) {
    size_t end = begin;
    std::vector<size_t> at;  // the node's ordinary instants
    std::vector<double> sigmas;
    while (end < records.size() && records[end].node == records[begin].node) {
      if (Ordinary(records[end])) {
        at.push_back(end);
        sigmas.push_back(records[end].uncertainty_ns);
      }
      ++end;
    }
    const std::vector<bool> stalled = Stalled(sigmas, options);
    for (size_t k = 0; k < at.size(); ++k) flags[at[k]] = stalled[k];
    begin = end;
  }
  return flags;
}

size_t SetAsideStalledInstants(std::vector<OffsetRecord>* records, const StalledInstantOptions& options) {
  const std::vector<bool> drop = FindStalledInstants(*records, options);
  size_t kept = 0;
  for (size_t i = 0; i < records->size(); ++i) {
    if (drop[i]) continue;
    if (kept != i) (*records)[kept] = std::move((*records)[i]);
    ++kept;
  }
  const size_t dropped = records->size() - kept;
  records->resize(kept);
  return dropped;
}

}  // namespace chronolink::trace
