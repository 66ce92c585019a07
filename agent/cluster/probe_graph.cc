#include "agent/cluster/probe_graph.h"

#include <algorithm>
#include <iterator>
#include <limits>

namespace chronolink {
namespace {

// splitmix64's finaliser: a fixed, well-mixed 64-bit permutation.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Rendezvous key of `id` in order number `salt`.
uint64_t NodeKey(uint64_t seed, uint64_t salt, uint32_t id) {
  return Mix(Mix(seed ^ Mix(salt + 1)) ^ id);
}

// Preference of the unordered pair {a, b} for fill edges.
uint64_t PairKey(uint64_t seed, uint32_t a, uint32_t b) {
  if (a > b) std::swap(a, b);
  return Mix(Mix(seed ^ 0x70616972ULL) ^ ((uint64_t{a} << 32) | b));
}

class Builder {
 public:
  Builder(const std::vector<uint32_t>& ids, uint64_t seed)
      : ids_(ids), seed_(seed), adj_(ids.size()) {}

  bool Adjacent(int a, int b) const {
    const auto& list = adj_[a];
    return std::find(list.begin(), list.end(), b) != list.end();
  }
  bool Add(int a, int b) {
    if (a == b || Adjacent(a, b)) return false;
    adj_[a].push_back(b);
    adj_[b].push_back(a);
    return true;
  }
  int Degree(int a) const { return static_cast<int>(adj_[a].size()); }

  // Member indices in rendezvous order `salt` (ties by id, i.e. index).
  std::vector<int> Order(uint64_t salt) const {
    std::vector<std::pair<uint64_t, int>> keyed(ids_.size());
    for (size_t i = 0; i < ids_.size(); ++i) {
      keyed[i] = {NodeKey(seed_, salt, ids_[i]), static_cast<int>(i)};
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<int> order(keyed.size());
    for (size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].second;
    return order;
  }

  // Joins every node to its successors at the given distances in the cycle.
  void Ring(uint64_t salt, int max_distance) {
    const std::vector<int> order = Order(salt);
    const size_t n = order.size();
    for (size_t i = 0; i < n; ++i) {
      for (int d = 1; d <= max_distance; ++d) Add(order[i], order[(i + d) % n]);
    }
  }

  void Remove(int a, int b) {
    adj_[a].erase(std::find(adj_[a].begin(), adj_[a].end(), b));
    adj_[b].erase(std::find(adj_[b].begin(), adj_[b].end(), a));
  }

  // Raises nodes left below `target` by duplicate ring edges. Every choice is
  // made in a global hash order of pairs (not in id order), so a join/leave
  // only changes the fill edges of the few nodes whose deficit it changes.
  //  1. pair deficit nodes with each other, best pair key first;
  //  2. join a remaining deficit node to its best node below `max_degree`;
  //  3. when that is impossible (tight in-degree bound, tiny clusters),
  //     split an edge {x, y}: u-x and u-y (u two short), or u-x and v-y
  //     (u and v one short each, already adjacent).
  void Fill(int target, int max_degree) {
    const int n = static_cast<int>(ids_.size());
    auto deficit = [&] {
      std::vector<int> out;
      for (int i = 0; i < n; ++i) {
        if (Degree(i) < target) out.push_back(i);
      }
      return out;
    };
    std::vector<int> low = deficit();
    if (low.empty()) return;
    std::vector<std::pair<uint64_t, std::pair<int, int>>> pairs;
    for (size_t i = 0; i < low.size(); ++i) {
      for (size_t j = i + 1; j < low.size(); ++j) {
        pairs.push_back({PairKey(seed_, ids_[low[i]], ids_[low[j]]), {low[i], low[j]}});
      }
    }
    std::sort(pairs.begin(), pairs.end());
    for (const auto& [key, ab] : pairs) {
      if (Degree(ab.first) < target && Degree(ab.second) < target) Add(ab.first, ab.second);
    }
    for (int u : deficit()) {
      while (Degree(u) < target) {
        const int best = BestOfAll(u, [&](int v) { return Degree(v) < max_degree; });
        if (best < 0) break;
        Add(u, best);
      }
    }
    for (int u : deficit()) {
      while (Degree(u) < target && SplitEdge(u, target)) {
      }
    }
  }

  const std::vector<std::vector<int>>& adjacency() const { return adj_; }

 private:
  // Step 3 of Fill; false when no edge can be split.
  bool SplitEdge(int u, int target) {
    const int n = static_cast<int>(ids_.size());
    int partner = -1;  // another deficit node, for the one-short case
    if (target - Degree(u) == 1) {
      for (int v = 0; v < n && partner < 0; ++v) {
        if (v != u && Degree(v) < target) partner = v;
      }
      if (partner < 0) return false;  // odd total: one node stays short
    }
    int best_x = -1, best_y = -1;
    uint64_t best_key = 0;
    for (int x = 0; x < n; ++x) {
      if (x == u || x == partner || Adjacent(u, x)) continue;
      for (int y : adj_[x]) {
        if (y == u || y == partner) continue;
        const bool ok = partner < 0 ? !Adjacent(u, y) : !Adjacent(partner, y);
        if (!ok) continue;
        const uint64_t key = PairKey(seed_, ids_[x], ids_[y]);
        if (best_x < 0 || key < best_key) {
          best_x = x;
          best_y = y;
          best_key = key;
        }
      }
    }
    if (best_x < 0) return false;
    Remove(best_x, best_y);
    Add(u, best_x);
    Add(partner < 0 ? u : partner, best_y);
    return true;
  }

  template <typename Ok>
  int Best(int u, const std::vector<int>& candidates, Ok ok) const {
    int best = -1;
    uint64_t best_key = std::numeric_limits<uint64_t>::max();
    for (int v : candidates) {
      if (v == u || !ok(v) || Adjacent(u, v)) continue;
      const uint64_t key = PairKey(seed_, ids_[u], ids_[v]);
      if (best < 0 || key < best_key) {
        best = v;
        best_key = key;
      }
    }
    return best;
  }
  template <typename Ok>
  int BestOfAll(int u, Ok ok) const {
    std::vector<int> all(ids_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    return Best(u, all, ok);
  }

  const std::vector<uint32_t>& ids_;
  uint64_t seed_;
  std::vector<std::vector<int>> adj_;
};

}  // namespace

ProbeGraph ProbeGraph::Build(std::vector<uint32_t> members,
                             const ProbeGraphOptions& options) {
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());

