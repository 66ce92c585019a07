// agent_stats.json rendered from a snapshot: the names docs/formats.md
// lists, the values given, the sections others render kept as they are.
#include "agent/export/agent_stats_json.h"

#include <gtest/gtest.h>

namespace chronolink {
namespace {

TEST(AgentStatsJson, RendersTheSnapshot) {
  AgentStatsSnapshot s;
  s.node_id = 3;
  s.session_epoch = 12345678901234567890ULL;
  s.final = true;
  s.windows_written = 7;
  s.floor_candidate_mismatches = 1;
  s.counters.duplicate_datagrams = 2;
  s.counters.tap_bucket_full = 5;
  s.peers[4].pairs_sent = 11;
  s.probe_interval_ns[4] = 50'000'000;
  s.peers[9].pairs_sent = 1;  // a peer with no interval known
  s.cluster = {{"backend", "static"}};
  const nlohmann::ordered_json j = AgentStatsJson(s);
  EXPECT_EQ(j["schema"], "chronolink.agent_stats.v1");
  EXPECT_EQ(j["node"], 3);
  EXPECT_EQ(j["session"], "12345678901234567890") << "a 64-bit epoch is text, not a double";
  EXPECT_EQ(j["final"], true);
  EXPECT_EQ(j["windows_written"], 7);
  EXPECT_EQ(j["floor_candidate_mismatches"], 1);
  EXPECT_EQ(j["duplicate_datagrams"], 2);
  EXPECT_EQ(j["tap_records"]["bucket_full"], 5);
  EXPECT_EQ(j["peers"]["4"]["pairs_sent"], 11);
  EXPECT_EQ(j["peers"]["4"]["probe_interval_us"], 50'000);
  EXPECT_EQ(j["peers"]["9"]["probe_interval_us"], 0);
  EXPECT_EQ(j["cluster"]["backend"], "static");
  EXPECT_TRUE(j.contains("rx_stamp_coverage") && j.contains("tx_stamp_coverage"));
}

}  // namespace
}  // namespace chronolink
