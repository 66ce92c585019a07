// Node ids of a solve and their indices, for both solvers. Probe-graph ids
// are usually dense (0..N-1, or a block of them): a table then marks and
// indexes them, where sorting two ids per estimate and a binary search per
// lookup were ~15 % of a 10 000-node solve (docs/PERFORMANCE.md §6). Sparse
// ids fall back to the sort and the search. Pure: no clocks, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "agent/solve/global_solver.h"

namespace chronolink {

// Every node id of the edges (and the named reference), sorted, once each.
std::vector<uint32_t> SortedNodeIds(std::span<const EdgeEstimate> edges, std::optional<uint32_t> reference);

// The index of a node id in a sorted list of unique ids, or -1.
class NodeIndex {
 public:
  NodeIndex() = default;  // of no ids
  explicit NodeIndex(std::vector<uint32_t> sorted_ids);
  int operator()(uint32_t id) const {
    if (!table_.empty()) return id >= first_ && id - first_ < table_.size() ? table_[id - first_] : -1;
    return Search(id);
  }
  // Over a solution's nodes (in id order, as every solve writes them).
  static NodeIndex Of(const SolveResult& r);

 private:
  int Search(uint32_t id) const;

  std::vector<uint32_t> ids_;
  uint32_t first_ = 0;
  std::vector<int> table_;  // empty: sparse ids, searched
};

}  // namespace chronolink
