// Node ids and their indices for the solvers (agent/solve/node_index.h):
// dense ids go through a table, sparse ones through a sort and a search;
// both must give the same sorted ids and the same indices.
#include "agent/solve/node_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace chronolink {
namespace {

EdgeEstimate Edge(uint32_t node, uint32_t peer) {
  EdgeEstimate e;
  e.node = node;
  e.peer = peer;
  return e;
}

TEST(NodeIndex, DenseAndSparseIdsAreSortedOnceAndIndexed) {
  const uint32_t kFar = 4'000'000'000u;
  for (uint32_t scale : {1u, 50'000'000u}) {  // a table, then a search
    const std::vector<EdgeEstimate> edges{Edge(7 * scale, 3 * scale), Edge(3 * scale, 7 * scale),
                                          Edge(5 * scale, 3 * scale), Edge(7 * scale, 5 * scale)};
    const std::vector<uint32_t> ids = SortedNodeIds(edges, 11 * scale);
    EXPECT_EQ(ids, (std::vector<uint32_t>{3 * scale, 5 * scale, 7 * scale, 11 * scale})) << scale;
    const NodeIndex index(ids);
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(index(ids[i]), static_cast<int>(i)) << scale;
    EXPECT_EQ(index(4 * scale), -1) << "between ids";
    EXPECT_EQ(index(0), -1) << "below";
    EXPECT_EQ(index(kFar), -1) << "above";
  }
}

TEST(NodeIndex, EmptyInputsAndAReferenceAlone) {
  EXPECT_TRUE(SortedNodeIds({}, std::nullopt).empty());
  EXPECT_EQ(SortedNodeIds({}, 42u), std::vector<uint32_t>{42});
  const NodeIndex none;
  EXPECT_EQ(none(0), -1);
  // The extremes of the id range, next to each other and far apart.
  const std::vector<EdgeEstimate> edges{Edge(0, UINT32_MAX), Edge(UINT32_MAX - 1, UINT32_MAX)};
  const std::vector<uint32_t> ids = SortedNodeIds(edges, std::nullopt);
  EXPECT_EQ(ids, (std::vector<uint32_t>{0, UINT32_MAX - 1, UINT32_MAX}));
  const NodeIndex index(ids);
  EXPECT_EQ(index(UINT32_MAX), 2);
  EXPECT_EQ(index(1), -1);
}

TEST(NodeIndex, OfASolutionFollowsItsNodes) {
  SolveResult r;
  for (uint32_t id : {2u, 4u, 9u}) r.nodes.push_back(NodeSolution{.node = id});
  const NodeIndex index = NodeIndex::Of(r);
  EXPECT_EQ(index(9), 2);
  EXPECT_EQ(index(3), -1);
}

}  // namespace
}  // namespace chronolink
