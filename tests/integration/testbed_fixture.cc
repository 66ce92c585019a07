#include "tests/integration/testbed_fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace chronolink::testing {

// Runs a command, returns its exit status and stdout.
int RunCapture(const std::string& cmd, std::string* out) {
  out->clear();
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out->append(buf.data(), n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int64_t RealtimeNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

void TestbedFixture::SetUp() {
  name_ = "clt" + std::to_string(getpid() % 100000);
  dir_ = std::filesystem::temp_directory_path() / ("chronolink-" + name_);
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
}

void TestbedFixture::TearDown() {
  for (pid_t pid : pids_) kill(pid, SIGKILL);
  for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  pids_.clear();
  if (!testbed_.is_null()) {
    std::string out;
    RunCapture(kTestbedCli + " down --name " + name_ + " 2>&1", &out);
  }
  if (!HasFailure()) std::filesystem::remove_all(dir_);
  else std::printf("test output kept in %s\n", dir_.c_str());
}

bool TestbedFixture::RequirePrivileges() {
  std::string reason;
  if (geteuid() != 0) {
    reason = "not root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN";
  } else {
    std::string out;
    const std::string probe = "clprobe" + std::to_string(getpid());
    if (RunCapture("ip netns add " + probe + " 2>&1", &out) != 0) {
      reason = "cannot create a network namespace: " + out;
    } else {
      RunCapture("ip netns del " + probe + " 2>&1", &out);
    }
  }
  if (reason.empty()) return true;
  SkipOrFailOutsideCi("privileged test cannot run: " + reason);
  return false;
}

bool TestbedFixture::RequireTap() {
  if (!RequirePrivileges()) return false;
#ifndef CHRONOLINK_HAVE_BPF
  SkipOrFailOutsideCi("built without the eBPF tap (CHRONOLINK_WITH_BPF=OFF)");
  return false;
#else
  return true;
#endif
}

void TestbedFixture::Up(int nodes, const std::string& topology,
                        const std::vector<std::string>& extra) {
  std::string cmd = kTestbedCli + " up --name " + name_ + " --nodes " + std::to_string(nodes) +
                    " --topology " + topology;
  for (const auto& e : extra) cmd += " " + e;
  std::string out;
  const int rc = RunCapture(cmd + " 2>" + (dir_ / "testbed.err").string(), &out);
  testbed_ = nlohmann::json::parse(out, nullptr, false);
  ASSERT_EQ(rc, 0) << "testbed up failed: " << out;
  ASSERT_FALSE(testbed_.is_discarded()) << "testbed printed no JSON: " << out;
  ASSERT_EQ(testbed_["nodes"].size(), static_cast<size_t>(nodes));
}

void TestbedFixture::WriteClusterFiles(uint32_t cluster_id) {
  cluster_id_ = cluster_id;
  nlohmann::json cluster;
  cluster["cluster_id"] = cluster_id;
  cluster["nodes"] = nlohmann::json::array();
  for (const auto& n : testbed_["nodes"]) {
    cluster["nodes"].push_back({{"id", n["index"]}, {"address", n["address"]}, {"port", 7319}});
  }
  std::ofstream(dir_ / "cluster.json") << cluster.dump(2);
  std::ofstream(dir_ / "key.hex")
      << "5c1e0f7a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6\n";
  // The agent refuses a key file that others could read.
  std::filesystem::permissions(dir_ / "key.hex", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

std::filesystem::path TestbedFixture::OutputDir(int node_index) const {
  return dir_ / ("node" + std::to_string(node_index));
}

std::string TestbedFixture::AgentLog(int node_index) const {
  std::ifstream f(dir_ / ("agent" + std::to_string(node_index) + ".log"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

pid_t TestbedFixture::StartAgent(const AgentSpec& spec) {
  const std::string ns = testbed_["nodes"][spec.node_index - 1]["netns"];
  std::vector<std::string> args = {"ip", "netns", "exec", ns};
  args.insert(args.end(), spec.wrapper.begin(), spec.wrapper.end());
  args.insert(args.end(), {CHRONOLINK_AGENT_BIN, "--node-id", std::to_string(spec.node_index)});
  if (spec.cluster_file) {
    args.insert(args.end(), {"--cluster-file", (dir_ / "cluster.json").string()});
  } else {
    args.insert(args.end(), {"--cluster-id", std::to_string(cluster_id_), "--listen",
                             testbed_["nodes"][spec.node_index - 1]["address"].get<std::string>(), "--port",
                             "7319"});
  }
  args.insert(args.end(), {"--key-file", (dir_ / "key.hex").string(),
                           "--output-dir", OutputDir(spec.node_index).string(),
                           "--duration-s", std::to_string(spec.duration_s)});
  if (spec.test_mode) {
    args.insert(args.end(), {"--test-mode",
                             "--virtual-offset-ns", std::to_string(spec.clock.offset_ns),
                             "--virtual-drift-ppm", std::to_string(spec.clock.drift_ppm),
                             "--virtual-t0-ns", std::to_string(spec.clock.t0_ns)});
    if (spec.clock.step_ns != 0) {
      args.insert(args.end(), {"--virtual-step-at-ns", std::to_string(spec.clock.step_at_ns),
                               "--virtual-step-ns", std::to_string(spec.clock.step_ns)});
    }
  }
  args.insert(args.end(), spec.extra_args.begin(), spec.extra_args.end());
  return Spawn(std::move(args), (dir_ / ("agent" + std::to_string(spec.node_index) + ".log")).string());
}

pid_t TestbedFixture::Spawn(std::vector<std::string> args, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  pids_.push_back(pid);
  return pid;
}

void TestbedFixture::KillAgent(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  pids_.erase(std::remove(pids_.begin(), pids_.end(), pid), pids_.end());
}

bool TestbedFixture::WaitAgents(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  bool all_clean = true;
  for (pid_t pid : pids_) {
    int status = 0;
    for (;;) {
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) all_clean = false;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        all_clean = false;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  pids_.clear();
  return all_clean;
}

std::vector<nlohmann::json> TestbedFixture::ReadJsonl(const std::filesystem::path& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) rows.push_back(std::move(j));
  }
  return rows;
}

}  // namespace chronolink::testing
