// Two agents on the test bed while the probe-loss tc filter
// (bpf/probe_loss.bpf.c, attached through `chronolink-testbed probe-loss`)
// drops 10 % and 30 % of the probes both nodes send, so forward and reverse
// probes are both lost. With one pair per 2 ms and 1 s windows:
//  (a) every estimated window holds the truth of the virtual clocks within
//      its uncertainty band, and its error stays small;
//  (b) no window is lost silently: the windows follow each other without a
//      gap, the agent counts as many as edges.jsonl holds, each window's
//      pairs are all accounted for (complete + TX missing + lost), only the
//      window in progress at shutdown is not written, and a window without
//      an estimate has too few pure bounds to fit;
//  (c) the loss shows in the agents' counters and agrees with the filter's:
//      what one node's filter let through is what the other received, and
//      the lost tuples match the per-packet loss (1 - (1 - f)^4 of them).
// Bounds are loose (random drops, a loaded 2-core machine).
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "clock/virtual_clock.h"
#include "tests/integration/testbed_fixture.h"

namespace chronolink::testing {
namespace {

class ProbeLossTest : public TestbedFixture {
 protected:
  // Root, namespaces, the tap's toolchain and the loader built with it.
  bool RequireLoader() {
    if (!RequireTap()) return false;
#ifndef CHRONOLINK_PROBE_LOSS_BIN
    SkipOrFailOutsideCi("chronolink-probe-loss was not built (no eBPF toolchain)");
    return false;
#else
    return true;
#endif
  }

