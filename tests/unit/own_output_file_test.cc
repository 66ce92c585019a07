// The agent's appended outputs (edges.jsonl, offsets.jsonl, the stamp log)
// in a directory another user can write: nothing planted at their names is
// written through. Real files, links and FIFOs in a real directory.
#include "common/own_output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/export/edges_jsonl_writer.h"
#include "agent/export/offsets_jsonl_writer.h"
#include "common/atomic_output_file.h"
#include "tests/support/ci_rule.h"

namespace chronolink {
namespace {

namespace fs = std::filesystem;

class OwnOutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("own-output-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    victim_ = dir_ / "victim";
    std::ofstream(victim_) << "precious";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string VictimText() const {
    std::ifstream in(victim_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  fs::path dir_, victim_;
};

TEST_F(OwnOutputFileTest, AppendsToItsOwnFile) {
  std::string error;
  for (int i = 0; i < 2; ++i) {
    std::FILE* f = OpenOwnOutputForAppend(dir_ / "edges.jsonl", &error);
    ASSERT_NE(f, nullptr) << error;
    std::fputs("line\n", f);
    std::fclose(f);
  }
  EXPECT_EQ(fs::file_size(dir_ / "edges.jsonl"), 10u);
  EXPECT_EQ(fs::status(dir_ / "edges.jsonl").permissions() & fs::perms::others_write, fs::perms::none);
}

TEST_F(OwnOutputFileTest, ALinkAtTheNameIsRefusedAndItsTargetUntouched) {
  fs::create_symlink(victim_, dir_ / "edges.jsonl");
  fs::create_symlink(victim_, dir_ / "offsets.jsonl");
  EdgesJsonlWriter edges;
  std::string error;
  EXPECT_FALSE(edges.Open(dir_.string(), EdgeRecordContext{}, &error));
  EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;
  OffsetsJsonlWriter offsets;
  error.clear();
  EXPECT_FALSE(offsets.Open(dir_.string(), &error));
  EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;
  EXPECT_EQ(VictimText(), "precious");
}

TEST_F(OwnOutputFileTest, AHardLinkAndAFifoAreRefused) {
  fs::create_hard_link(victim_, dir_ / "edges.jsonl");
  std::string error;
  EXPECT_EQ(OpenOwnOutputForAppend(dir_ / "edges.jsonl", &error), nullptr);
  EXPECT_NE(error.find("2 hard links"), std::string::npos) << error;
  ASSERT_EQ(mkfifo((dir_ / "offsets.jsonl").c_str(), 0644), 0);
  EXPECT_EQ(OpenOwnOutputForAppend(dir_ / "offsets.jsonl", &error), nullptr) << "must not block";
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  EXPECT_EQ(VictimText(), "precious");
}

TEST_F(OwnOutputFileTest, AFileOfAnotherUserIsRefused) {
  if (geteuid() != 0) CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI("giving a file to another user needs root");
  const fs::path planted = dir_ / "edges.jsonl";
  std::ofstream(planted) << "";
  ASSERT_EQ(chown(planted.c_str(), 65534, 65534), 0);
  std::string error;
  EXPECT_EQ(OpenOwnOutputForAppend(planted, &error), nullptr);
  EXPECT_NE(error.find("owned by uid 65534"), std::string::npos) << error;
}

// An atomic write replaces a link at its name (rename does not follow it)
// and never uses a guessable temporary name.
TEST_F(OwnOutputFileTest, AnAtomicWriteReplacesALinkAndLeavesItsTargetAlone) {
  const fs::path stats = dir_ / "agent_stats.json";
  fs::create_symlink(victim_, stats);
  fs::create_symlink(victim_, dir_ / "agent_stats.json.tmp");
  std::string error;
  ASSERT_TRUE(WriteFileAtomically(stats, "{}\n", &error)) << error;
  EXPECT_FALSE(fs::is_symlink(stats));
  EXPECT_EQ(fs::file_size(stats), 3u);
  EXPECT_EQ(VictimText(), "precious");
}

}  // namespace
}  // namespace chronolink
