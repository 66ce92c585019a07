// run_directory: finding the run and its host files from a logdir, its
// plugins/profile, or the run itself; clear errors; new run directories.
#include "trace/importers/xspace/run_directory.h"

#include <unistd.h>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;

class RunDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "run_dir_XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    profile_ = root_ / "plugins" / "profile";
  }
  void TearDown() override { fs::remove_all(root_); }

  void Touch(const fs::path& p) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "x";
  }

  fs::path root_;
  fs::path profile_;
};

TEST_F(RunDirectoryTest, LatestRunFromAnyOfTheThreeLevels) {
  Touch(profile_ / "2026_01_02_03_04_05" / "a.xplane.pb");
  Touch(profile_ / "2026_11_25_10_00_00" / "worker-1.xplane.pb");
  Touch(profile_ / "2026_11_25_10_00_00" / "worker-0.xplane.pb");
  Touch(profile_ / "2026_11_25_10_00_00" / "worker-0.trace.json.gz");  // not a host file
  Touch(profile_ / "zzz_not_a_run" / "b.xplane.pb");                    // not a timestamp name
  fs::create_directories(profile_ / "2026_11_25_10_00_00" / "sub.xplane.pb");  // a directory
  for (const fs::path& input : {root_, profile_, profile_ / "2026_11_25_10_00_00",
                                fs::path(profile_.string() + "/2026_11_25_10_00_00/")}) {
    ProfileRun run;
    std::string error;
    ASSERT_TRUE(FindRun(input, "", &run, &error)) << input << ": " << error;
    EXPECT_EQ(run.name, "2026_11_25_10_00_00") << input;
    ASSERT_EQ(run.hosts.size(), 2u) << input;
    EXPECT_EQ(run.hosts[0].host, "worker-0");
    EXPECT_EQ(run.hosts[1].host, "worker-1");
    EXPECT_EQ(run.hosts[1].path.filename(), "worker-1.xplane.pb");
  }
}

TEST_F(RunDirectoryTest, NamedRunAnyName) {
  Touch(profile_ / "2026_11_25_10_00_00" / "a.xplane.pb");
  Touch(profile_ / "my-run" / "b.xplane.pb");
  ProfileRun run;
  std::string error;
  ASSERT_TRUE(FindRun(root_, "my-run", &run, &error)) << error;
  EXPECT_EQ(run.hosts.at(0).host, "b");
  EXPECT_FALSE(FindRun(root_, "absent", &run, &error));
  EXPECT_NE(error.find("no run named 'absent'"), std::string::npos) << error;
  EXPECT_NE(error.find("2026_11_25_10_00_00, my-run"), std::string::npos) << error;
  // Pointing at one run and naming another is a mistake, not a silent pick.
  EXPECT_FALSE(FindRun(profile_ / "my-run", "2026_11_25_10_00_00", &run, &error));
  EXPECT_NE(error.find("is the run 'my-run'"), std::string::npos) << error;
}

TEST_F(RunDirectoryTest, ClearErrors) {
  ProfileRun run;
  std::string error;
  EXPECT_FALSE(FindRun(root_ / "nope", "", &run, &error));
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;
  Touch(root_ / "file");
  EXPECT_FALSE(FindRun(root_ / "file", "", &run, &error));
  EXPECT_NE(error.find("not a directory"), std::string::npos) << error;

  fs::create_directories(profile_ / "scratch");
  // The only run, whatever its name, is the one.
  EXPECT_FALSE(FindRun(root_, "", &run, &error));
  EXPECT_NE(error.find("scratch: no <host>.xplane.pb files"), std::string::npos) << error;
  fs::create_directories(profile_ / "other");
  EXPECT_FALSE(FindRun(root_, "", &run, &error));
  EXPECT_NE(error.find("no run named YYYY_MM_DD_HH_MM_SS"), std::string::npos) << error;
  EXPECT_NE(error.find("scratch"), std::string::npos) << error;

  fs::create_directories(profile_ / "2026_11_25_10_00_00");
  Touch(profile_ / "2026_11_25_10_00_00" / "notes.txt");
  EXPECT_FALSE(FindRun(root_, "", &run, &error));
  EXPECT_NE(error.find("no <host>.xplane.pb files"), std::string::npos) << error;
  EXPECT_NE(error.find("2026_11_25_10_00_00"), std::string::npos) << error;
}

TEST_F(RunDirectoryTest, UnreadableHostFile) {
  const fs::path file = profile_ / "2026_11_25_10_00_00" / "a.xplane.pb";
  Touch(file);
  fs::permissions(file, fs::perms::none);
  const auto refused = [this] {
    ProfileRun run;
    std::string error;
    return !FindRun(root_, "", &run, &error) && error.find("unreadable") != std::string::npos;
  };
  if (::geteuid() != 0) {
    EXPECT_TRUE(refused());
    return;
  }
  // Root reads any file: the check runs in a child that is `nobody`, who
  // may search the directories (mkdtemp made the top one 0700).
  fs::permissions(root_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(2);
    ::_exit(refused() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: could not become nobody; 1: the file was not refused";
}

TEST_F(RunDirectoryTest, RunNames) {
  EXPECT_TRUE(IsTimestampRunName("2026_11_25_10_00_00"));
  EXPECT_FALSE(IsTimestampRunName("2026_11_25_10_00_0"));
  EXPECT_FALSE(IsTimestampRunName("2026-11-25_10_00_00"));
  EXPECT_FALSE(IsTimestampRunName("2026_11_25_10_00_0x"));
  // 2026-11-25T10:15:26Z
  const auto when = std::chrono::system_clock::time_point(std::chrono::seconds(1'795'601'726));
  EXPECT_EQ(RunNameFor(when), "2026_11_25_10_15_26");
  EXPECT_EQ(RunDirectoryPath("/logs", "r"), fs::path("/logs/plugins/profile/r"));
}

TEST_F(RunDirectoryTest, CreateRunDirectoryRefusesToMix) {
  fs::path dir;
  std::string error;
  ASSERT_TRUE(CreateRunDirectory(root_ / "out", "2026_11_25_10_15_26", &dir, &error)) << error;
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_EQ(dir, root_ / "out" / "plugins" / "profile" / "2026_11_25_10_15_26");
  // Empty and existing is fine; with files in it is not.
  ASSERT_TRUE(CreateRunDirectory(root_ / "out", "2026_11_25_10_15_26", &dir, &error)) << error;
  Touch(dir / "a.xplane.pb");
  EXPECT_FALSE(CreateRunDirectory(root_ / "out", "2026_11_25_10_15_26", &dir, &error));
  EXPECT_NE(error.find("not empty"), std::string::npos) << error;
  for (const char* bad : {"", ".", "..", "a/b"}) {
    EXPECT_FALSE(CreateRunDirectory(root_ / "out", bad, &dir, &error)) << bad;
  }
}

}  // namespace
}  // namespace chronolink::trace
