// chronolink-probe-loss refuses bad arguments with a clear message and exit
// status 2 (usage) or 1 (a device or namespace that is not there), before
// it loads anything: none of this needs privileges.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "tests/support/ci_rule.h"

namespace chronolink::testing {
namespace {

struct Result {
  int rc = -1;
  std::string out;  // stdout and stderr
};

Result RunLoader(const std::string& args) {
  Result r;
#ifdef CHRONOLINK_PROBE_LOSS_BIN
  FILE* p = popen((std::string(CHRONOLINK_PROBE_LOSS_BIN) + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
#else
  (void)args;
#endif
  return r;
}

class ProbeLossCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef CHRONOLINK_PROBE_LOSS_BIN
    CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI("chronolink-probe-loss was not built (no eBPF toolchain)");
#endif
  }
};

TEST_F(ProbeLossCliTest, HelpOnEverySubcommand) {
  for (const char* sub : {"", "attach ", "stats ", "detach "}) {
    const Result r = RunLoader(std::string(sub) + "--help");
    EXPECT_EQ(r.rc, 0) << sub << r.out;
    EXPECT_NE(r.out.find("Usage:"), std::string::npos) << r.out;
  }
  const Result a = RunLoader("attach --help");
  for (const char* opt : {"--dev", "--fraction", "--port", "--types"}) {
    EXPECT_NE(a.out.find(opt), std::string::npos) << opt << "\n" << a.out;
  }
}

TEST_F(ProbeLossCliTest, RefusesABadFraction) {
  for (const char* f : {"1.5", "-0.1", "abc", "nan", ""}) {
    const Result r = RunLoader(std::string("attach --dev lo --fraction '") + f + "'");
    EXPECT_EQ(r.rc, 2) << f << ": " << r.out;
    EXPECT_NE(r.out.find("--fraction"), std::string::npos) << f << ": " << r.out;
  }
  const Result none = RunLoader("attach --dev lo");
  EXPECT_EQ(none.rc, 2) << none.out;
  EXPECT_NE(none.out.find("--fraction is required"), std::string::npos) << none.out;
}

TEST_F(ProbeLossCliTest, RefusesAMissingDevice) {
  for (const char* args : {"attach --fraction 0.1", "stats", "detach"}) {
    const Result r = RunLoader(args);
    EXPECT_EQ(r.rc, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find("--dev is required"), std::string::npos) << args << ": " << r.out;
  }
  // A device that does not exist is found out before anything is loaded.
  for (const char* args : {"attach --dev clnosuchdev0 --fraction 0.1", "stats --dev clnosuchdev0",
                           "detach --dev clnosuchdev0"}) {
    const Result r = RunLoader(args);
    EXPECT_EQ(r.rc, 1) << args << ": " << r.out;
    EXPECT_NE(r.out.find("no network device 'clnosuchdev0'"), std::string::npos) << r.out;
  }
}

TEST_F(ProbeLossCliTest, RefusesUnknownTypesSubcommandsAndNamespaces) {
  Result r = RunLoader("attach --dev lo --fraction 0.1 --types forward,echo");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("unknown probe type 'echo'"), std::string::npos) << r.out;
  r = RunLoader("attach --dev lo --fraction 0.1 --types ''");
  EXPECT_EQ(r.rc, 2) << r.out;
  r = RunLoader("");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("subcommand"), std::string::npos) << r.out;
  r = RunLoader("drop --dev lo");
  EXPECT_EQ(r.rc, 2) << r.out;
  r = RunLoader("--netns clnosuchns0 stats --dev lo");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("no network namespace /run/netns/clnosuchns0"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace chronolink::testing
