// A writer who can reach etcd but has no cluster key attacks a running
// three-node cluster (real agents in network namespaces, a real etcd-server
// in the router's namespace) with every attack of issue 14's finding 1:
// offsets that move every node by 1 ms, offsets dated INT64_MAX (which
// froze publication before values were sealed), a member whose address is
// a victim's, window summaries for another node and far in the future, and
// a leader key naming a node that does not exist. The clock pages and
// offsets.jsonl must stay within the fixed bound of the injected truth,
// the solve must go on, the victim must receive nothing, and every node
// must count and log what it refused.
#include <atomic>
#include <fstream>
#include <limits>

#include "agent/cluster/cluster_messages.h"
#include "agent/coord/etcd/member_view.h"
#include "tests/integration/cluster_fixture.h"

namespace chronolink::testing {
namespace {

constexpr int kNodes = 3;
constexpr uint16_t kVictimPort = 7399;

// A UDP socket on the router's address (inside its namespace) counting
// every datagram that reaches it: the probes a forged member would draw.
class Victim {
 public:
  Victim(std::string netns, std::string address) : netns_(std::move(netns)), address_(std::move(address)) {}
  ~Victim() { Stop(); }
  void Start() {
    thread_ = std::thread([this] {
      const int ns = open(("/var/run/netns/" + netns_).c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) return;
      close(ns);
      const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(kVictimPort);
      inet_pton(AF_INET, address_.c_str(), &a.sin_addr);
      timeval tv{0, 100'000};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        close(fd);
        return;
      }
      bound_ = true;
      char buf[2048];
      while (!stop_) {
        if (recv(fd, buf, sizeof(buf), 0) > 0) ++received_;
      }
      close(fd);
    });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool bound() const { return bound_; }
  uint64_t received() const { return received_; }

 private:
  std::string netns_, address_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, bound_{false};
  std::atomic<uint64_t> received_{0};
};

class EtcdAttackTest : public EtcdClusterFixture {
 protected:
  // One round of every attack; `leader`: the id the forged offsets claim.
  void Attack(uint32_t leader, const std::string& victim) {
    InRouterNetns([&] {
      EtcdClient attacker(ClientOptions());
      std::string error;
      auto put = [&](const std::string& key, const std::string& value) {
        EXPECT_TRUE(attacker.Put("/test/" + key, value, 0, &error)) << key << ": " << error;
      };
      const int64_t now = RealtimeNowNs();
      OffsetsSnapshot moved;
      moved.leader = leader;
      moved.sequence = 1'000'000;
      moved.reference_instant_ns = now;
      moved.reference_node = 1;
      for (uint32_t n = 1; n <= kNodes; ++n) {
        NodeSolution s;
        s.node = n;
        s.reachable = true;
        s.offset_ns = n == 1 ? 0 : 1e6 + TrueOffset(n, 1, now, AllNodes());
        s.uncertainty_ns = 10;
        moved.nodes.push_back(s);
      }
      put("offsets/latest", EncodeOffsetsSnapshot(moved));
      OffsetsSnapshot frozen = moved;
      frozen.sequence += 1;
      frozen.reference_instant_ns = std::numeric_limits<int64_t>::max();
      put("offsets/latest", EncodeOffsetsSnapshot(frozen));
      put("members/9", EncodeMember(Member{9, victim, kVictimPort}));
      WindowSummary w;
      w.estimate.node = 2;
      w.estimate.peer = 3;
      w.estimate.x0_ns = now + 3600 * kSecond;
      w.estimate.beta_ns = 1e6;
      w.estimate.uncertainty_ns = 1;
      w.session = 555;
      w.window_start_ns = w.estimate.x0_ns - kSecond;
      w.estimator = "max_margin";
      put("windows/" + w.Key(), EncodeWindowSummary(w));
      w.estimate.node = 9;
      put("windows/" + w.Key(), EncodeWindowSummary(w));
      put("leader", "99");
    });
  }
};

TEST_F(EtcdAttackTest, AWriterWithoutTheKeyMovesNoClock) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(kNodes));
  if (!StartEtcd()) return;
  const std::string router_ns = testbed_["router"]["netns"].get<std::string>();
  const std::string victim_address = testbed_["router"]["interfaces"][0]["address"].get<std::string>();
  Victim victim(router_ns, victim_address);
  victim.Start();
  const double duration = 34;
  std::vector<std::string> args = EtcdArgs("1");
  args.insert(args.end(), {"--metrics", "127.0.0.1:9319"});
  StartAll(duration, args);
  // A leader, then solved offsets on every page (a few windows).
  std::optional<uint32_t> leader;
  for (int i = 0; i < 60 && !leader; ++i) {
    SleepS(0.25);
    leader = LeaderId();
  }
  ASSERT_TRUE(leader.has_value()) << "no leader after 15 s: " << Logs();
  SleepS(8);
  ASSERT_TRUE(victim.bound()) << "the victim socket could not bind " << victim_address;

