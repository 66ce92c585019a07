// The agent with its eBPF tap on a namespace test bed: every probe gets a
// stamp from every hook, in causal order after conversion; a SIGKILLed agent
// leaves no hook behind and a restart attaches exactly one set; without the
// capabilities the agent says so once and runs on SO_TIMESTAMPING.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "clock/virtual_clock.h"
#include "tests/integration/testbed_fixture.h"

#ifdef CHRONOLINK_HAVE_BPF
#include <bpf/bpf.h>
#endif

namespace chronolink::testing {
namespace {

class AgentTapTest : public TestbedFixture {};

int CountLines(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

#ifdef CHRONOLINK_HAVE_BPF
// BPF links whose program is one of ours, system-wide.
int CountChronolinkLinks() {
  int count = 0;
  uint32_t id = 0;
  while (bpf_link_get_next_id(id, &id) == 0) {
    const int fd = bpf_link_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_link_info link{};
    uint32_t len = sizeof(link);
    if (bpf_obj_get_info_by_fd(fd, &link, &len) == 0) {
      const int pfd = bpf_prog_get_fd_by_id(link.prog_id);
      if (pfd >= 0) {
        bpf_prog_info prog{};
        uint32_t plen = sizeof(prog);
        if (bpf_obj_get_info_by_fd(pfd, &prog, &plen) == 0 &&
            std::string(prog.name).rfind("chronolink_", 0) == 0) {
          ++count;
        }
        close(pfd);
      }
    }
    close(fd);
  }
  return count;
}
#endif

TEST_F(AgentTapTest, EveryProbeIsStampedByEveryHookInCausalOrder) {
  if (!RequireTap()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "routed"));
  WriteClusterFiles();
  for (int i : {1, 2}) {
    AgentSpec spec{i, {}, 5.0, {"--bpf", "on", "--bpf-xdp", "on", "--probe-interval-us", "2000",
                                "--stamp-log", (OutputDir(i) / "stamps.jsonl").string()}};
    spec.test_mode = false;  // identity clocks: stamps of both nodes are comparable
    std::filesystem::create_directories(OutputDir(i));
    StartAgent(spec);
  }
  ASSERT_TRUE(WaitAgents(30)) << AgentLog(1) << AgentLog(2);

  for (int i : {1, 2}) {
    const auto log = ReadJsonl(OutputDir(i) / "stamps.jsonl");
    ASSERT_GT(log.size(), 1000u) << AgentLog(i);
    std::ifstream sf(OutputDir(i) / "agent_stats.json");
    const auto st = nlohmann::json::parse(sf);
    const int64_t bound = st["ebpf_tap"]["max_conversion_error_ns"].get<int64_t>() + 1;
    EXPECT_LT(bound, 2'000);
    int tx = 0, rx = 0, rx_with_socket = 0;
    for (const auto& r : log) {
      if (r["type"] == "followup") continue;
      const auto& s = r["stamps_ns"];
      if (r["direction"] == "tx") {
        ++tx;
        ASSERT_TRUE(s.contains("bpf_tc") && s.contains("bpf_xdp") && s.contains("socket_sched") &&
                    s.contains("socket_software"))
            << r.dump();
        // TX_SCHED <= tc egress <= net_dev_start_xmit ~ TX_SOFTWARE (driver).
        EXPECT_LE(s["socket_sched"].get<int64_t>(), s["bpf_tc"].get<int64_t>() + bound) << r.dump();
        EXPECT_LE(s["bpf_tc"].get<int64_t>(), s["socket_software"].get<int64_t>() + bound) << r.dump();
        EXPECT_LE(s["bpf_tc"].get<int64_t>(), s["bpf_xdp"].get<int64_t>() + bound) << r.dump();
      } else {
        ++rx;
        ASSERT_TRUE(s.contains("bpf_xdp") && s.contains("bpf_tc")) << r.dump();
        // XDP <= RX_SOFTWARE <= tc ingress.
        EXPECT_LE(s["bpf_xdp"].get<int64_t>(), s["bpf_tc"].get<int64_t>() + bound) << r.dump();
        if (s.contains("socket_software")) {
          ++rx_with_socket;
          EXPECT_LE(s["bpf_xdp"].get<int64_t>(), s["socket_software"].get<int64_t>() + bound)
              << r.dump();
          EXPECT_LE(s["socket_software"].get<int64_t>(), s["bpf_tc"].get<int64_t>() + bound)
              << r.dump();
        }
      }
    }
    EXPECT_GT(tx, 1000);
    EXPECT_GT(rx, 1000);
    // The kernel switches RX software stamps on through deferred work: allow
    // the first few packets without.
    EXPECT_GT(rx_with_socket, rx - 50);
    EXPECT_EQ(st["ebpf_tap"]["kernel_ringbuf_full"].get<int64_t>(), 0);
  }
}

TEST_F(AgentTapTest, SigkillLeavesNoHookAndRestartAttachesOneSet) {
  if (!RequireTap()) return;
#ifdef CHRONOLINK_HAVE_BPF
  ASSERT_NO_FATAL_FAILURE(Up(2, "routed"));
  WriteClusterFiles();
  ASSERT_EQ(CountChronolinkLinks(), 0) << "another chronolink tap is running on this machine";
  const pid_t first = StartAgent({1, {}, 60.0, {"--bpf", "on", "--bpf-xdp", "on"}});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const int one_set = CountChronolinkLinks();
  EXPECT_GE(one_set, 3) << AgentLog(1);  // tc egress, tc ingress, XDP (+ net_dev_start_xmit)
  KillAgent(first);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(CountChronolinkLinks(), 0) << "hooks left behind by a SIGKILLed agent";
  StartAgent({1, {}, 60.0, {"--bpf", "on", "--bpf-xdp", "on"}});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(CountChronolinkLinks(), one_set) << "a restart must not duplicate hooks";
#endif
}

// Without the tap's capabilities the agent runs on SO_TIMESTAMPING alone, and
// still recovers a clock skew: node 2's virtual clock runs 250 us and
// 20 ppm off node 1's, and both nodes' estimates must find it (loose
// bounds, as in two_node_accuracy_test).
TEST_F(AgentTapTest, WithoutCapabilitiesItSaysSoOnceAndStillEstimates) {
  if (!RequireTap()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "routed"));
  WriteClusterFiles();
  const std::vector<std::string> no_caps = {
      "capsh", "--drop=cap_bpf,cap_perfmon,cap_net_admin,cap_sys_admin", "--"};
  const int64_t t0 = RealtimeNowNs();
  const std::map<int, VirtualClockParams> clocks = {{1, {0, 0.0, t0}}, {2, {250'000, 20.0, t0}}};
  const double duration_s = 9.0;  // >= 3 full windows of 2 s
  for (int i : {1, 2}) {
    AgentSpec spec{i, {}, duration_s, {}};
    spec.test_mode = false;  // the test-mode options go into the capsh command below
    const VirtualClockParams& c = clocks.at(i);
    // capsh runs /bin/bash: hand it the agent command line with -c.
    std::vector<std::string> argv = {CHRONOLINK_AGENT_BIN, "--node-id", std::to_string(i),
                                     "--cluster-file", (dir_ / "cluster.json").string(),
                                     "--key-file", (dir_ / "key.hex").string(),
                                     "--output-dir", OutputDir(i).string(),
                                     "--duration-s", std::to_string(duration_s),
                                     "--test-mode", "--virtual-offset-ns", std::to_string(c.offset_ns),
                                     "--virtual-drift-ppm", std::to_string(c.drift_ppm),
                                     "--virtual-t0-ns", std::to_string(c.t0_ns)};
    std::string cmd = "exec";
    for (const auto& a : argv) cmd += " '" + a + "'";
    spec.wrapper = no_caps;
    spec.wrapper.push_back("-c");
    spec.wrapper.push_back(cmd);
    spec.wrapper.push_back("--");  // the fixture's own arguments go to bash as $0.., unused
    StartAgent(spec);
  }
  ASSERT_TRUE(WaitAgents(duration_s + 30)) << AgentLog(1) << AgentLog(2);
  const std::string log = AgentLog(1);
  EXPECT_EQ(CountLines(log, "eBPF tap off: missing CAP_BPF"), 1) << log;
  for (int i : {1, 2}) {
    const int peer = 3 - i;
    int checked = 0;
    bool first = true;
    for (const auto& r : ReadJsonl(OutputDir(i) / "edges.jsonl")) {
      if (r["timestamp_source"] != "kernel") continue;
      if (first) {  // the agent started inside this window: it is partial
        first = false;
        continue;
      }
      ASSERT_EQ(r["estimator"], "max_margin") << r.dump();
      for (const auto& [src, n] : r["stamp_sources"].items()) {
        EXPECT_TRUE(src.rfind("socket_", 0) == 0 || n.get<int64_t>() == 0) << "a tap stamp without the tap: " << r.dump();
      }
      const RelativeTruth truth = TrueRelativeOffset(clocks.at(i), clocks.at(peer), r["x0_ns"].get<int64_t>());
      EXPECT_LT(std::abs(r["beta_ns"].get<double>() - truth.beta_ns), 2000.0) << r.dump();
      EXPECT_LT(std::abs(r["alpha"].get<double>() - truth.alpha) * 1e6, 1.0) << r.dump();
      ++checked;
    }
    EXPECT_GE(checked, 2) << AgentLog(i);
  }
}

}  // namespace
}  // namespace chronolink::testing
