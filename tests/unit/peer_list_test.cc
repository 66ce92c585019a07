// The peer list an etcd leader sends each node (agent/coord/peer_list.h):
// generated lists survive the round trip, and every way a message can be
// wrong is refused with a reason, never taken in part.
#include "agent/coord/peer_list.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/support/property_cases.h"

namespace chronolink {
namespace {

using trace::testing::CasesFromEnvironment;

// A list as a leader could build it: ids strictly increasing anywhere in
// uint32, addresses of IPv4, IPv6 and host-name shapes up to the limit.
PeerList RandomList(std::mt19937_64& rng) {
  PeerList list;
  list.leader = std::uniform_int_distribution<uint32_t>(1, UINT32_MAX)(rng);
  const size_t n = std::uniform_int_distribution<size_t>(0, 40)(rng) == 0
                       ? kMaxPeerListSize
                       : std::uniform_int_distribution<size_t>(0, 16)(rng);
  uint32_t id = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t room = UINT32_MAX - id;
    if (room == 0) break;
    id += std::uniform_int_distribution<uint32_t>(1, std::min<uint32_t>(room, 1u << (rng() % 32)))(rng);
    Member m;
    m.id = id;
    m.port = std::uniform_int_distribution<uint16_t>(1, UINT16_MAX)(rng);
    switch (rng() % 3) {
      case 0:
        m.address =
            std::to_string(rng() % 256) + "." + std::to_string(rng() % 256) + ".0." + std::to_string(rng() % 256);
        break;
      case 1:
        m.address = "fd00::" + std::to_string(rng() % 9999);
        break;
      default:
        m.address = std::string(std::uniform_int_distribution<size_t>(1, kMaxMemberAddressBytes)(rng), 'a');
    }
    list.peers.push_back(std::move(m));
  }
  return list;
}

TEST(PeerListTest, GeneratedListsSurviveTheRoundTrip) {
  std::mt19937_64 rng(2026'12'04);
  const int64_t cases = CasesFromEnvironment(2000);
  for (int64_t i = 0; i < cases; ++i) {
    const PeerList sent = RandomList(rng);
    PeerList got;
    std::string error;
    ASSERT_TRUE(DecodePeerList(EncodePeerList(sent), &got, &error)) << error << "\n" << EncodePeerList(sent);
    ASSERT_EQ(got, sent);
  }
}

TEST(PeerListTest, RefusesEveryMalformedList) {
  const std::string member = R"({"id": 2, "address": "10.0.0.2", "port": 7319})";
  auto with_peers = [](const std::string& peers) { return std::string(R"({"leader": 1, "peers": [)") + peers + "]}"; };
  std::string too_many;
  for (size_t i = 1; i <= kMaxPeerListSize + 1; ++i) {
    too_many += std::string(i == 1 ? "" : ",") + R"({"id": )" + std::to_string(i) + R"(, "address": "a", "port": 1})";
  }
  const std::vector<std::string> bad = {
      "",
      "[]",
      "{",
      R"({"peers": []})",
      R"({"leader": 0, "peers": []})",
      R"({"leader": -1, "peers": []})",
      R"({"leader": 4294967296, "peers": []})",
      R"({"leader": 1.5, "peers": []})",
      R"({"leader": "1", "peers": []})",
      R"({"leader": 1})",
      R"({"leader": 1, "peers": {}})",
      with_peers(too_many),
      with_peers("3"),
      with_peers(R"({"id": 0, "address": "a", "port": 1})"),
      with_peers(R"({"id": 2, "address": "a", "port": 0})"),
      with_peers(R"({"id": 2, "address": "a", "port": 65536})"),
      with_peers(R"({"id": 2, "address": "a", "port": 7.5})"),
      with_peers(R"({"id": 4294967296, "address": "a", "port": 1})"),
      with_peers(R"({"id": 2, "address": "", "port": 1})"),
      with_peers(R"({"id": 2, "address": 7, "port": 1})"),
      with_peers(R"({"id": 2, "port": 1})"),
      with_peers(R"({"id": 2, "address": ")" + std::string(kMaxMemberAddressBytes + 1, 'a') + R"(", "port": 1})"),
      with_peers(member + "," + member),                                // twice
      with_peers(R"({"id": 3, "address": "a", "port": 1},)" + member),  // out of order
  };
  for (const std::string& text : bad) {
    PeerList got;
    got.leader = 99;
    std::string error;
    EXPECT_FALSE(DecodePeerList(text, &got, &error)) << text.substr(0, 200);
    EXPECT_FALSE(error.empty()) << text.substr(0, 200);
    EXPECT_EQ(got.leader, 99u) << "a refused list was taken in part";
  }
  PeerList got;
  std::string error;
  EXPECT_TRUE(DecodePeerList(with_peers(member), &got, &error)) << error;
  EXPECT_TRUE(DecodePeerList(with_peers(too_many.substr(0, too_many.rfind(",{"))), &got, &error)) << error;
  EXPECT_EQ(got.peers.size(), kMaxPeerListSize);
}

// Whatever bytes arrive, the decoder answers: a list that passes every rule
// or a refusal.
TEST(PeerListTest, CorruptedListsAreRefusedOrValid) {
  std::mt19937_64 rng(7);
  const int64_t cases = CasesFromEnvironment(20000);
  for (int64_t i = 0; i < cases; ++i) {
    std::string text = EncodePeerList(RandomList(rng));
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips && !text.empty(); ++f) text[rng() % text.size()] = static_cast<char>(rng());
    PeerList got;
    std::string error;
    if (!DecodePeerList(text, &got, &error)) {
      ASSERT_FALSE(error.empty());
      continue;
    }
    ASSERT_NE(got.leader, 0u);
    ASSERT_LE(got.peers.size(), kMaxPeerListSize);
    for (size_t p = 0; p < got.peers.size(); ++p) {
      ASSERT_NE(got.peers[p].id, 0u);
      ASSERT_NE(got.peers[p].port, 0u);
      ASSERT_FALSE(got.peers[p].address.empty());
      if (p > 0) {
        ASSERT_GT(got.peers[p].id, got.peers[p - 1].id);
      }
    }
  }
}

}  // namespace
}  // namespace chronolink