  // `chronolink-testbed probe-loss` on one node; its JSON, or a failure.
  nlohmann::json Loss(int node, const std::string& args) {
#ifdef CHRONOLINK_PROBE_LOSS_BIN
    std::string out;
    const std::string err = (dir_ / "probe_loss.err").string();
    const int rc = RunCapture(kTestbedCli + " probe-loss --name " + name_ + " --node " + std::to_string(node) +
                           " --loader " + CHRONOLINK_PROBE_LOSS_BIN + " " + args + " 2>" + err,
                       &out);
    std::ifstream e(err);
    const std::string stderr_text((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
    EXPECT_EQ(rc, 0) << args << ": " << out << stderr_text;
    auto j = nlohmann::json::parse(out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << out;
    return j.is_discarded() ? nlohmann::json::object() : j;
#else
    (void)node;
    (void)args;
    return nlohmann::json::object();
#endif
  }
};

class ProbeLossByFraction : public ProbeLossTest, public ::testing::WithParamInterface<double> {};

uint64_t NonPilot(const nlohmann::json& stats, const char* what) {
  uint64_t n = 0;
  for (const char* t : {"forward", "reverse", "followup"}) n += stats["by_type"][t][what].get<uint64_t>();
  return n;
}

TEST_P(ProbeLossByFraction, EstimatesHoldAndEveryLossIsCounted) {
  if (!RequireLoader()) return;
  const double f = GetParam();
  ASSERT_NO_FATAL_FAILURE(Up(2, "routed"));
  WriteClusterFiles();
  for (int node : {1, 2}) {
    const auto a = Loss(node, "--fraction " + std::to_string(f));
    ASSERT_FALSE(HasFailure());
    EXPECT_NEAR(a["fraction"].get<double>(), f, 1e-9);
    EXPECT_EQ(a["types"].size(), 4u) << a.dump();
    EXPECT_TRUE(a["pin"].is_string()) << "counters not pinned: " << a.dump();
  }

  const int64_t t0 = RealtimeNowNs();
  const VirtualClockParams clock[3] = {{}, {0, 0.0, t0}, {3'700'000, 45.0, t0}};
  const double duration = 14.0;
  const std::vector<std::string> args = {"--window-s", "1", "--probe-interval-us", "2000",
                                         "--probe-adaptive", "off"};
  StartAgent({1, clock[1], duration, args});
  StartAgent({2, clock[2], duration, args});
  ASSERT_TRUE(WaitAgents(duration + 20)) << AgentLog(1) << AgentLog(2);
  const nlohmann::json loss[3] = {{}, Loss(1, "--stats"), Loss(2, "--stats")};
  ASSERT_FALSE(HasFailure());

  for (int self : {1, 2}) {
    const int peer = 3 - self;
    SCOPED_TRACE("node " + std::to_string(self) + ", " + std::to_string(f) + " lost");
    const auto all_rows = ReadJsonl(OutputDir(self) / "edges.jsonl");
    std::ifstream sf(OutputDir(self) / "agent_stats.json");
    const auto stats = nlohmann::json::parse(sf, nullptr, false);
    ASSERT_FALSE(stats.is_discarded()) << AgentLog(self);
    const auto& pc = stats["peers"][std::to_string(peer)];

    // (b) Every window the agent wrote is there, in order, without a gap.
    EXPECT_EQ(stats["windows_written"].get<size_t>(), all_rows.size());
    std::vector<nlohmann::json> rows;
    for (const auto& r : all_rows) {
      if (r["timestamp_source"] == "kernel") rows.push_back(r);
    }
    ASSERT_GE(rows.size(), static_cast<size_t>(duration) - 2) << AgentLog(self);
    int64_t pairs = 0, lost = 0, estimated = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      if (i > 0) {
        EXPECT_EQ(r["window_start_ns"].get<int64_t>(), rows[i - 1]["window_end_ns"].get<int64_t>())
            << "a window is missing before " << r.dump();
      }
      EXPECT_FALSE(r["clock_step"].get<bool>()) << r.dump();
      // Each pair sent in the window ends as exactly one of these.
      EXPECT_EQ(r["pairs_sent"].get<int64_t>(), r["tuples_complete"].get<int64_t>() +
                                                    r["tx_stamps_missing"].get<int64_t>() +
                                                    r["lost"].get<int64_t>())
          << r.dump();
      pairs += r["pairs_sent"].get<int64_t>();
      lost += r["lost"].get<int64_t>();
      const bool partial = i == 0 || i + 1 == rows.size();  // the agent started / stopped inside
      if (r["estimator"] == "none") {
        // Counted reason: too few pure bounds on a side, and no min-delay fit.
        EXPECT_TRUE(r["pure_forward"].get<int>() < 8 || r["pure_reverse"].get<int>() < 8) << r.dump();
        continue;
      }
      if (!partial) ++estimated;
      // (a) The truth lies inside every window's band, and the error of a
      // full window is small (a partial one may hold a handful of tuples and
      // a band of tens of us).
      const RelativeTruth truth = TrueRelativeOffset(clock[self], clock[peer], r["x0_ns"].get<int64_t>());
      const double err = r["beta_ns"].get<double>() - truth.beta_ns;
      EXPECT_LE(std::abs(err), r["uncertainty_ns"].get<double>()) << r.dump();
      if (!partial) {
        EXPECT_LT(std::abs(err), 2000.0) << r.dump();
      }
    }
    // With ~500 pairs per window even 30 % loss leaves enough to fit every
    // full window; allow one miss on a loaded machine.
    EXPECT_GE(estimated, static_cast<int64_t>(rows.size()) - 3);
    // The one window not written is the one in progress at shutdown (it is
    // partial): its pairs are the only ones missing, at most a window's worth.
    const int64_t pairs_sent = pc["pairs_sent"].get<int64_t>();
    int64_t most_in_a_window = 0;
    for (const auto& r : rows) most_in_a_window = std::max(most_in_a_window, r["pairs_sent"].get<int64_t>());
    EXPECT_LE(pairs, pairs_sent);
    EXPECT_LE(pairs_sent - pairs, most_in_a_window * 13 / 10 + 20);

    // (c) The agent sent what the filter on its egress saw; its peer
    // received what that filter let through (nothing else loses packets).
    const uint64_t seen = NonPilot(loss[self], "seen");
    const uint64_t dropped = NonPilot(loss[self], "dropped");
    const uint64_t sent = pc["packets_sent"].get<uint64_t>();
    EXPECT_LE(seen, sent);
    EXPECT_GE(seen + 10, sent) << loss[self].dump();
    std::ifstream pf(OutputDir(peer) / "agent_stats.json");
    const auto peer_stats = nlohmann::json::parse(pf, nullptr, false);
    ASSERT_FALSE(peer_stats.is_discarded());
    const uint64_t received = peer_stats["peers"][std::to_string(self)]["packets_received"].get<uint64_t>();
    EXPECT_LE(received, seen - dropped);
    EXPECT_GE(received + (seen - dropped) / 50 + 10, seen - dropped);
    // The filter drops about f of what it sees (binomial: thousands seen).
    ASSERT_GT(seen, 2000u);
    const double drop_share = static_cast<double>(dropped) / static_cast<double>(seen);
    EXPECT_NEAR(drop_share, f, 0.03) << loss[self].dump();
    // A tuple needs all four of its probes: 1 - (1 - f)^4 of them are lost.
    const double lost_share = static_cast<double>(lost) / static_cast<double>(pairs);
    EXPECT_NEAR(lost_share, 1 - std::pow(1 - f, 4), 0.08) << lost << " of " << pairs;
    // A forward pair that lost only its first probe is counted by the peer.
    const double incomplete =
        peer_stats["peers"][std::to_string(self)]["forward_pairs_incomplete"].get<double>();
    EXPECT_NEAR(incomplete / static_cast<double>(pairs), f * (1 - f), 0.04) << incomplete;
    std::printf("[%.0f%% loss] node %d: %zu windows, %lld estimated, %lld of %lld tuples lost, "
                "filter dropped %llu of %llu probes, peer received %llu\n",
                f * 100, self, rows.size(), static_cast<long long>(estimated),
                static_cast<long long>(lost), static_cast<long long>(pairs),
                static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(seen),
                static_cast<unsigned long long>(received));
  }
}

INSTANTIATE_TEST_SUITE_P(Fractions, ProbeLossByFraction, ::testing::Values(0.10, 0.30),
                         [](const ::testing::TestParamInfo<double>& info) {
                           return "Loss" + std::to_string(static_cast<int>(std::lround(info.param * 100)));
                         });

// Every forward probe of one node: the other direction keeps everything,
// the filter's counters say which types it saw and dropped, and the edge
// that lost every tuple of its own still writes every window (its fits on
// the peer's session).
TEST_F(ProbeLossTest, DropsOnlyTheChosenTypesAndTeardownRemovesIt) {
  if (!RequireLoader()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "routed"));
  WriteClusterFiles();
  const auto a = Loss(1, "--fraction 1 --types forward");
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(a["pin"].is_string()) << a.dump();
  const std::filesystem::path pin = a["pin"].get<std::string>();
  EXPECT_TRUE(std::filesystem::exists(pin));

  const int64_t t0 = RealtimeNowNs();
  const std::vector<std::string> args = {"--window-s", "1", "--probe-interval-us", "5000",
                                         "--probe-adaptive", "off"};
  StartAgent({1, {0, 0.0, t0}, 5.0, args});
  StartAgent({2, {0, 0.0, t0}, 5.0, args});
  ASSERT_TRUE(WaitAgents(25)) << AgentLog(1) << AgentLog(2);
  const auto s = Loss(1, "--stats");
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(s["counters_from"], "pin");
  EXPECT_TRUE(s["attached"].get<bool>());
  // Every forward probe node 1 sent was dropped; its answers to node 2's
  // pairs (reverse, follow-up) and its pilots all passed.
  EXPECT_GT(s["by_type"]["forward"]["seen"].get<uint64_t>(), 100u) << s.dump();
  EXPECT_EQ(s["by_type"]["forward"]["dropped"], s["by_type"]["forward"]["seen"]) << s.dump();
  EXPECT_GT(s["by_type"]["reverse"]["seen"].get<uint64_t>(), 100u) << s.dump();
  EXPECT_EQ(s["by_type"]["reverse"]["dropped"].get<uint64_t>(), 0u) << s.dump();
  EXPECT_EQ(s["by_type"]["pilot"]["dropped"].get<uint64_t>(), 0u) << s.dump();
  std::ifstream f2(OutputDir(2) / "agent_stats.json");
  const auto st2 = nlohmann::json::parse(f2, nullptr, false);
  ASSERT_FALSE(st2.is_discarded());
  // No forward probe of node 1 reached node 2, so node 2 never answered
  // one; node 1's answers to node 2's pairs all arrived.
  EXPECT_GT(st2["peers"]["1"]["packets_received"].get<uint64_t>(), 100u);
  EXPECT_EQ(st2["peers"]["1"]["reverse_pairs_sent"].get<uint64_t>(), 0u) << st2.dump();

  // Node 1's edge has none of its own tuples left, yet every window is
  // written with every pair counted as lost: nothing disappears silently.
  // Its fits rest on node 2's session alone, whose tuples node 2's echo
  // makes whole at node 1 (--fit-probes link, docs/estimator.md §11): the
  // full windows still have an estimate, from the peer's tuples only.
  const auto rows = ReadJsonl(OutputDir(1) / "edges.jsonl");
  ASSERT_GE(rows.size(), 3u) << AgentLog(1);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    EXPECT_EQ(r["tuples_complete"].get<int64_t>(), 0) << r.dump();
    EXPECT_GT(r["pairs_sent"].get<int64_t>(), 0) << r.dump();
    EXPECT_EQ(r["lost"], r["pairs_sent"]) << r.dump();
    EXPECT_EQ(r["tuples_in_class"], r["tuples_peer_session"]) << r.dump();
    if (i > 0 && i + 1 < rows.size()) {
      EXPECT_NE(r["estimator"], "none") << r.dump();
      EXPECT_GT(r["tuples_peer_session"].get<int64_t>(), 0) << r.dump();
    }
  }
  // Node 2's edge lost nothing: its full windows have estimates.
  const auto rows2 = ReadJsonl(OutputDir(2) / "edges.jsonl");
  ASSERT_GE(rows2.size(), 3u) << AgentLog(2);
  for (size_t i = 1; i + 1 < rows2.size(); ++i) EXPECT_NE(rows2[i]["estimator"], "none") << rows2[i].dump();

  // The test bed's teardown removes the pin (the filter goes with the device).
  std::string out;
  EXPECT_EQ(RunCapture(kTestbedCli + " down --name " + name_ + " 2>&1", &out), 0) << out;
  testbed_ = nlohmann::json();
  EXPECT_FALSE(std::filesystem::exists(pin)) << pin;
}

}  // namespace
}  // namespace chronolink::testing
