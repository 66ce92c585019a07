// The cluster probe graph: which peers each node probes. Pure: no I/O and no
// randomness from the environment, so every node that knows the same member
// list and options derives the same graph (docs/probe-graph.md).
//
// The graph is undirected: an edge {a, b} means a probes b AND b probes a
// (every edge is measured in both directions), so a node's peer list is its
// undirected neighbourhood and its out-degree equals its in-degree.
//
// Construction (all orders are rendezvous-hash orders of the node ids, never
// positions in the member list, so one join/leave only touches the ids next
// to it in each order):
//   * ring 0: the ids sorted by hash(seed, 0, id); each id is joined to its
//     successor and to the successor after that (the "square" of a ring):
//     a Hamiltonian cycle (connectivity) plus a triangle at every position
//     (short cycles for loop consistency);
//   * rings 1..R-1: the ids sorted by hash(seed, r, id), each joined to its
//     successor: random chords that keep the diameter logarithmic;
//   * fill: a node left below the target degree because two rings produced
//     the same edge is paired with other such nodes (then with any node below
//     the in-degree bound), best first by a hash of the pair.
//
// Mapping of k to the undirected degree: ring 0 gives 4 (2 when k <= 2) and
// each extra ring 2, so the target degree is D = max(2, k rounded up to
// even), capped at n-1; when n-1 <= D the graph is complete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace chronolink {

struct ProbeGraphOptions {
  // Peers each node probes; 0 means the default min(6, n-1).
  int k = 0;
  uint64_t seed = 0x636c6f636b6c6e6bULL;  // "clocklnk"
  // Upper bound on any node's degree (= in-degree = out-degree); 0 means 2k.
  // Raised to the target degree when set below it.
  int max_in_degree = 0;
};

struct ProbeGraphDegreeStats {
  int min = 0;
  int max = 0;
  double mean = 0.0;
};

// An undirected edge, first < second.
using ProbeEdge = std::pair<uint32_t, uint32_t>;

class ProbeGraph {
 public:
  ProbeGraph() = default;

  // Builds the graph of a member list (any order; duplicates ignored).
  static ProbeGraph Build(std::vector<uint32_t> members,
                          const ProbeGraphOptions& options = {});

  // The graph after a membership change. The construction is a function of
  // the member set alone (a node that joins later has no history to repair),
  // and its consistent-hash orders make that function stable: see
  // docs/probe-graph.md for the measured edge churn. `previous` is only used
  // by callers to diff against (EdgeChanges).
  static ProbeGraph Update(const ProbeGraph& previous,
                           std::vector<uint32_t> members,
                           const ProbeGraphOptions& options = {});

  // Sorted member ids.
  const std::vector<uint32_t>& members() const { return members_; }
  size_t size() const { return members_.size(); }
  bool Contains(uint32_t node) const;

  // The peers `node` probes (and is probed by), sorted; empty for a
  // non-member.
  std::vector<uint32_t> PeersOf(uint32_t node) const;

  // Every undirected edge once, (a, b) with a < b, sorted.
  const std::vector<ProbeEdge>& edges() const { return edges_; }

  // The directed "who probes whom" list: both directions of every edge.
  std::vector<ProbeEdge> DirectedEdges() const;

  // True when every member can reach every other (true for 0 or 1 members).
  bool Connected() const;

  ProbeGraphDegreeStats DegreeStats() const;

  // The effective parameters after defaults and clamping.
  int k() const { return k_; }
  int target_degree() const { return target_degree_; }
  int max_in_degree() const { return max_degree_; }

  // Edges in exactly one of a and b (added = in b only, removed = in a only).
  struct Changes {
    std::vector<ProbeEdge> added;
    std::vector<ProbeEdge> removed;
    size_t total() const { return added.size() + removed.size(); }
  };
  static Changes EdgeChanges(const ProbeGraph& a, const ProbeGraph& b);

  friend bool operator==(const ProbeGraph& a, const ProbeGraph& b) {
    return a.members_ == b.members_ && a.edges_ == b.edges_;
  }

 private:
  int IndexOf(uint32_t node) const;  // -1 when absent

  std::vector<uint32_t> members_;
  std::vector<std::vector<uint32_t>> adjacency_;  // by member index, sorted ids
  std::vector<ProbeEdge> edges_;
  int k_ = 0;
  int target_degree_ = 0;
  int max_degree_ = 0;
};

}  // namespace chronolink
