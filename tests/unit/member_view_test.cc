// The etcd backend's member list: reads of members/ and watch events merged
// by revision (agent/coord/etcd/member_view.h). Each case is one interleaving that
// a live cluster produces only by chance: a registration racing a read, a
// watch replaying from a compaction, etcd restored to an older revision.
#include "agent/coord/etcd/member_view.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace chronolink {
namespace {

constexpr char kPrefix[] = "/c/members/";

Member M(uint32_t id) { return Member{id, "10.0.0." + std::to_string(id), static_cast<uint16_t>(7000 + id)}; }

EtcdKeyValue Kv(uint32_t id, int64_t mod_revision) {
  EtcdKeyValue kv;
  kv.key = kPrefix + std::to_string(id);
  kv.value = EncodeMember(M(id));
  kv.mod_revision = mod_revision;
  return kv;
}
EtcdEvent Put(uint32_t id, int64_t revision) { return EtcdEvent{EtcdEvent::Type::kPut, Kv(id, revision)}; }
EtcdEvent Del(uint32_t id, int64_t revision) {
  EtcdEvent e{EtcdEvent::Type::kDelete, {}};
  e.kv.key = kPrefix + std::to_string(id);
  e.kv.mod_revision = revision;
  return e;
}

std::set<uint32_t> Ids(const MemberView& v) {
  std::set<uint32_t> ids;
  for (const auto& [id, m] : v.members()) ids.insert(id);
  return ids;
}

class MemberViewTest : public ::testing::Test {
 protected:
  // The plain member encoding, refusals counted: the agent's decoder also
  // checks the seal (etcd_value_codec_test.cc).
  uint64_t malformed_ = 0;
  MemberView view_{M(1), kPrefix, [this](const EtcdKeyValue& kv, uint32_t id, Member* out) {
                     const bool ok = DecodeMember(kv.value, out) && out->id == id;
                     if (!ok) ++malformed_;
                     return ok;
                   }};
  bool Events(std::vector<EtcdEvent> events) { return view_.ApplyEvents(events); }
};

TEST_F(MemberViewTest, ThisNodeIsAlwaysAMember) {
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1}));
  EXPECT_FALSE(view_.ApplyRead({}, 5));  // an empty read does not remove us
  EXPECT_FALSE(Events({Del(1, 6)}));
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1}));
  EXPECT_EQ(view_.members().at(1), M(1));
}

TEST_F(MemberViewTest, ReadsAndEventsInOrder) {
  EXPECT_TRUE(view_.ApplyRead({Kv(2, 3), Kv(3, 4)}, 4));
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 2, 3}));
  EXPECT_EQ(view_.members().at(3), M(3));
  EXPECT_TRUE(Events({Put(4, 5)}));
  EXPECT_TRUE(Events({Del(2, 6)}));
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 3, 4}));
  EXPECT_FALSE(Events({Put(4, 7)}));  // the same value again: no change
  EXPECT_FALSE(view_.ApplyRead({Kv(3, 4), Kv(4, 7)}, 7));
}

// The race a simultaneous start produced: node 3 registers (revision 10)
// while node 1's read is under way (it reads at revision 9); the watch
// delivers the put before the read's answer is applied.
TEST_F(MemberViewTest, ARegistrationDuringAReadIsKept) {
  EXPECT_TRUE(Events({Put(3, 10)}));
  view_.ApplyRead({Kv(2, 8)}, 9);
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 2, 3}));
}

TEST_F(MemberViewTest, ADepartureDuringAReadIsKept) {
  view_.ApplyRead({Kv(2, 8)}, 8);
  EXPECT_TRUE(Events({Del(2, 12)}));
  view_.ApplyRead({Kv(2, 8)}, 11);  // read before the delete
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1}));
}

