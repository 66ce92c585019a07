// Who leads, as reads, watch events and campaigns tell it, merged by
// revision (agent/coord/etcd/leader_view.h): an answer that is older than what
// was applied must not bring back an old leader.
#include "agent/coord/etcd/leader_view.h"

#include <gtest/gtest.h>

namespace chronolink {
namespace {

const LeaderClaim kOld{3, 0x33}, kNew{1, 0x11};

TEST(LeaderView, ReadsAndChangesInOrder) {
  LeaderView v;
  EXPECT_TRUE(v.ApplyRead(kOld, 10));
  EXPECT_EQ(v.claim(), kOld);
  EXPECT_TRUE(v.ApplyChange(std::nullopt, 12));  // deleted
  EXPECT_FALSE(v.claim().has_value());
  EXPECT_TRUE(v.ApplyChange(kNew, 13));
  EXPECT_EQ(v.claim(), kNew);
  EXPECT_TRUE(v.ApplyRead(kNew, 20));
}

// The review's race: a read answered at revision 10 (old leader) is
// handled after the watch applied the delete (12) and the new leader (13).
TEST(LeaderView, AReadOlderThanAppliedEventsDoesNotBringTheOldLeaderBack) {
  LeaderView v;
  EXPECT_TRUE(v.ApplyChange(std::nullopt, 12));
  EXPECT_TRUE(v.ApplyChange(kNew, 13));
  EXPECT_FALSE(v.ApplyRead(kOld, 10));
  EXPECT_EQ(v.claim(), kNew);
  // A campaign's transaction that found the old key (mod revision 9).
  EXPECT_FALSE(v.ApplyChange(kOld, 9));
  EXPECT_EQ(v.claim(), kNew);
  // An event without a revision (the gateway left it out) still applies.
  EXPECT_TRUE(v.ApplyChange(std::nullopt, 0));
  EXPECT_FALSE(v.claim().has_value());
}

TEST(LeaderView, EtcdGoingBackInRevisionsStartsOver) {
  LeaderView v;
  EXPECT_TRUE(v.ApplyRead(kOld, 100));
  EXPECT_TRUE(v.ApplyChange(kNew, 105));
  EXPECT_TRUE(v.ApplyRead(kOld, 7));  // restored from a backup: the read is the truth
  EXPECT_EQ(v.claim(), kOld);
  EXPECT_TRUE(v.ApplyChange(kNew, 8));
  EXPECT_EQ(v.claim(), kNew);
}

}  // namespace
}  // namespace chronolink
