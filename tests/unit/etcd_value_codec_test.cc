// Sealed etcd values (agent/coord/etcd/etcd_value_seal.h, etcd_value_codec.h):
// what a writer without the cluster key, or a replay of an honest value,
// can put under the prefix, and that each is refused for the right reason.
#include "agent/coord/etcd/etcd_value_codec.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <sstream>
#include <string>

#include "agent/coord/etcd/member_view.h"

namespace chronolink {
namespace {

constexpr char kPrefix[] = "/chronolink/7/";
constexpr int64_t kNow = 1'764'000'000'000'000'000;  // a REALTIME instant (ns)
constexpr int64_t kLease = 0x7a11;
constexpr int64_t kSecond = 1'000'000'000;

ClusterKey KeyOf(uint8_t fill) {
  ClusterKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(fill + i);
  return k;
}

EtcdKeyValue Kv(std::string key, std::string value, int64_t lease) {
  EtcdKeyValue kv;
  kv.key = std::move(key);
  kv.value = std::move(value);
  kv.lease = lease;
  return kv;
}

class EtcdValueCodecTest : public ::testing::Test {
 protected:
  EtcdValueCodec Codec(uint32_t self, uint8_t key_fill = 1) {
    return EtcdValueCodec(KeyOf(key_fill), kPrefix, self);
  }
};

TEST(EtcdValueSealTest, OpensWhatItSealedAndNothingElse) {
  const EtcdValueSeal seal(KeyOf(1));
  const SealHeader h{3, kLease, 17, kNow};
  const std::string key = std::string(kPrefix) + "members/3";
  const std::string value = seal.Seal(key, h, "{\"id\":3}");
  SealHeader got;
  std::string_view body;
  ASSERT_EQ(seal.Open(key, value, &got, &body), SealResult::kOk);
  EXPECT_EQ(got, h);
  EXPECT_EQ(body, "{\"id\":3}");

  // Every byte counts: the body, each header number, the key it lives under.
  std::string tampered = value;
  tampered.back() = '}' == tampered.back() ? ']' : '}';
  EXPECT_EQ(seal.Open(key, tampered, &got, &body), SealResult::kBadMac);
  for (const char* field : {"writer=3", "term=31249", "seq=17"}) {
    std::string v = value;
    const size_t at = v.find(field);
    ASSERT_NE(at, std::string::npos) << field << " in " << v;
    v[at + std::string(field).size() - 1] ^= 1;  // last digit changes
    EXPECT_EQ(seal.Open(key, v, &got, &body), SealResult::kBadMac) << field;
  }
  EXPECT_EQ(seal.Open(std::string(kPrefix) + "members/4", value, &got, &body), SealResult::kBadMac);
  // Another cluster's key.
  EXPECT_EQ(EtcdValueSeal(KeyOf(2)).Open(key, value, &got, &body), SealResult::kBadMac);
  // The same MAC in upper-case hex is another spelling of the value: not
  // the writer's, not accepted (etcd_value_fuzz found it accepted).
  std::string upper = value;
  const size_t mac_at = upper.find("mac=") + 4;
  bool changed = false;
  for (size_t i = mac_at; i < mac_at + 2 * EtcdValueSeal::kMacSize; ++i) {
    if (upper[i] >= 'a' && upper[i] <= 'f') upper[i] = static_cast<char>(upper[i] - 'a' + 'A'), changed = true;
  }
  ASSERT_TRUE(changed) << value;
  EXPECT_EQ(seal.Open(key, upper, &got, &body), SealResult::kUnsealed);
}

TEST(EtcdValueSealTest, AnythingNotInTheLayoutIsUnsealed) {
  const EtcdValueSeal seal(KeyOf(1));
  const std::string key = "/k";
  SealHeader got;
  std::string_view body;
  const std::string mac(64, '0');
  for (const std::string& v : {
           std::string("{\"id\":3,\"address\":\"10.0.0.9\",\"port\":7319}"),  // what 0.x wrote
           std::string(""),
           std::string("chronolink-sealed-v1"),
           "chronolink-sealed-v1 writer=3 term=1 seq=1 t_ns=1 mac=" + mac,  // no newline
           "chronolink-sealed-v1 writer=-3 term=1 seq=1 t_ns=1 mac=" + mac + "\n{}",
           "chronolink-sealed-v1 writer=3 term=1 seq=-1 t_ns=1 mac=" + mac + "\n{}",
           "chronolink-sealed-v1 writer=3 term=1 seq=1 t_ns=1 mac=" + mac.substr(2) + "\n{}",
           "chronolink-sealed-v1 writer=3 term=1 seq=1 t_ns=1 mac=" + mac + " extra=1\n{}",
           "chronolink-sealed-v1 term=1 writer=3 seq=1 t_ns=1 mac=" + mac + "\n{}",
           "chronolink-sealed-v1 writer= 3 term=1 seq=1 t_ns=1 mac=" + mac + "\n{}",
           "chronolink-sealed-v1 writer=3 term=1 seq=1 t_ns=99999999999999999999 mac=" + mac + "\n{}",
           std::string(300, 'x') + "\n{}",
       }) {
    EXPECT_EQ(seal.Open(key, v, &got, &body), SealResult::kUnsealed) << v;
  }
  // Right layout, wrong MAC.
  EXPECT_EQ(seal.Open(key, "chronolink-sealed-v1 writer=3 term=1 seq=1 t_ns=1 mac=" + mac + "\n{}", &got, &body),
            SealResult::kBadMac);
}

TEST_F(EtcdValueCodecTest, MembersAreTheirWritersAndLiveUnderTheirLease) {
  EtcdValueCodec node3 = Codec(3);
  const EtcdValueCodec reader = Codec(1);
  const Member m{3, "10.0.0.3", 7319};
  const std::string value = node3.SealMember(m, kLease, kNow);
  Member got;
  EXPECT_EQ(reader.OpenMember(Kv(reader.MemberKey(3), value, kLease), 3, &got), std::nullopt);
  EXPECT_EQ(got, m);
  // Put back after the lease ended (without it, or under another).
  EXPECT_EQ(reader.OpenMember(Kv(reader.MemberKey(3), value, 0), 3, &got), EtcdRefusal::kNotLeaseBound);
  EXPECT_EQ(reader.OpenMember(Kv(reader.MemberKey(3), value, kLease + 1), 3, &got),
            EtcdRefusal::kNotLeaseBound);
  // Moved to another member's key: the MAC covers the key.
  EXPECT_EQ(reader.OpenMember(Kv(reader.MemberKey(4), value, kLease), 4, &got), EtcdRefusal::kBadMac);
  // A node (with the key) registering someone else.
  const std::string other = node3.SealMember(Member{4, "10.0.0.66", 7319}, kLease, kNow);
  EXPECT_EQ(reader.OpenMember(Kv(reader.MemberKey(4), other, kLease), 4, &got), EtcdRefusal::kWrongWriter);
  // A writer without the key: plain JSON pointing probes at a victim.
  EXPECT_EQ(reader.OpenMember(Kv(reader.MemberKey(9), EncodeMember(Member{9, "192.0.2.1", 7319}), kLease), 9, &got),
            EtcdRefusal::kUnsealed);
}

TEST_F(EtcdValueCodecTest, TheLeaderKeyNamesItsWriterOnly) {
  EtcdValueCodec node2 = Codec(2);
  const EtcdValueCodec reader = Codec(1);
  LeaderClaim claim;
  EXPECT_EQ(reader.OpenLeader(Kv(reader.LeaderKey(), node2.SealLeader(kLease, kNow), kLease), &claim), std::nullopt);
  EXPECT_EQ(claim, (LeaderClaim{2, kLease}));
  EXPECT_EQ(reader.OpenLeader(Kv(reader.LeaderKey(), "99", 0), &claim), EtcdRefusal::kUnsealed);
  EXPECT_EQ(reader.OpenLeader(Kv(reader.LeaderKey(), node2.SealLeader(kLease, kNow), 0), &claim),
            EtcdRefusal::kNotLeaseBound);
}

TEST(EtcdRefusalLogTest, CountsEveryRefusalByReason) {
  EtcdRefusalLog log;
  for (int i = 0; i < 5; ++i) log.Note(EtcdRefusal::kUnsealed, "/k", 1 + i);
  log.Note(EtcdRefusal::kBadMac, "/k", 10);
  EXPECT_EQ(log.total(), 6u);
  EXPECT_EQ(log.counts()[static_cast<size_t>(EtcdRefusal::kUnsealed)], 5u);
  EXPECT_EQ(log.counts()[static_cast<size_t>(EtcdRefusal::kBadMac)], 1u);
  EXPECT_EQ(EtcdRefusalName(EtcdRefusal::kNotLeaseBound), "not_lease_bound");
}

// The key of a refused value is the etcd writer's choice: a newline in it
// once forged a whole agent log line, an escape sequence drove the
// terminal. The log line must stay one line of printable text.
TEST(EtcdRefusalLogTest, AKeyCannotForgeALogLineOrDriveTheTerminal) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto logger = std::make_shared<spdlog::logger>("capture", sink);
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  EtcdRefusalLog log;
  log.Note(EtcdRefusal::kUnsealed,
           "/chronolink/c1/members/3\n[2026-11-29 07:00:00.000] [info] leader is node 9\x1b[2J\x1b]0;owned\x07", 1);
  spdlog::set_default_logger(previous);
  const std::string text = captured.str();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_NE(text.find("\\n[2026-11-29"), std::string::npos) << "the newline is shown escaped: " << text;
}

}  // namespace
}  // namespace chronolink
