// The spanning-tree baseline: see spanning_tree_solver.h. The selection of
// estimates, the components and the reference choice follow Solve's rules
// (docs/solver.md) so that the two differ only in how they combine the
// measurements.
#include "agent/solve/spanning_tree_solver.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <utility>
#include <vector>

#include "agent/solve/edge_measurements.h"
#include "agent/solve/link_covariance.h"
#include "agent/solve/node_index.h"
#include "agent/solve/prober_instants.h"

namespace chronolink {
namespace {

// One directed measurement at T, by node index: y ≈ x[b] − x[a].
// A measurement at T (edge_measurements.h) and the link it belongs to.
struct Measurement : EdgeMeasurement {
  int link = -1;
};

// The measurements of one node pair in both directions, combined into one
// value of x[hi] − x[lo] by their inverse-variance mean.
struct Link {
  int lo = 0, hi = 0;
  double sum_wy = 0, sum_wyd = 0;
  LinkCovariance covariance;  // of its directions, as Solve counts it; holds Σw
  double y() const { return sum_wy / covariance.sum_w(); }
  double yd() const { return sum_wyd / covariance.sum_w(); }
  // The variance of the mean were the directions independent: what the
  // tree is chosen by, so that the choice rests on each link's own
  // precision alone.
  double var() const { return 1.0 / covariance.sum_w(); }
  // Its variance with the directions' shared error counted: what the
  // reported uncertainty sums.
  double correlated_var(double rho) const { return covariance.MeanVariance(rho); }
};

struct Problem {
  std::vector<uint32_t> ids;      // every node seen (and a named reference), sorted
  std::vector<Measurement> meas;  // one per directed edge, ordered by (node, peer)
  std::vector<Link> links;        // ordered by (lo, hi)

