// The CI rule itself (tests/support/ci_rule.h): under CI a test that cannot
// run fails, outside CI it skips with its reason. Checked the way a run
// sees it: this binary re-runs itself as a child, with CI set or not, on a
// test that applies the rule, and the child's exit status and output are
// read. That child test is registered only when kChildEnv is set, so a
// normal run (and ctest's test listing) never sees it.
#include "tests/support/ci_rule.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace chronolink {
namespace {

constexpr char kChildEnv[] = "CHRONOLINK_CI_RULE_CHILD";
constexpr char kChildTest[] = "CiRuleChild.AppliesTheRule";
constexpr char kReason[] = "the ci rule test's reason";
constexpr char kRanPast[] = "ran past the rule";

class RuleChild : public ::testing::Test {
  void TestBody() override {
    CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI(kReason);
    std::printf("%s\n", kRanPast);  // the macro must have returned before this
  }
};

[[maybe_unused]] const bool kChildRegistered = [] {
  if (std::getenv(kChildEnv) == nullptr) return false;
  ::testing::RegisterTest("CiRuleChild", "AppliesTheRule", nullptr, nullptr, __FILE__, __LINE__,
                          []() -> ::testing::Test* { return new RuleChild; });
  return true;
}();

struct ChildRun {
  int exit_code = -1;  // -1: did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs this binary on the child test, with CI=ci (unset when nullopt) and
// no inherited GTEST_* settings (sharding, output files).
ChildRun RunChild(std::optional<std::string> ci) {
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var(*e);
    if (var.rfind("CI=", 0) == 0 || var.rfind("GTEST_", 0) == 0) continue;
    env_text.push_back(var);
  }
  env_text.push_back(std::string(kChildEnv) + "=1");
  if (ci) env_text.push_back("CI=" + *ci);
  std::vector<char*> env;
  for (std::string& v : env_text) env.push_back(v.data());
  env.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::string filter = std::string("--gtest_filter=") + kChildTest;
  char* argv[] = {exe.data(), filter.data(), nullptr};

  ChildRun run;
  int fds[2];
  if (pipe(fds) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return run;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return run;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execve(exe.c_str(), argv, env.data());
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      run.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Sets CI (or unsets it) for one scope, and puts the outer value back.
class ScopedCi {
 public:
  explicit ScopedCi(const char* value) {
    if (const char* old = std::getenv("CI")) old_ = old;
    if (value) {
      setenv("CI", value, 1);
    } else {
      unsetenv("CI");
    }
  }
  ~ScopedCi() {
    if (old_) {
      setenv("CI", old_->c_str(), 1);
    } else {
      unsetenv("CI");
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(CiRule, UnderCiReadsTheCiVariable) {
  for (const char* on : {"true", "1", "yes"}) {
    ScopedCi ci(on);
    EXPECT_TRUE(testing::UnderCi()) << "CI=" << on;
  }
  for (const char* off : {"", "0", "false", "FALSE", "False"}) {
    ScopedCi ci(off);
    EXPECT_FALSE(testing::UnderCi()) << "CI=\"" << off << "\"";
  }
  ScopedCi unset(nullptr);
  EXPECT_FALSE(testing::UnderCi()) << "CI unset";
}

TEST(CiRule, UnderCiATestThatCannotRunFails) {
  for (const char* on : {"true", "1"}) {
    const ChildRun run = RunChild(on);
    SCOPED_TRACE(std::string("CI=") + on + ", child output:\n" + run.output);
    EXPECT_TRUE(Has(run.output, std::string("[ RUN      ] ") + kChildTest));
    EXPECT_NE(run.exit_code, 0);
    EXPECT_NE(run.exit_code, -1);  // exited, did not crash
    EXPECT_TRUE(Has(run.output, std::string("CI must run this test, but: ") + kReason));
    EXPECT_TRUE(Has(run.output, std::string("[  FAILED  ] ") + kChildTest));
    EXPECT_FALSE(Has(run.output, "[  SKIPPED ]"));
    EXPECT_FALSE(Has(run.output, kRanPast));
  }
}

TEST(CiRule, OutsideCiATestThatCannotRunSkipsWithItsReason) {
  for (const std::optional<std::string>& off :
       {std::optional<std::string>(), std::optional<std::string>(""), std::optional<std::string>("0"),
        std::optional<std::string>("false")}) {
    const ChildRun run = RunChild(off);
    SCOPED_TRACE((off ? "CI=\"" + *off + "\"" : std::string("CI unset")) + ", child output:\n" +
                 run.output);
    EXPECT_TRUE(Has(run.output, std::string("[ RUN      ] ") + kChildTest));
    EXPECT_EQ(run.exit_code, 0);
    EXPECT_TRUE(Has(run.output, std::string("skipped outside CI: ") + kReason));
    EXPECT_TRUE(Has(run.output, std::string("[  SKIPPED ] ") + kChildTest));
    EXPECT_FALSE(Has(run.output, "[  FAILED  ]"));
    EXPECT_FALSE(Has(run.output, kRanPast));
  }
}

}  // namespace
}  // namespace chronolink
