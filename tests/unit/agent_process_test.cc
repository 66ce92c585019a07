// The chronolink-agent executable as a user meets it, on loopback: exit codes
// and messages for bad input, clean shutdown on SIGTERM, and what a SIGKILL
// leaves behind.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "agent/capture/timestamping_socket.h"
#include "tests/support/ci_rule.h"

namespace chronolink {
namespace {

namespace fs = std::filesystem;

constexpr char kKeyHex[] = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

struct Agent {
  pid_t pid = -1;
  fs::path log;
};

// `wrapper` (e.g. setpriv and its options) runs the agent. `before_exec`
// runs in the child just before exec (its output goes to the log); if it
// returns false the child exits 125 instead.
Agent Spawn(const std::vector<std::string>& args, const fs::path& log,
            const std::vector<std::string>& wrapper = {}, const std::function<bool()>& before_exec = {}) {
  Agent a;
  a.log = log;
  a.pid = fork();
  if (a.pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (before_exec && !before_exec()) _exit(125);
    std::vector<std::string> full = wrapper;
    full.push_back(CHRONOLINK_AGENT_BIN);
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : full) argv.push_back(s.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return a;
}

// Exit code, or -signal; -1000 on timeout (the process is then killed).
int Wait(const Agent& a, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
  int status = 0;
  while (waitpid(a.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      kill(a.pid, SIGKILL);
      waitpid(a.pid, &status, 0);
      return -1000;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// In the child before exec: from here on the kernel answers every
// setresuid(2) of this process and of what it execs with EPERM (a seccomp
// filter, as a container runtime's or an LSM's refusal would). Every
// capability stays, so the agent's plan to switch user holds; only the
// drop itself fails. Says why and returns false where no filter can go on.
bool DenySetresuid() {
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  std::fprintf(stderr, "test: no seccomp filter for this architecture\n");
  return false;
#endif
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setresuid, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  const sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  // no_new_privs lets a root without CAP_SYS_ADMIN (a container) install
  // the filter; the agent sets it itself in its drop, and a root exec
  // keeps every capability with it.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    std::fprintf(stderr, "test: cannot install the seccomp filter: %s\n", std::strerror(errno));
    return false;
  }
  return true;
}

std::string Slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Whether a TCP listener could bind 127.0.0.1:port now.
bool TcpPortFree(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

class AgentProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("chronolink-agent-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Two free loopback ports: bind, read, release. Static coordination
    // listens on TCP at the same number as the probe socket's UDP port, so
    // the number must be free for TCP too (an ephemeral TCP connection of a
    // test running alongside took one twice).
    for (int tries = 0; ports_.size() < 2 && tries < 100; ++tries) {
      TimestampingSocket s;
      std::string error;
      ASSERT_TRUE(s.Open("127.0.0.1", 0, &error)) << error;
      if (TcpPortFree(s.bound_port())) ports_.push_back(s.bound_port());
    }
    ASSERT_EQ(ports_.size(), 2u) << "no two ports free for both UDP and TCP";
    std::ofstream(dir_ / "cluster.json")
        << R"({"cluster_id": 7, "nodes": [{"id": 1, "address": "127.0.0.1", "port": )" << ports_[0]
        << R"(}, {"id": 2, "address": "127.0.0.1", "port": )" << ports_[1] << "}]}";
    std::ofstream(dir_ / "key.hex") << kKeyHex << "\n";
    // The agent refuses a key file that others could read.
    fs::permissions(dir_ / "key.hex", fs::perms::owner_read | fs::perms::owner_write);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::vector<std::string> NodeArgs(int id, double window_s = 0.5) {
    return {"--node-id", std::to_string(id), "--cluster-file", (dir_ / "cluster.json").string(),
            "--key-file", (dir_ / "key.hex").string(), "--output-dir",
            (dir_ / ("node" + std::to_string(id))).string(), "--window-s", std::to_string(window_s),
            "--window-grace-ms", "100",
            // These tests are about the process, on the host's loopback: keep
            // the eBPF tap off the host's lo (the namespace tests cover it).
            "--bpf", "off"};
  }

  fs::path dir_;
  std::vector<uint16_t> ports_;
};

TEST_F(AgentProcessTest, HelpExitsZero) {
  const Agent a = Spawn({"--help"}, dir_ / "help.log");
  EXPECT_EQ(Wait(a, 10), 0);
  EXPECT_NE(Slurp(a.log).find("--cluster-file"), std::string::npos);
}

TEST_F(AgentProcessTest, MissingClusterFileIsAClearErrorAndExit2) {
  const Agent a = Spawn({"--node-id", "1", "--cluster-file", (dir_ / "nope.json").string(),
                         "--key-file", (dir_ / "key.hex").string()},
                        dir_ / "bad.log");
  EXPECT_EQ(Wait(a, 10), 2);
  EXPECT_NE(Slurp(a.log).find("nope.json"), std::string::npos) << Slurp(a.log);
}

TEST_F(AgentProcessTest, VirtualClockWithoutTestModeIsRefused) {
  auto args = NodeArgs(1);
  args.insert(args.end(), {"--virtual-offset-ns", "1000"});
  const Agent a = Spawn(args, dir_ / "virt.log");
  EXPECT_EQ(Wait(a, 10), 2);
  EXPECT_NE(Slurp(a.log).find("test-mode"), std::string::npos) << Slurp(a.log);
}

// A key on the command line is in everyone's `ps`: the agent says so once at
// start, and names the production way.
TEST_F(AgentProcessTest, KeyOnTheCommandLineIsWarnedAboutOnce) {
  auto args = NodeArgs(1);
  args[4] = "--key-hex";  // instead of --key-file
  args[5] = kKeyHex;
  args.insert(args.end(), {"--duration-s", "1"});
  const Agent a = Spawn(args, dir_ / "hex.log");
  EXPECT_EQ(Wait(a, 15), 0) << Slurp(a.log);
  const std::string log = Slurp(a.log);
  const std::string line = "the cluster key was given on the command line (--key-hex)";
  const size_t at = log.find(line);
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(line, at + 1), std::string::npos) << "more than once: " << log;
  EXPECT_NE(log.find("process list", at), std::string::npos) << log;
  EXPECT_NE(log.find("--key-file", at), std::string::npos) << log;
  EXPECT_EQ(log.find(kKeyHex), std::string::npos) << "the key itself must never be logged";
}

// A key file the group can read is refused before anything starts.
TEST_F(AgentProcessTest, KeyFileReadableByOthersIsRefused) {
  fs::permissions(dir_ / "key.hex", fs::perms::group_read, fs::perm_options::add);
  const Agent a = Spawn(NodeArgs(1), dir_ / "mode.log");
  EXPECT_EQ(Wait(a, 10), 2);
  EXPECT_NE(Slurp(a.log).find("chmod 600"), std::string::npos) << Slurp(a.log);
  EXPECT_FALSE(fs::exists(dir_ / "node1" / "edges.jsonl"));
}

// ------------------------------------------------------------ privileges

// A user that does not exist: the agent cannot drop to it, so it does not run.
TEST_F(AgentProcessTest, AnUnknownUserIsFatal) {
  auto args = NodeArgs(1);
  args.insert(args.end(), {"--user", "chronolink-nosuchuser"});
  const Agent a = Spawn(args, dir_ / "user.log");
  EXPECT_EQ(Wait(a, 10), 1);
  EXPECT_NE(Slurp(a.log).find("cannot start: no such user 'chronolink-nosuchuser'"), std::string::npos)
      << Slurp(a.log);
  EXPECT_FALSE(fs::exists(dir_ / "node1" / "edges.jsonl"));
}

// The drop itself fails, not its plan: started as root with every
// capability, the agent plans to become nobody, but the kernel refuses its
// setresuid. Going on would leave it root with a half-done drop (gid
// switched, capabilities held): it must stop before it binds its outputs
// or probes anyone, and say which step failed.
TEST_F(AgentProcessTest, AFailedPrivilegeDropIsFatal) {
  if (geteuid() != 0) CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI("needs root: only root can switch to another user");
  auto args = NodeArgs(1);
  // The clock page (made before the drop, and left by a failed start) in
  // the test's directory, not in /dev/shm.
  args.insert(args.end(), {"--user", "nobody", "--clock-page", (dir_ / "page1").string()});
  const Agent a = Spawn(args, dir_ / "drop.log", {}, DenySetresuid);
  const int rc = Wait(a, 10);  // a failed drop stops at once; running on is the failure
  const std::string log = Slurp(a.log);
  if (rc == 125) CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI(log);
  EXPECT_EQ(rc, 1) << "(-1000: still running after 10 s)\n" << log;
  EXPECT_NE(log.find("cannot start: privilege drop failed: setresuid(nobody"), std::string::npos) << log;
  EXPECT_NE(log.find("Operation not permitted"), std::string::npos) << log;
  EXPECT_EQ(log.find("dropped privileges"), std::string::npos) << log;
  EXPECT_EQ(log.find(" listening on "), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir_ / "node1" / "edges.jsonl"));
}

class UnprivilegedAgentTest : public AgentProcessTest {
 protected:
  void SetUp() override {
    AgentProcessTest::SetUp();
    if (HasFatalFailure()) return;
    // Run as nobody: through setpriv when we are root, as ourselves when we
    // are not (then already unprivileged).
    if (geteuid() == 0) {
      if (!fs::exists("/usr/bin/setpriv")) CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI("no /usr/bin/setpriv (util-linux)");
      wrapper_ = {"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all",
                  "--bounding-set=-all"};
    }
    shared_ = dir_ / "shared";
    fs::create_directories(shared_);
    fs::permissions(shared_, fs::perms::all);  // the unprivileged agent writes here
  }
  // As NodeArgs, with what an unprivileged agent can reach: the key on the
  // command line (the key file is root's) and its outputs in a shared directory.
  std::vector<std::string> UnprivilegedArgs(int id) {
    auto args = NodeArgs(id);
    args[4] = "--key-hex";
    args[5] = kKeyHex;
    args[7] = (shared_ / ("node" + std::to_string(id))).string();
    args.insert(args.end(), {"--clock-page", (shared_ / ("page" + std::to_string(id))).string()});
    return args;
  }
  fs::path shared_;
  std::vector<std::string> wrapper_;
};

// Nothing to drop: it says so once and works as before.
TEST_F(UnprivilegedAgentTest, AnUnprivilegedStartSaysSoOnceAndRuns) {
  auto args = UnprivilegedArgs(1);
  args.insert(args.end(), {"--duration-s", "1.5"});
  const Agent a = Spawn(args, dir_ / "plain.log", wrapper_);
  EXPECT_EQ(Wait(a, 15), 0) << Slurp(a.log);
  const std::string log = Slurp(a.log);
  const size_t at = log.find("nothing to drop: started as uid ");
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find("nothing to drop", at + 1), std::string::npos) << log;
  EXPECT_TRUE(fs::exists(shared_ / "node1" / "edges.jsonl")) << log;
}

// An unprivileged start cannot become another user: asked to, it refuses
// to run rather than run as someone else.
TEST_F(UnprivilegedAgentTest, AnUnprivilegedStartAskedForAnotherUserIsFatal) {
  auto args = UnprivilegedArgs(1);
  args.insert(args.end(), {"--user", "daemon"});
  const Agent a = Spawn(args, dir_ / "other.log", wrapper_);
  EXPECT_EQ(Wait(a, 10), 1);
  const std::string log = Slurp(a.log);
  EXPECT_NE(log.find("cannot start: privilege drop impossible: asked to run as user daemon"), std::string::npos)
      << log;
  EXPECT_NE(log.find("without the right to switch"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(shared_ / "node1" / "edges.jsonl"));
}

TEST_F(AgentProcessTest, PortInUseFailsFastWithAMessage) {
  TimestampingSocket squatter;
  std::string error;
  ASSERT_TRUE(squatter.Open("127.0.0.1", ports_[0], &error)) << error;
  const Agent a = Spawn(NodeArgs(1), dir_ / "busy.log");
  EXPECT_EQ(Wait(a, 10), 1);
  EXPECT_NE(Slurp(a.log).find("in use"), std::string::npos) << Slurp(a.log);
}

TEST_F(AgentProcessTest, SigtermShutsDownCleanlyWithWindowsWritten) {
  const Agent a = Spawn(NodeArgs(1), dir_ / "a.log");
  const Agent b = Spawn(NodeArgs(2), dir_ / "b.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  kill(a.pid, SIGTERM);
  kill(b.pid, SIGTERM);
  EXPECT_EQ(Wait(a, 10), 0) << Slurp(a.log);
  EXPECT_EQ(Wait(b, 10), 0) << Slurp(b.log);
  std::ifstream edges(dir_ / "node1" / "edges.jsonl");
  int lines = 0;
  std::string line;
  while (std::getline(edges, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["peer"], 2);
    ++lines;
  }
  EXPECT_GE(lines, 2);
  const auto stats = nlohmann::json::parse(Slurp(dir_ / "node1" / "agent_stats.json"));
  EXPECT_TRUE(stats["final"].get<bool>());
  EXPECT_GT(stats["peers"]["2"]["packets_received"].get<int>(), 100);
}

TEST_F(AgentProcessTest, SigkillLeavesOnlyWholeLines) {
  const Agent a = Spawn(NodeArgs(1), dir_ / "a.log");
  const Agent b = Spawn(NodeArgs(2), dir_ / "b.log");
  // Kill once two windows (0.5 s each) are on disk, mid-way through the
  // third: waiting for them, not a fixed time, keeps a loaded machine from
  // killing the agent before its first window closed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto lines_on_disk = [&] {
    const std::string t = Slurp(dir_ / "node1" / "edges.jsonl");
    return std::count(t.begin(), t.end(), '\n');
  };
  while (lines_on_disk() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  kill(a.pid, SIGKILL);
  kill(b.pid, SIGTERM);
  EXPECT_EQ(Wait(a, 10), -SIGKILL);
  Wait(b, 10);
  const std::string text = Slurp(dir_ / "node1" / "edges.jsonl");
  ASSERT_FALSE(text.empty()) << "windows closed before the kill must be on disk";
  EXPECT_EQ(text.back(), '\n');
  std::istringstream in(text);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded()) << line;
    ++lines;
  }
  EXPECT_GE(lines, 2);  // killed after the second window was written
}

TEST_F(AgentProcessTest, ServesPrometheusMetrics) {
  // A free TCP port: bind port 0, read it, release it.
  uint16_t port = 0;
  {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
    close(fd);
  }
  auto args = NodeArgs(1);
  args.insert(args.end(), {"--metrics", "127.0.0.1:" + std::to_string(port)});
  const Agent a = Spawn(args, dir_ / "a.log");
  const Agent b = Spawn(NodeArgs(2), dir_ / "b.log");
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(2, 0);
  std::string body;
  for (int i = 0; i < 40 && body.find("chronolink_edge_offset_ns{") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (auto res = client.Get("/metrics"); res && res->status == 200) body = res->body;
  }
  kill(a.pid, SIGTERM);
  kill(b.pid, SIGTERM);
  EXPECT_EQ(Wait(a, 10), 0) << Slurp(a.log);
  Wait(b, 10);
  EXPECT_NE(body.find("# TYPE chronolink_packets_sent_total counter"), std::string::npos) << body;
  EXPECT_NE(body.find("chronolink_packets_received_total{node=\"1\",peer=\"2\"}"), std::string::npos)
      << body;
  EXPECT_NE(body.find("chronolink_edge_offset_ns{node=\"1\",peer=\"2\",source=\"kernel\""),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("chronolink_ebpf_tap_up{node=\"1\"} 0"), std::string::npos) << body;
  // The window's fit took the edge's start span, the longest: ten 0.5 s
  // windows (it is chosen only from the 16th window).
  const std::string span_key = "chronolink_edge_fit_span_seconds{node=\"1\",peer=\"2\",source=\"kernel\"";
  const size_t span_at = body.find(span_key);
  ASSERT_NE(span_at, std::string::npos) << body;
  const size_t value_at = body.find("} ", span_at);
  ASSERT_NE(value_at, std::string::npos) << body;
  EXPECT_NEAR(std::strtod(body.c_str() + value_at + 2, nullptr), 5.0, 0.05) << body.substr(span_at, 160);
  // Its sigma needs five windows' history: the family is there, the value not yet.
  EXPECT_NE(body.find("# TYPE chronolink_edge_sigma_ns gauge"), std::string::npos) << body;
}

TEST_F(AgentProcessTest, BadMetricsAddressIsAClearError) {
  auto args = NodeArgs(1);
  args.insert(args.end(), {"--metrics", "localhost:80"});
  const Agent a = Spawn(args, dir_ / "m.log");
  EXPECT_EQ(Wait(a, 10), 2);
  EXPECT_NE(Slurp(a.log).find("must be IP:PORT"), std::string::npos) << Slurp(a.log);
}

TEST_F(AgentProcessTest, UnansweredPeerIsLoggedNotFatal) {
  auto args = NodeArgs(1);
  args.insert(args.end(), {"--duration-s", "6.5"});
  const Agent a = Spawn(args, dir_ / "alone.log");  // node 2 never starts
  EXPECT_EQ(Wait(a, 20), 0);
  EXPECT_NE(Slurp(a.log).find("has not answered"), std::string::npos) << Slurp(a.log);
}

}  // namespace
}  // namespace chronolink
