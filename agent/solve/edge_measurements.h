// What both solvers (global_solver.h, spanning_tree_solver.h) solve from:
// per directed edge, the one estimate chosen at the reference instant T,
// carried to T, and the components those measurements connect. One rule for
// choosing, one for carrying, one for the reference component, so the two
// solvers can only differ in how they combine the same measurements.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "agent/solve/global_solver.h"
#include "agent/solve/node_index.h"

namespace chronolink {

struct EdgeMeasurement {
  int from = 0, to = 0;         // node indices: offset_ns ≈ x[to] − x[from]
  int64_t x0_ns = 0;            // the estimate's own instant (its prober's clock)
  double offset_ns = 0;         // the estimate carried to T on its drift
  double drift = 0;             // its drift, d(offset)/dt
  double uncertainty_ns = 0;    // its own, floored, grown by the extrapolation to T
  double shared_ns = -1;        // the part of uncertainty_ns the link's other direction shares; < 0 unknown
};

// Per directed edge, the valid estimate closest to T (ties: the smaller
// uncertainty, then the first given), in (node, peer) order. Invalid
// estimates (self-edges, non-finite numbers, negative uncertainty) and
// those farther than the validity horizon from T are left out.
std::vector<const EdgeEstimate*> ChooseEstimates(std::span<const EdgeEstimate> edges, int64_t T,
                                                 const SolverOptions& opt);

// The chosen estimates as measurements at T, their nodes by `index_of`.
std::vector<EdgeMeasurement> MeasurementsAt(std::span<const EdgeEstimate> edges, int64_t T,
                                            const SolverOptions& opt, const NodeIndex& index_of);

// Which nodes the measurements connect, and which group is the reference's.
struct Components {
  std::vector<int> root;    // per node: its component's root (the smallest index in it)
  int reference_root = -1;  // -1: nothing to solve
  std::vector<int> label;   // per node: 0 the reference component, 1.. the others, in index order
  int count = 0;
};

// The components of `node_count` nodes joined by `for_each_join(join)`,
// which calls join(a, b) for every pair of node indices a measurement
// connects. The reference component is the named reference's
// (`reference_index`), else the largest of at least two nodes (ties: the
// lowest id).
template <typename ForEachJoin>
Components FindComponents(int node_count, ForEachJoin for_each_join, std::optional<int> reference_index) {
  std::vector<int> parent(node_count);
  std::iota(parent.begin(), parent.end(), 0);
  const auto root_of = [&parent](int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  for_each_join([&](int a, int b) {
    a = root_of(a), b = root_of(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);  // roots stay the smallest index
  });
  Components c;
  c.root.resize(node_count);
  for (int i = 0; i < node_count; ++i) c.root[i] = root_of(i);
  std::vector<int> root_size(node_count, 0);
  for (int i = 0; i < node_count; ++i) root_size[c.root[i]]++;
  if (reference_index) {
    c.reference_root = c.root[*reference_index];
  } else {
    for (int i = 0; i < node_count; ++i) {
      const int r = c.root[i];
      if (r == i && root_size[r] >= 2 && (c.reference_root < 0 || root_size[r] > root_size[c.reference_root])) {
        c.reference_root = r;
      }
    }
  }
  std::vector<int> label_of_root(node_count, -1);
  int next_label = 1;
  c.label.resize(node_count);
  for (int i = 0; i < node_count; ++i) {
    const int r = c.root[i];
    if (label_of_root[r] < 0) label_of_root[r] = (r == c.reference_root) ? 0 : next_label++;
    c.label[i] = label_of_root[r];
  }
  c.count = next_label - 1 + (c.reference_root >= 0 ? 1 : 0);
  return c;
}

}  // namespace chronolink