// A watch that resumes from a compaction replays events the last read has
// already seen: they must not bring back a member that has since left.
TEST_F(MemberViewTest, ReplayedOldEventsAreIgnored) {
  view_.ApplyRead({Kv(2, 3)}, 20);  // member 3 joined at 10 and left at 15
  EXPECT_FALSE(Events({Put(3, 10)}));
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 2}));
  EXPECT_FALSE(Events({Del(2, 15)}));
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 2}));
  EXPECT_TRUE(Events({Put(3, 21)}));  // newer than the read: applied
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 2, 3}));
}

// A read newer than an event supersedes it; an older read does not.
TEST_F(MemberViewTest, AReadNewerThanAnEventWins) {
  Events({Put(3, 10)});
  view_.ApplyRead({Kv(2, 4)}, 12);  // 3 left again by revision 12
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 2}));
}

// etcd restored from a backup: revisions start lower. The new read is the
// truth, and events from the new history apply.
TEST_F(MemberViewTest, EtcdGoingBackInRevisionsStartsOver) {
  view_.ApplyRead({Kv(2, 90)}, 100);
  Events({Put(3, 105)});
  view_.ApplyRead({Kv(4, 6)}, 7);
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 4}));
  EXPECT_TRUE(Events({Put(5, 8)}));
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 4, 5}));
}

TEST_F(MemberViewTest, BadKeysAndValuesAreSkippedAndCounted) {
  EtcdKeyValue bad_value = Kv(2, 3);
  bad_value.value = "{\"id\": 2}";
  EtcdKeyValue wrong_id = Kv(3, 3);
  wrong_id.value = EncodeMember(M(4));
  EtcdKeyValue other_key = Kv(5, 3);
  other_key.key = "/c/leader";
  EtcdKeyValue not_a_number = Kv(6, 3);
  not_a_number.key = std::string(kPrefix) + "6x";
  EXPECT_FALSE(view_.ApplyRead({bad_value, wrong_id, other_key, not_a_number}, 3));
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1}));
  EXPECT_EQ(malformed_, 2u);

  EtcdEvent garbled = Put(7, 4);
  garbled.kv.value = "not json";
  EXPECT_FALSE(Events({garbled}));
  EXPECT_EQ(malformed_, 3u);
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1}));
}

// Ids and ports are the JSON's very integers: nlohmann's get<uint16_t>
// took port 72855 as 7319 (found by cluster_messages_fuzz).
TEST(DecodeMemberTest, RefusesNumbersThatDoNotFit) {
  Member m;
  EXPECT_TRUE(DecodeMember(R"({"id": 4294967295, "address": "10.0.0.2", "port": 65535})", &m));
  EXPECT_EQ(m, (Member{4294967295u, "10.0.0.2", 65535}));
  for (const char* bad : {R"({"id": 2, "address": "10.0.0.2", "port": 72855})",
                          R"({"id": 2, "address": "10.0.0.2", "port": -1})",
                          R"({"id": 2, "address": "10.0.0.2", "port": 7319.5})",
                          R"({"id": 4294967298, "address": "10.0.0.2", "port": 7319})",
                          R"({"id": -2, "address": "10.0.0.2", "port": 7319})",
                          R"({"id": 2.7, "address": "10.0.0.2", "port": 7319})",
                          R"({"id": "2", "address": "10.0.0.2", "port": 7319})"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(DecodeMember(bad, &m));
  }
}

// A refused put over a member's key leaves no registration there: the
// member is gone from the watch as it would be from a read.
TEST_F(MemberViewTest, ARefusedPutOverAMemberRemovesIt) {
  view_.ApplyRead({Kv(2, 3), Kv(3, 3)}, 3);
  EtcdEvent forged = Put(2, 4);
  forged.kv.value = "forged";
  EXPECT_TRUE(Events({forged}));
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 3}));
  // The read at a later revision agrees.
  EtcdKeyValue still_forged = Kv(2, 4);
  still_forged.value = "forged";
  EXPECT_FALSE(view_.ApplyRead({still_forged, Kv(3, 3)}, 5));
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 3}));
  // It registers again.
  EXPECT_TRUE(Events({Put(2, 6)}));
  EXPECT_EQ(Ids(view_), (std::set<uint32_t>{1, 2, 3}));
}

}  // namespace
}  // namespace chronolink