  NodeIndex index;                // of ids
  int IndexOf(uint32_t id) const { return index(id); }
};

Problem BuildProblem(std::span<const EdgeEstimate> edges, int64_t T, const SolverOptions& opt) {
  Problem p;
  p.ids = SortedNodeIds(edges, opt.reference_node);
  p.index = NodeIndex(p.ids);
  std::map<std::pair<int, int>, int> link_of;
  // The global solve's measurements (edge_measurements.h): the same choice.
  for (const EdgeMeasurement& em : MeasurementsAt(edges, T, opt, p.index)) {
    Measurement m;
    static_cast<EdgeMeasurement&>(m) = em;
    auto [it, added] =
        link_of.emplace(std::pair{std::min(m.from, m.to), std::max(m.from, m.to)}, static_cast<int>(link_of.size()));
    m.link = it->second;
    p.meas.push_back(m);
  }
  p.links.resize(link_of.size());
  for (const auto& [pair, index] : link_of) {
    p.links[index].lo = pair.first;
    p.links[index].hi = pair.second;
  }
  for (const Measurement& m : p.meas) {
    Link& l = p.links[m.link];
    const double w = 1.0 / (m.uncertainty_ns * m.uncertainty_ns);
    const double sign = m.to == l.hi ? 1.0 : -1.0;  // from→to measures x[to] − x[from]
    l.sum_wy += w * sign * m.offset_ns;
    l.sum_wyd += w * sign * m.drift;
    l.covariance.Add(w, m.shared_ns);
  }
  return p;
}

// Connected components, labelled as Solve labels them: 0 for the
// reference's (the named reference's, else the largest with at least two
// nodes, ties to the lowest id), then 1, 2, … in order of lowest id.
// The shortest-path tree from the anchor, by link variance: each node's
// least-variance chain of links to the anchor.
struct Tree {
  std::vector<int> parent_link;  // per node index; -1: the anchor or not reached
  std::vector<int> order;        // reached nodes, every parent before its children
  std::vector<double> path_var;  // of the chain to the anchor, directions independent: the choice
};

Tree ShortestPathTree(const Problem& p, int anchor) {
  const int n = static_cast<int>(p.ids.size());
  std::vector<std::vector<int>> adjacent(n);
  for (int l = 0; l < static_cast<int>(p.links.size()); ++l) {
    adjacent[p.links[l].lo].push_back(l);
    adjacent[p.links[l].hi].push_back(l);
  }
  Tree t;
  t.parent_link.assign(n, -1);
  t.path_var.assign(n, std::numeric_limits<double>::infinity());
  std::vector<char> done(n, 0);
  // (variance, node): equal variances pop the lower index first, so the
  // tree is a function of the input alone.
  using Item = std::pair<double, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  t.path_var[anchor] = 0;
  queue.emplace(0.0, anchor);
  while (!queue.empty()) {
    const auto [d, i] = queue.top();
    queue.pop();
    if (done[i]) continue;
    done[i] = 1;
    t.order.push_back(i);
    for (int l : adjacent[i]) {
      const int j = p.links[l].lo == i ? p.links[l].hi : p.links[l].lo;
      const double nd = d + p.links[l].var();
      if (!done[j] && nd < t.path_var[j]) {
        t.path_var[j] = nd;
        t.parent_link[j] = l;
        queue.emplace(nd, j);
      }
    }
  }
  return t;
}

// Sums a per-link quantity (value of x[hi] − x[lo]) from the anchor down
// the tree.
std::vector<double> SumAlongTree(const Problem& p, const Tree& t,
                                 const std::function<double(const Link&)>& value) {
  std::vector<double> x(p.ids.size(), 0.0);
  for (int i : t.order) {
    const int l = t.parent_link[i];
    if (l < 0) continue;  // the anchor
    const Link& link = p.links[l];
    x[i] = i == link.hi ? x[link.lo] + value(link) : x[link.hi] - value(link);
  }
  return x;
}

// Var(x_i): the variances of the links on i's path to the anchor, summed
// (the links' errors are independent of each other).
std::vector<double> PathVariance(const Problem& p, const Tree& t, const std::vector<double>& link_var) {
  std::vector<double> var(p.ids.size(), 0.0);
  for (int i : t.order) {
    const int l = t.parent_link[i];
    if (l < 0) continue;
    const Link& link = p.links[l];
    var[i] = var[i == link.hi ? link.lo : link.hi] + link_var[l];
  }
  return var;
}

// Var(x_i − mean over the tree's nodes). x_i is the sum of the links on its
// path, so Cov(x_i, x_j) is the variance of their common path; summing over
// j counts each path link once per node below it (its subtree size s_l):
//   Σ_j C_ij = Σ_{l ∈ path(i)} v_l·s_l,   Σ_jk C_jk = Σ_l v_l·s_l².
std::vector<double> VarianceAgainstMean(const Problem& p, const Tree& t, const std::vector<double>& link_var) {
  const int n_all = static_cast<int>(p.ids.size());
  const double n = static_cast<double>(t.order.size());
  std::vector<double> below(n_all, 1.0);
  for (auto it = t.order.rbegin(); it != t.order.rend(); ++it) {
    const int l = t.parent_link[*it];
    if (l < 0) continue;
    const Link& link = p.links[l];
    below[*it == link.hi ? link.lo : link.hi] += below[*it];
  }
  std::vector<double> row(n_all, 0.0);
  double total = 0;
  for (int i : t.order) {
    const int l = t.parent_link[i];
    if (l < 0) continue;
    const Link& link = p.links[l];
    const int parent = i == link.hi ? link.lo : link.hi;
    row[i] = row[parent] + link_var[l] * below[i];
    total += link_var[l] * below[i] * below[i];
  }
  std::vector<double> var = PathVariance(p, t, link_var);
  for (int i : t.order) var[i] += -2.0 * row[i] / n + total / (n * n);
  return var;
}

void SubtractMean(const Tree& t, std::vector<double>& x) {
  double sum = 0;
  for (int i : t.order) sum += x[i];
  const double mean = sum / static_cast<double>(t.order.size());
  for (int i : t.order) x[i] -= mean;
}

SolveResult SolveOnce(std::span<const EdgeEstimate> edges, int64_t T, const SolverOptions& opt) {
  const Problem p = BuildProblem(edges, T, opt);
  const Components comps = FindComponents(
      static_cast<int>(p.ids.size()),
      [&p](const auto& join) {
        for (const Link& l : p.links) join(l.lo, l.hi);
      },
      opt.reference_node ? std::optional<int>(p.IndexOf(*opt.reference_node)) : std::nullopt);
  const int n = static_cast<int>(p.ids.size());

  SolveResult result;
  result.reference_instant_ns = T;
  result.reference_node = opt.reference_node;
  result.components = comps.count;
  result.nodes.resize(n);
  for (int i = 0; i < n; ++i) {
    result.nodes[i].node = p.ids[i];
    result.nodes[i].component = comps.label[i];
  }

  int anchor = -1;
  if (opt.reference_node) {
    anchor = p.IndexOf(*opt.reference_node);
  } else {
    for (int i = 0; i < n && anchor < 0; ++i)
      if (comps.label[i] == 0) anchor = i;  // the lowest id of the reference component
  }
  std::vector<double> x(n, 0.0), xd(n, 0.0), var(n, 0.0);
  std::vector<char> reachable(n, 0);
  std::vector<char> in_tree(p.links.size(), 0);
  if (anchor >= 0) {
    const Tree tree = ShortestPathTree(p, anchor);
    for (int i : tree.order) {
      reachable[i] = 1;
      if (tree.parent_link[i] >= 0) in_tree[tree.parent_link[i]] = 1;
    }
    x = SumAlongTree(p, tree, [](const Link& l) { return l.y(); });
    xd = SumAlongTree(p, tree, [](const Link& l) { return l.yd(); });
    std::vector<double> link_var;
    link_var.reserve(p.links.size());
    for (const Link& l : p.links) link_var.push_back(l.correlated_var(opt.direction_correlation));
    var = PathVariance(p, tree, link_var);
    if (!opt.reference_node) {
      var = VarianceAgainstMean(p, tree, link_var);
      SubtractMean(tree, x);
      SubtractMean(tree, xd);
    }
  }

  std::vector<double> sum_wr2(n, 0.0), sum_w(n, 0.0);
  result.edges.reserve(p.meas.size());
  for (const Measurement& m : p.meas) {
    EdgeResidual er;
    er.node = p.ids[m.from];
    er.peer = p.ids[m.to];
    er.x0_ns = m.x0_ns;
    er.measured_ns = m.offset_ns;
    er.uncertainty_ns = m.uncertainty_ns;
    ++result.nodes[m.from].edges_used;
    ++result.nodes[m.to].edges_used;
    er.in_reference_component = reachable[m.from] != 0;
    if (er.in_reference_component) {
      er.residual_ns = m.offset_ns - (x[m.to] - x[m.from]);
      er.robust_weight = in_tree[m.link] ? 1.0 : 0.0;
      const double w = 1.0 / (m.uncertainty_ns * m.uncertainty_ns);
      for (int k : {m.from, m.to}) {
        sum_wr2[k] += w * er.residual_ns * er.residual_ns;
        sum_w[k] += w;
      }
    }
    result.edges.push_back(er);
  }
  for (int i = 0; i < n; ++i) {
    if (!reachable[i]) continue;
    NodeSolution& s = result.nodes[i];
    s.reachable = true;
    s.offset_ns = x[i];
    s.drift = xd[i];
    s.uncertainty_ns = std::sqrt(std::max(var[i], 0.0));
    s.residual_ns = sum_w[i] > 0 ? std::sqrt(sum_wr2[i] / sum_w[i]) : 0.0;
  }
  return result;
}

}  // namespace

SolveResult SolveSpanningTree(std::span<const EdgeEstimate> edges, int64_t T, const SolverOptions& opt) {
  // As in Solve: x0 is on the prober's clock and T on the reference's, so
  // passes find every prober's offset and the last evaluates each estimate
  // at the prober's instant that corresponds to T (prober_instants.h).
  SolveResult probers = SolveOnce(edges, T, opt);
  std::vector<EdgeEstimate> shifted = ShiftedToProbers(edges, probers);
  for (int pass = ProberPasses(edges, probers); pass > 1; --pass) {
    probers = SolveOnce(shifted, T, opt);
    shifted = ShiftedToProbers(edges, probers);
  }
  return SolveOnce(shifted, T, opt);
}

}  // namespace chronolink