  // Three rounds, 2 s apart: the forged leader key is cleared and the
  // attack repeats against the new term too.
  const int64_t attack_start = RealtimeNowNs();
  for (int round = 0; round < 3; ++round) {
    Attack(*leader, victim_address);
    SleepS(2);
  }
  // While the agents run: every page within the fixed bound at several
  // instants after the attack, and republished (nothing froze it).
  ASSERT_NO_FATAL_FAILURE(CheckClockPages({1, 2, 3}, 1));
  const std::string metrics = ScrapeMetrics(2);
  ASSERT_TRUE(WaitAgents(duration + 20)) << Logs();
  victim.Stop();

  EXPECT_EQ(victim.received(), 0u) << "probes reached the forged member's address";
  std::vector<std::filesystem::path> files;
  for (int n = 1; n <= kNodes; ++n) {
    if (std::filesystem::exists(OutputDir(n) / "offsets.jsonl")) files.push_back(OutputDir(n) / "offsets.jsonl");
  }
  ASSERT_FALSE(files.empty()) << Logs();
  const SolvedByInstant solved = ReadOffsets(files);
  for (const auto& [t, nodes] : solved) {
    EXPECT_EQ(nodes.count(9), 0u) << "the forged member was solved at t=" << t;
    for (const auto& [n, s] : nodes) EXPECT_LE(s.leader, static_cast<uint32_t>(kNodes)) << "leader " << s.leader;
  }
  double worst = 0;
  const int64_t after_attack = NodeClockAt(1, attack_start);
  const int checked = CheckInstants(solved, 1, NodeClockAt(1, t0_) + 5 * kWindow, INT64_MAX, AllNodes(), {}, &worst);
  int after = 0;
  for (const auto& [t, nodes] : solved) after += t > after_attack ? 1 : 0;
  EXPECT_GE(checked, 3) << Logs();
  EXPECT_GE(after, 4) << "the solve stopped after the attack: " << Logs();

  // Counted and logged by every node.
  for (int n = 1; n <= kNodes; ++n) {
    std::ifstream in(OutputDir(n) / "agent_stats.json");
    const nlohmann::json stats = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(stats.is_discarded()) << "node " << n << ": agent_stats.json";
    const nlohmann::json& cluster = stats["cluster"];
    EXPECT_GE(cluster.value("refused", 0u), 3u) << "node " << n << ": " << cluster.dump();
    EXPECT_TRUE(cluster.contains("refused_by_reason") && cluster["refused_by_reason"].value("unsealed", 0u) >= 3u)
        << "node " << n << ": " << cluster.dump();
    EXPECT_NE(AgentLog(n).find("etcd: refused the value at '/test/"), std::string::npos) << "node " << n;
    // Every address came from etcd alone: each was proved by the peer's
    // first answer, a pair or two into the run; none is the victim's.
    for (const auto& [peer, pc] : stats["peers"].items()) {
      EXPECT_TRUE(pc.value("address_confirmed", false)) << "node " << n << " peer " << peer;
      EXPECT_LE(pc.value("pairs_sent_unconfirmed", 0u), 3u) << "node " << n << " peer " << peer;
    }
    EXPECT_EQ(stats["peers"].count("9"), 0u) << "node " << n << " probed the forged member";
  }
  EXPECT_NE(metrics.find("chronolink_cluster_refused_by_reason_total{node=\"2\",reason=\"unsealed\"}"),
            std::string::npos)
      << metrics;
  std::printf("etcd attack: %d instants checked, %d after the attack, worst |error| %.0f ns; victim got %llu "
              "datagrams\n",
              checked, after, worst, static_cast<unsigned long long>(victim.received()));
}

}  // namespace
}  // namespace chronolink::testing