  ProbeGraph graph;
  graph.members_ = std::move(members);
  const int n = static_cast<int>(graph.members_.size());

  int k = options.k > 0 ? options.k : std::min(6, std::max(n - 1, 1));
  graph.k_ = k;
  // Ring 0 contributes 2 (k <= 2) or 4, each further ring 2.
  const int full_degree = std::max(2, k + (k % 2));
  graph.target_degree_ = std::min(full_degree, std::max(n - 1, 0));
  int max_degree = options.max_in_degree > 0 ? options.max_in_degree : 2 * k;
  graph.max_degree_ = std::max(max_degree, graph.target_degree_);

  Builder builder(graph.members_, options.seed);
  if (n >= 2) {
    if (n - 1 <= full_degree) {
      for (int a = 0; a < n; ++a) {
        for (int b = a + 1; b < n; ++b) builder.Add(a, b);
      }
    } else {
      builder.Ring(0, full_degree >= 4 ? 2 : 1);
      for (int r = 1; 4 + 2 * r <= full_degree; ++r) builder.Ring(r, 1);
      builder.Fill(graph.target_degree_, graph.max_degree_);
    }
  }

  graph.adjacency_.resize(n);
  for (int a = 0; a < n; ++a) {
    auto& peers = graph.adjacency_[a];
    for (int b : builder.adjacency()[a]) {
      peers.push_back(graph.members_[b]);
      if (a < b) graph.edges_.emplace_back(graph.members_[a], graph.members_[b]);
    }
    std::sort(peers.begin(), peers.end());
  }
  std::sort(graph.edges_.begin(), graph.edges_.end());
  return graph;
}

ProbeGraph ProbeGraph::Update(const ProbeGraph& /*previous*/,
                              std::vector<uint32_t> members,
                              const ProbeGraphOptions& options) {
  return Build(std::move(members), options);
}

int ProbeGraph::IndexOf(uint32_t node) const {
  auto it = std::lower_bound(members_.begin(), members_.end(), node);
  if (it == members_.end() || *it != node) return -1;
  return static_cast<int>(it - members_.begin());
}

bool ProbeGraph::Contains(uint32_t node) const { return IndexOf(node) >= 0; }

std::vector<uint32_t> ProbeGraph::PeersOf(uint32_t node) const {
  const int i = IndexOf(node);
  if (i < 0) return {};
  return adjacency_[i];
}

std::vector<ProbeEdge> ProbeGraph::DirectedEdges() const {
  std::vector<ProbeEdge> directed;
  directed.reserve(2 * edges_.size());
  for (const auto& [a, b] : edges_) {
    directed.emplace_back(a, b);
    directed.emplace_back(b, a);
  }
  std::sort(directed.begin(), directed.end());
  return directed;
}

bool ProbeGraph::Connected() const {
  const size_t n = members_.size();
  if (n <= 1) return true;
  std::vector<char> seen(n, 0);
  std::vector<int> stack{0};
  seen[0] = 1;
  size_t reached = 1;
  while (!stack.empty()) {
    const int a = stack.back();
    stack.pop_back();
    for (uint32_t peer : adjacency_[a]) {
      const int b = IndexOf(peer);
      if (!seen[b]) {
        seen[b] = 1;
        ++reached;
        stack.push_back(b);
      }
    }
  }
  return reached == n;
}

ProbeGraphDegreeStats ProbeGraph::DegreeStats() const {
  ProbeGraphDegreeStats stats;
  if (adjacency_.empty()) return stats;
  stats.min = std::numeric_limits<int>::max();
  size_t total = 0;
  for (const auto& peers : adjacency_) {
    const int d = static_cast<int>(peers.size());
    stats.min = std::min(stats.min, d);
    stats.max = std::max(stats.max, d);
    total += peers.size();
  }
  stats.mean = static_cast<double>(total) / static_cast<double>(adjacency_.size());
  return stats;
}

ProbeGraph::Changes ProbeGraph::EdgeChanges(const ProbeGraph& a,
                                            const ProbeGraph& b) {
  Changes changes;
  std::set_difference(b.edges_.begin(), b.edges_.end(), a.edges_.begin(),
                      a.edges_.end(), std::back_inserter(changes.added));
  std::set_difference(a.edges_.begin(), a.edges_.end(), b.edges_.begin(),
                      b.edges_.end(), std::back_inserter(changes.removed));
  return changes;
}

}  // namespace chronolink
