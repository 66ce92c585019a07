// Shared fixture of the privileged integration tests: a real test bed of
// network namespaces (tools/testbed/chronolink-testbed) and real agent
// processes in it. When it cannot create namespaces a test follows the CI
// rule (tests/support/ci_rule.h): it skips, with the reason, outside CI and
// fails under CI.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "clock/virtual_clock.h"
#include "tests/support/ci_rule.h"

namespace chronolink::testing {

// The test bed's command line (tools/testbed/chronolink-testbed).
inline const std::string kTestbedCli = std::string(CHRONOLINK_SOURCE_DIR) + "/tools/testbed/chronolink-testbed";

struct AgentSpec {
  // Not an aggregate: the optional fields below stay optional without
  // -Wmissing-field-initializers noise at every call.
  AgentSpec(int node_index = 0, VirtualClockParams clock = {}, double duration_s = 10,
            std::vector<std::string> extra_args = {})
      : node_index(node_index), clock(clock), duration_s(duration_s), extra_args(std::move(extra_args)) {}

  int node_index = 0;  // 1-based test-bed node
  VirtualClockParams clock;
  double duration_s = 10;
  std::vector<std::string> extra_args;
  std::vector<std::string> wrapper;  // runs the agent through this (e.g. capsh), inside the netns
  bool test_mode = true;             // false: no virtual clock options at all
  // false: no cluster file; the cluster id, this node's address and port
  // are given as options, as with etcd, where addresses come from etcd only.
  bool cluster_file = true;
};

class TestbedFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Stops the test (skip or fail, see above) unless namespaces can be made.
  bool RequirePrivileges();
  // The same, and the eBPF tap must have been built for the test to mean
  // anything (CHRONOLINK_WITH_BPF).
  bool RequireTap();

  // Brings up the test bed; fails the test on error.
  void Up(int nodes, const std::string& topology, const std::vector<std::string>& extra = {});
  // Writes cluster.json and key.hex for the nodes of the test bed.
  void WriteClusterFiles(uint32_t cluster_id = 7);

  pid_t StartAgent(const AgentSpec& spec);
  // Runs a command with stdout and stderr to `log`; it is waited for (and
  // killed at the timeout) with the agents.
  pid_t Spawn(std::vector<std::string> args, const std::string& log);
  // SIGKILLs one agent and reaps it.
  void KillAgent(pid_t pid);
  // Waits for every started agent to exit by itself; kills them at the timeout.
  bool WaitAgents(double timeout_s);
  std::filesystem::path OutputDir(int node_index) const;
  std::string AgentLog(int node_index) const;
  static std::vector<nlohmann::json> ReadJsonl(const std::filesystem::path& path);

  std::string name_;
  std::filesystem::path dir_;
  nlohmann::json testbed_;
  uint32_t cluster_id_ = 7;  // of WriteClusterFiles
  std::vector<pid_t> pids_;
};

int64_t RealtimeNowNs();
// Runs a shell command; its exit status (-1 if it did not run) and stdout.
int RunCapture(const std::string& cmd, std::string* out);

}  // namespace chronolink::testing
