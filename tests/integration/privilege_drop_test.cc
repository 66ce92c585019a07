// The privilege drop of a real agent started as root with the eBPF tap, on
// the namespace test bed: once the tap is attached the process runs as
// nobody with no capability in any set (the kernel's /proc/<pid>/status
// says so), and it still estimates, writes its files as that user, keeps
// its clock page root's, and leaves no hook behind when it exits. A drop
// that cannot be done stops the agent before it attaches anything.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/testbed_fixture.h"
#include "tests/support/wait_until.h"

#ifdef CHRONOLINK_HAVE_BPF
#include <bpf/bpf.h>
#endif

namespace chronolink::testing {
namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

class PrivilegeDropTest : public TestbedFixture {
 protected:
  std::string ClockPage(int node) const { return (dir_ / ("page" + std::to_string(node))).string(); }
};

// "Name:\tvalue" lines of /proc/<pid>/status.
std::map<std::string, std::string> ProcStatus(pid_t pid) {
  std::map<std::string, std::string> out;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t") + 1);
    out[line.substr(0, colon)] = value;
  }
  return out;
}

#ifdef CHRONOLINK_HAVE_BPF
// Ids of the BPF links a process holds, from its descriptors' fdinfo (other
// taps may run on this machine at the same time: count only the agent's).
std::vector<uint32_t> LinkIdsOf(pid_t pid) {
  std::vector<uint32_t> ids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fdinfo", ec)) {
    std::ifstream f(e.path());
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind("link_id:", 0) == 0) ids.push_back(static_cast<uint32_t>(std::stoul(line.substr(8))));
    }
  }
  return ids;
}

// Links of those ids that still exist.
int LinksStillThere(const std::vector<uint32_t>& ids) {
  int n = 0;
  for (uint32_t id : ids) {
    const int fd = bpf_link_get_fd_by_id(id);
    if (fd >= 0) {
      ++n;
      close(fd);
    }
  }
  return n;
}
#endif

