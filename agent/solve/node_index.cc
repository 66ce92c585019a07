#include "agent/solve/node_index.h"

#include <algorithm>
#include <utility>

namespace chronolink {
namespace {

// A table costs a char or an int per id in the span: worth it while the
// span is within a small multiple of what it holds.
bool Dense(uint64_t span, uint64_t count) { return span <= 8 * count + 64; }

}  // namespace

std::vector<uint32_t> SortedNodeIds(std::span<const EdgeEstimate> edges, std::optional<uint32_t> reference) {
  std::vector<uint32_t> ids;
  if (edges.empty() && !reference) return ids;
  uint32_t lo = reference.value_or(edges.empty() ? 0 : edges.front().node), hi = lo;
  for (const auto& e : edges) {
    lo = std::min({lo, e.node, e.peer});
    hi = std::max({hi, e.node, e.peer});
  }
  const uint64_t span = static_cast<uint64_t>(hi) - lo + 1;
  if (Dense(span, 2 * static_cast<uint64_t>(edges.size()))) {
    std::vector<char> seen(span, 0);
    for (const auto& e : edges) seen[e.node - lo] = seen[e.peer - lo] = 1;
    if (reference) seen[*reference - lo] = 1;
    for (uint64_t i = 0; i < span; ++i) {
      if (seen[i]) ids.push_back(static_cast<uint32_t>(lo + i));
    }
    return ids;
  }
  ids.reserve(edges.size() * 2 + 1);
  for (const auto& e : edges) {
    ids.push_back(e.node);
    ids.push_back(e.peer);
  }
  if (reference) ids.push_back(*reference);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

NodeIndex::NodeIndex(std::vector<uint32_t> sorted_ids) : ids_(std::move(sorted_ids)) {
  if (ids_.empty()) return;
  const uint64_t span = static_cast<uint64_t>(ids_.back()) - ids_.front() + 1;
  if (!Dense(span, ids_.size())) return;
  first_ = ids_.front();
  table_.assign(span, -1);
  for (size_t i = 0; i < ids_.size(); ++i) table_[ids_[i] - first_] = static_cast<int>(i);
}

int NodeIndex::Search(uint32_t id) const {
  const auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
  return it != ids_.end() && *it == id ? static_cast<int>(it - ids_.begin()) : -1;
}

NodeIndex NodeIndex::Of(const SolveResult& r) {
  std::vector<uint32_t> ids;
  ids.reserve(r.nodes.size());
  for (const NodeSolution& s : r.nodes) ids.push_back(s.node);
  return NodeIndex(std::move(ids));
}

}  // namespace chronolink
