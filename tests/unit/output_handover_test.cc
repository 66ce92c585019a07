// Handing the output directory to the user the agent becomes, on real
// directories: what is created, given, kept and refused, and that a link
// planted under one of the agent's file names is never followed. Giving
// files away needs root: outside CI the tests skip without it.
#include "agent/runtime/output_handover.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/ci_rule.h"

namespace chronolink {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kUid = 65534;
constexpr gid_t kGid = 65534;

class OutputHandoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI("giving files to another user needs root");
    char tmpl[] = "/tmp/output_handover_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!root_.empty()) fs::remove_all(root_, ec);
  }
  static void Touch(const fs::path& p) { std::ofstream(p) << "x\n"; }
  static struct stat Stat(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
    return st;
  }
  bool HandOver(const fs::path& dir, std::string* error) {
    return HandOverOutputDir(dir.string(), AgentOutputFileNames(), {"clock-page"}, kUid, kGid, "nobody (uid 65534)",
                             error);
  }
  fs::path root_;
};

TEST_F(OutputHandoverTest, AMissingDirectoryIsCreatedForTheUser) {
  const fs::path dir = root_ / "a" / "b";
  std::string error;
  ASSERT_TRUE(HandOver(dir, &error)) << error;
  EXPECT_EQ(Stat(dir).st_uid, kUid);
  EXPECT_EQ(Stat(dir).st_gid, kGid);
  EXPECT_EQ(Stat(root_ / "a").st_uid, 0u) << "parents stay root's";
}

// A local user who can write the parent plants a link under the output
// directory's name, pointing at an empty directory of root's: it is not
// followed, and the target is not handed over.
TEST_F(OutputHandoverTest, TheDirectoryItselfIsNotFollowedThroughALink) {
  const fs::path target = root_ / "roots";
  fs::create_directory(target);
  const fs::path dir = root_ / "out";
  fs::create_directory_symlink(target, dir);
  std::string error;
  EXPECT_FALSE(HandOver(dir, &error));
  EXPECT_NE(error.find("output directory"), std::string::npos) << error;
  EXPECT_EQ(Stat(target).st_uid, 0u) << "the link's target was handed over";
}

// A run as root left a root-owned directory with the agent's files in it.
TEST_F(OutputHandoverTest, RootsDirectoryWithOnlyTheAgentsFilesIsGivenWithThem) {
  const fs::path dir = root_ / "out";
  fs::create_directory(dir);
  for (const char* f : {"edges.jsonl", "agent_stats.json", "offsets.jsonl"}) Touch(dir / f);
  std::string error;
  ASSERT_TRUE(HandOver(dir, &error)) << error;
  EXPECT_EQ(Stat(dir).st_uid, kUid);
  for (const char* f : {"edges.jsonl", "agent_stats.json", "offsets.jsonl"}) {
    EXPECT_EQ(Stat(dir / f).st_uid, kUid) << f;
    EXPECT_EQ(Stat(dir / f).st_gid, kGid) << f;
  }
}

// A clock page placed in the directory is the agent's, but stays root's:
// the agent writes it through a mapping made before the drop.
TEST_F(OutputHandoverTest, AKeptFileIsAllowedButNotGivenAway) {
  const fs::path dir = root_ / "out";
  fs::create_directory(dir);
  Touch(dir / "clock-page");
  Touch(dir / "edges.jsonl");
  std::string error;
  ASSERT_TRUE(HandOver(dir, &error)) << error;
  EXPECT_EQ(Stat(dir).st_uid, kUid);
  EXPECT_EQ(Stat(dir / "edges.jsonl").st_uid, kUid);
  EXPECT_EQ(Stat(dir / "clock-page").st_uid, 0u);
}

TEST_F(OutputHandoverTest, RootsDirectoryWithOtherFilesIsRefusedWithTheFix) {
  const fs::path dir = root_ / "etc-like";
  fs::create_directory(dir);
  Touch(dir / "passwd");
  std::string error;
  EXPECT_FALSE(HandOver(dir, &error));
  EXPECT_NE(error.find("holds other files than the agent's ('passwd')"), std::string::npos) << error;
  EXPECT_NE(error.find("not writable by user nobody (uid 65534)"), std::string::npos) << error;
  EXPECT_NE(error.find("--output-dir"), std::string::npos) << error;
  EXPECT_EQ(Stat(dir).st_uid, 0u) << "left as it was";
}

TEST_F(OutputHandoverTest, AnotherUsersDirectoryIsRefused) {
  const fs::path dir = root_ / "theirs";
  fs::create_directory(dir);
  ASSERT_EQ(chown(dir.c_str(), 1, 1), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  std::string error;
  EXPECT_FALSE(HandOver(dir, &error));
  EXPECT_NE(error.find("belongs to uid 1"), std::string::npos) << error;
  EXPECT_EQ(Stat(dir).st_uid, 1u);
}

// Writable already: the user's own, or through the group, or shared.
TEST_F(OutputHandoverTest, AWritableDirectoryIsKeptAndASharedOnesFilesAreNotGivenAway) {
  const fs::path group = root_ / "group";
  fs::create_directory(group);
  ASSERT_EQ(chown(group.c_str(), 0, kGid), 0);
  ASSERT_EQ(chmod(group.c_str(), 0770), 0);
  std::string error;
  ASSERT_TRUE(HandOver(group, &error)) << error;
  EXPECT_EQ(Stat(group).st_uid, 0u);

  const fs::path shared = root_ / "shared";
  fs::create_directory(shared);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  Touch(shared / "edges.jsonl");  // root's, in a directory anyone may write
  ASSERT_TRUE(HandOver(shared, &error)) << error;
  EXPECT_EQ(Stat(shared).st_uid, 0u);
  EXPECT_EQ(Stat(shared / "edges.jsonl").st_uid, 0u) << "a root file in a shared directory is not given away";
}

// A symbolic or hard link under one of the agent's names is not followed:
// what it points to keeps its owner.
TEST_F(OutputHandoverTest, LinksUnderTheAgentsNamesAreNotFollowed) {
  const fs::path dir = root_ / "out";
  fs::create_directory(dir);
  const fs::path victim = root_ / "victim";
  const fs::path other = root_ / "other";
  Touch(victim);
  Touch(other);
  fs::create_symlink(victim, dir / "edges.jsonl");
  fs::create_hard_link(other, dir / "agent_stats.json");
  std::string error;
  ASSERT_TRUE(HandOver(dir, &error)) << error;
  EXPECT_EQ(Stat(dir).st_uid, kUid);
  EXPECT_EQ(Stat(victim).st_uid, 0u) << "followed a symbolic link";
  EXPECT_EQ(Stat(other).st_uid, 0u) << "gave away a file with another link";
}

}  // namespace
}  // namespace chronolink