TEST_F(PrivilegeDropTest, RootStartWithTheTapEndsAsNobodyWithNoCapabilityAndStillEstimates) {
  if (!RequireTap()) return;
#ifdef CHRONOLINK_HAVE_BPF
  ASSERT_NO_FATAL_FAILURE(Up(2, "routed"));
  WriteClusterFiles();
  std::map<int, pid_t> pids;
  for (int i : {1, 2}) {
    // No --user: started as root, the agent becomes nobody by default.
    AgentSpec spec{i, {}, 9.0, {"--bpf", "on", "--clock-page", ClockPage(i)}};
    spec.test_mode = false;
    pids[i] = StartAgent(spec);
  }
  // The tap attaches, then the drop: both are logged before the probe loop.
  for (int i : {1, 2}) {
    ASSERT_TRUE(WaitUntil([&] { return AgentLog(i).find("node " + std::to_string(i) + " session") !=
                                       std::string::npos; },
                          30'000))
        << AgentLog(i);
    const std::string log = AgentLog(i);
    EXPECT_NE(log.find("eBPF tap on"), std::string::npos) << log;
    EXPECT_NE(log.find("dropped privileges: now user nobody (uid 65534), group nogroup (gid 65534)"),
              std::string::npos)
        << log;
    // What the kernel says about the running agent.
    const auto st = ProcStatus(pids[i]);
    EXPECT_EQ(st.at("Uid"), "65534\t65534\t65534\t65534") << "real, effective, saved, fs";
    EXPECT_EQ(st.at("Gid"), "65534\t65534\t65534\t65534");
    EXPECT_EQ(st.at("Groups"), "");
    for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
      EXPECT_EQ(st.at(set), "0000000000000000") << set;
    }
    EXPECT_EQ(st.at("NoNewPrivs"), "1");
  }
  const bool tcx = AgentLog(1).find("(tcx)") != std::string::npos;
  std::vector<uint32_t> links;
  for (int i : {1, 2}) {
    const std::vector<uint32_t> own = LinkIdsOf(pids[i]);
    if (tcx) {
      EXPECT_GE(own.size(), 2u) << "tcx egress and ingress links held by agent " << i;
    }
    links.insert(links.end(), own.begin(), own.end());
  }
  ASSERT_TRUE(WaitAgents(40)) << AgentLog(1) << AgentLog(2);

  for (int i : {1, 2}) {
    // Every edges.jsonl line is written after the drop (the file is opened
    // after it), from stamps the tap took as well.
    int estimated = 0;
    for (const auto& r : ReadJsonl(OutputDir(i) / "edges.jsonl")) {
      if (r["estimator"] == "max_margin") ++estimated;
    }
    EXPECT_GE(estimated, 2) << AgentLog(i);
    std::ifstream sf(OutputDir(i) / "agent_stats.json");
    const auto stats = nlohmann::json::parse(sf, nullptr, false);
    ASSERT_FALSE(stats.is_discarded()) << AgentLog(i);
    EXPECT_TRUE(stats["final"].get<bool>()) << "the final stats were renamed into place as nobody";
    // The tap stamped (nearly) every packet sent, after the drop too.
    const int64_t sent = stats["tx_stamp_coverage"]["packets"].get<int64_t>();
    EXPECT_GT(sent, 300) << stats.dump();
    EXPECT_GE(stats["tx_stamp_coverage"]["bpf_tc"].get<int64_t>(), sent * 9 / 10) << stats.dump();
    // The files are the unprivileged user's; the clock page stays root's.
    struct stat fs {};
    for (const char* name : {"", "edges.jsonl", "agent_stats.json"}) {
      ASSERT_EQ(stat((OutputDir(i) / name).c_str(), &fs), 0) << name;
      EXPECT_EQ(fs.st_uid, kNobody) << name;
      EXPECT_EQ(fs.st_gid, kNogroup) << name;
    }
    ASSERT_EQ(stat(ClockPage(i).c_str(), &fs), 0);
    EXPECT_EQ(fs.st_uid, 0u);
    EXPECT_EQ(fs.st_mode & 07777, 0644u);
  }
  // Node 1 leads (lowest id): it opened offsets.jsonl after the drop.
  struct stat fs {};
  ASSERT_EQ(stat((OutputDir(1) / "offsets.jsonl").c_str(), &fs), 0) << AgentLog(1);
  EXPECT_EQ(fs.st_uid, kNobody);
  EXPECT_GT(fs.st_size, 0) << AgentLog(1);
  // tcx and XDP links go with their descriptors: an agent that exits as
  // nobody leaves no hook behind. Classic tc filters (kernels before 6.6)
  // need CAP_NET_ADMIN to be removed: the agent says it could not, and its
  // next start removes them (docs/bpf-tap.md).
  EXPECT_EQ(LinksStillThere(links), 0) << "hooks left behind after the drop";
  if (!tcx) {
    EXPECT_NE(AgentLog(1).find("could not remove the classic tc filter"), std::string::npos) << AgentLog(1);
  }
#endif
}

// A drop that cannot be done is fatal, before anything is attached: an
// unknown user, and root asked for by name.
TEST_F(PrivilegeDropTest, ADropThatCannotBeDoneStopsTheAgentBeforeItAttaches) {
  if (!RequireTap()) return;
#ifdef CHRONOLINK_HAVE_BPF
  ASSERT_NO_FATAL_FAILURE(Up(2, "routed"));
  WriteClusterFiles();
  StartAgent({1, {}, 20.0, {"--bpf", "on", "--clock-page", ClockPage(1), "--user", "chronolink-nosuchuser"}});
  EXPECT_FALSE(WaitAgents(20)) << "must exit non-zero";
  const std::string log = AgentLog(1);
  EXPECT_NE(log.find("cannot start: no such user 'chronolink-nosuchuser'"), std::string::npos) << log;
  EXPECT_EQ(log.find("eBPF tap on"), std::string::npos) << "attached before failing: " << log;
  EXPECT_FALSE(std::filesystem::exists(OutputDir(1) / "edges.jsonl"));
#endif
}

}  // namespace
}  // namespace chronolink::testing
