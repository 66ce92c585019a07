// The shared-memory clock page: a real /dev/shm file, a writer thread and
// reader threads that must never see a torn mapping.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "agent/export/clock_mapping_publisher.h"
#include "tests/support/ci_rule.h"

namespace chronolink {
namespace {

constexpr int64_t kEpoch = 1'790'000'000'000'000'000LL;

std::string TestPath() { return "/dev/shm/chronolink-test-" + std::to_string(getpid()); }

TEST(ClockMappingPage, ConvertsLocalToClusterTimeExactly) {
  ClockMapping m;
  m.local_ref_ns = kEpoch;
  m.offset_ns = -3'700'000;
  m.drift_ppt = 45'000'000;  // 45 ppm
  m.uncertainty_ns = 20;
  m.uncertainty_growth_ppt = 1'000'000;  // 1 ppm
  EXPECT_EQ(m.ToCluster(kEpoch), kEpoch - 3'700'000);
  // 10 s later, 45 ppm adds 450 us.
  EXPECT_EQ(m.ToCluster(kEpoch + 10'000'000'000), kEpoch + 10'000'000'000 - 3'700'000 + 450'000);
  EXPECT_EQ(m.ToCluster(kEpoch - 1'000'000'000), kEpoch - 1'000'000'000 - 3'700'000 - 45'000);
  EXPECT_EQ(m.UncertaintyAt(kEpoch - 2'000'000'000), 20 + 2'000);
}

// A reader tells a step of the local clock since the mapping was written,
// forwards or back, from a local reading and CLOCK_MONOTONIC taken together;
// a clock that only drifts (100 ppm, a test bed's virtual clock) is no step.
TEST(ClockMappingPage, AReaderSeesAStepSinceTheMappingWasWritten) {
  ClockMapping m;
  m.published_local_ns = kEpoch;
  m.published_monotonic_ns = 5'000'000'000;
  constexpr int64_t kS = 1'000'000'000;
  EXPECT_FALSE(m.ClockSteppedSince(kEpoch + 2 * kS, 7 * kS));
  EXPECT_FALSE(m.ClockSteppedSince(kEpoch + 2 * kS + 200'000, 7 * kS)) << "100 ppm over 2 s";
  EXPECT_TRUE(m.ClockSteppedSince(kEpoch + 2 * kS + 1'000'000, 7 * kS)) << "1 ms forwards";
  EXPECT_TRUE(m.ClockSteppedSince(kEpoch + 2 * kS - 1'000'000, 7 * kS)) << "1 ms back";
  EXPECT_TRUE(m.ClockSteppedSince(kEpoch + 4 * kS - kS, 9 * kS)) << "1 s back";
}

TEST(ClockMappingPage, PublishedMappingIsReadBackThroughTheFile) {
  const std::string path = TestPath();
  ClockMappingPublisher pub;
  std::string error;
  ASSERT_TRUE(pub.Open(path, 7, &error)) << error;
  ClockMappingReader reader;
  ASSERT_TRUE(reader.Open(path));
  ClockMapping got;
  ASSERT_TRUE(reader.Read(&got));
  EXPECT_FALSE(got.valid) << "nothing solved yet";
  EXPECT_EQ(got.node_id, 7u);
  ClockMapping m;
  m.node_id = 7;
  m.valid = true;
  m.local_ref_ns = kEpoch;
  m.offset_ns = 12345;
  m.valid_until_ns = kEpoch + 4'000'000'000;
  m.published_local_ns = kEpoch + 1;
  m.published_monotonic_ns = 777;
  pub.Publish(m);
  ASSERT_TRUE(reader.Read(&got));
  EXPECT_TRUE(got.valid);
  EXPECT_EQ(got.offset_ns, 12345);
  EXPECT_EQ(got.published_local_ns, kEpoch + 1);
  EXPECT_EQ(got.published_monotonic_ns, 777);
  EXPECT_EQ(got.valid_until_ns, kEpoch + 4'000'000'000);
  pub.Close();
  ASSERT_TRUE(reader.Read(&got));
  EXPECT_FALSE(got.valid) << "a closed publisher leaves an invalid mapping, not a stale valid one";
  unlink(path.c_str());
}

TEST(ClockMappingPage, ReadersNeverSeeATornMapping) {
  const std::string path = TestPath() + "-race";
  ClockMappingPublisher pub;
  std::string error;
  ASSERT_TRUE(pub.Open(path, 1, &error)) << error;
  std::atomic<bool> stop{false};
  std::atomic<bool> writing{false};
  std::thread writer([&] {
    for (int64_t k = 1; !stop.load(); ++k) {
      if (k == 2) writing = true;
      ClockMapping m;
      m.node_id = 1;
      m.valid = true;
      // Every field derived from k: a torn read mixes two k.
      m.local_ref_ns = k;
      m.offset_ns = 2 * k;
      m.drift_ppt = 3 * k;
      m.uncertainty_ns = 4 * k;
      m.uncertainty_growth_ppt = 5 * k;
      m.valid_until_ns = 6 * k;
      pub.Publish(m);
    }
  });
  std::vector<std::thread> readers;
  std::atomic<int64_t> reads{0}, torn{0};
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      ClockMappingReader reader;
      if (!reader.Open(path)) return;
      // On a loaded machine the writer may not have run yet: read while it
      // writes, or the reads race nothing (and find no valid mapping).
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!writing.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      for (int i = 0; i < 50'000; ++i) {
        ClockMapping m;
        if (!reader.Read(&m) || !m.valid) continue;
        ++reads;
        const int64_t k = m.local_ref_ns;
        if (m.offset_ns != 2 * k || m.drift_ppt != 3 * k || m.uncertainty_ns != 4 * k ||
            m.uncertainty_growth_ppt != 5 * k || m.valid_until_ns != 6 * k) {
          ++torn;
        }
      }
    });
  }
  for (auto& t : readers) t.join();
  stop = true;
  writer.join();
  EXPECT_GT(reads.load(), 1000);
  EXPECT_EQ(torn.load(), 0);
  pub.Close();
  unlink(path.c_str());
}

TEST(ClockMappingPage, RefusesAFileThatIsNotAPage) {
  const std::string path = TestPath() + "-junk";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("not a clock page, but long enough to map: ................................"
        "................................................................", f);
  fclose(f);
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);  // whatever the umask: a page must not be writable by others
  ClockMappingReader reader;
  ASSERT_TRUE(reader.Open(path));
  ClockMapping m;
  EXPECT_FALSE(reader.Read(&m));
  EXPECT_FALSE(reader.Open(path + "-missing"));
  unlink(path.c_str());
}

// The page lives in /dev/shm, where any local user may create files: what
// is found at its path is used only when it is the agent's own page.

TEST(ClockMappingPage, ASymlinkAtThePathIsRefusedAndItsTargetUntouched) {
  const std::string path = TestPath() + "-link";
  const std::string target = TestPath() + "-victim";
  {
    FILE* f = fopen(target.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("precious", f);
    fclose(f);
  }
  ASSERT_EQ(symlink(target.c_str(), path.c_str()), 0);
  ClockMappingPublisher pub;
  std::string error;
  EXPECT_FALSE(pub.Open(path, 3, &error));
  EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;
  EXPECT_NE(error.find("rm '" + path + "'"), std::string::npos) << error;
  struct stat st {};
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8) << "the link's target was written through";
  unlink(path.c_str());
  unlink(target.c_str());
}

TEST(ClockMappingPage, APageOfAnotherUserIsRefused) {
  if (geteuid() != 0) {
    CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI("giving a file to another user needs root");
  }
  const std::string path = TestPath() + "-theirs";
  {
    ClockMappingPublisher pub;
    std::string error;
    ASSERT_TRUE(pub.Open(path, 3, &error)) << error;
  }
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  ClockMappingPublisher pub;
  std::string error;
  EXPECT_FALSE(pub.Open(path, 3, &error));
  EXPECT_NE(error.find("owned by uid 65534"), std::string::npos) << error;
  unlink(path.c_str());
}

TEST(ClockMappingPage, AGroupOrOtherWritablePageIsRefused) {
  const std::string path = TestPath() + "-loose";
  {
    ClockMappingPublisher pub;
    std::string error;
    ASSERT_TRUE(pub.Open(path, 3, &error)) << error;
  }
  for (mode_t mode : {0664, 0646}) {
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    ClockMappingPublisher pub;
    std::string error;
    EXPECT_FALSE(pub.Open(path, 3, &error)) << std::oct << mode;
    EXPECT_NE(error.find("writable by its group or others"), std::string::npos) << error;
  }
  unlink(path.c_str());
}

TEST(ClockMappingPage, AHardLinkedPageIsRefused) {
  const std::string path = TestPath() + "-linked";
  const std::string other = TestPath() + "-other";
  {
    FILE* f = fopen(other.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
  }
  ASSERT_EQ(link(other.c_str(), path.c_str()), 0);
  ClockMappingPublisher pub;
  std::string error;
  EXPECT_FALSE(pub.Open(path, 3, &error));
  EXPECT_NE(error.find("hard links"), std::string::npos) << error;
  unlink(path.c_str());
  unlink(other.c_str());
}

// The reader's side: what a local user may have left at the path before
// the agent started is trusted only when the agent (or root, or the
// reader's own user) could be its owner; nothing at the path can block,
// kill or mislead the reader.

// A page with a valid mapping made by the publisher at `path`.
void WriteValidPage(const std::string& path) {
  ClockMappingPublisher pub;
  std::string error;
  ASSERT_TRUE(pub.Open(path, 4, &error)) << error;
  ClockMapping m;
  m.node_id = 4;
  m.valid = true;
  m.offset_ns = 5'000'000'000;
  pub.Publish(m);
}

TEST(ClockMappingReader, APageOfAnotherUserIsRefusedUnlessItIsTheAgentsUser) {
  if (geteuid() != 0) CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI("giving a file to another user needs root");
  const std::string path = TestPath() + "-planted";
  WriteValidPage(path);
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  ClockMappingReader reader;
  const ClockPageOpen opened = reader.Open(path);
  EXPECT_EQ(opened.state, ClockPageOpen::kRefused);
  EXPECT_NE(opened.why.find("owned by uid 65534"), std::string::npos) << opened.why;
  ClockMapping m;
  EXPECT_FALSE(reader.Read(&m));
  ClockMappingReader trusting(ClockPageOwners{65534});
  ASSERT_TRUE(trusting.Open(path));
  ASSERT_TRUE(trusting.Read(&m));
  EXPECT_EQ(m.offset_ns, 5'000'000'000);
  unlink(path.c_str());
}

TEST(ClockMappingReader, ALinkAHardLinkAndAWritablePageAreRefused) {
  const std::string page = TestPath() + "-real";
  const std::string link = TestPath() + "-symlink";
  const std::string hard = TestPath() + "-hardlink";
  WriteValidPage(page);
  ASSERT_EQ(symlink(page.c_str(), link.c_str()), 0);
  ClockMappingReader reader;
  ClockPageOpen opened = reader.Open(link);
  EXPECT_EQ(opened.state, ClockPageOpen::kRefused);
  EXPECT_NE(opened.why.find("symbolic link"), std::string::npos) << opened.why;
  ASSERT_EQ(::link(page.c_str(), hard.c_str()), 0);
  opened = reader.Open(hard);
  EXPECT_EQ(opened.state, ClockPageOpen::kRefused);
  EXPECT_NE(opened.why.find("2 hard links"), std::string::npos) << opened.why;
  unlink(hard.c_str());
  ASSERT_TRUE(reader.Open(page));
  ASSERT_EQ(chmod(page.c_str(), 0666), 0);
  opened = reader.Open(page);
  EXPECT_EQ(opened.state, ClockPageOpen::kRefused);
  EXPECT_NE(opened.why.find("writable by its group or others"), std::string::npos) << opened.why;
  EXPECT_EQ(reader.Open(page + "-missing").state, ClockPageOpen::kAbsent);
  unlink(link.c_str());
  unlink(page.c_str());
}

// Run in a child process: a reader that blocks or dies shows as the
// child's fate (alarm: a blocked open is killed after 5 s), not the
// test runner's.
TEST(ClockMappingReaderDeathTest, AFifoAtThePathIsRefusedWithoutBlocking) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = TestPath() + "-fifo";
  ASSERT_EQ(mkfifo(path.c_str(), 0644), 0);
  EXPECT_EXIT(
      {
        alarm(5);
        ClockMappingReader reader;
        const ClockPageOpen opened = reader.Open(path);
        std::exit(opened.state == ClockPageOpen::kRefused && opened.why.find("FIFO") != std::string::npos ? 0
                                                                                                         : 3);
      },
      ::testing::ExitedWithCode(0), "");
  unlink(path.c_str());
}

TEST(ClockMappingReaderDeathTest, APageShortenedUnderTheReaderFailsTheReadNotTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = TestPath() + "-shrinks";
  WriteValidPage(path);
  EXPECT_EXIT(
      {
        ClockMappingReader reader;
        if (!reader.Open(path)) std::exit(4);
        ClockMapping m;
        if (!reader.Read(&m)) std::exit(5);
        if (truncate(path.c_str(), 0) != 0) std::exit(6);
        std::exit(reader.Read(&m) ? 7 : 0);  // SIGBUS, when the page was mapped
      },
      ::testing::ExitedWithCode(0), "");
  unlink(path.c_str());
}

// A page is created 0644 whatever the umask (readers are other users), and
// the agent's own page from an earlier run is reused: same file, readable.
TEST(ClockMappingPage, NewPageIsWorldReadableAndOwnPageIsReused) {
  const std::string path = TestPath() + "-own";
  const mode_t old_umask = umask(077);
  struct stat first {};
  {
    ClockMappingPublisher pub;
    std::string error;
    const bool opened = pub.Open(path, 5, &error);
    umask(old_umask);
    ASSERT_TRUE(opened) << error;
    ASSERT_EQ(stat(path.c_str(), &first), 0);
    EXPECT_EQ(first.st_mode & 07777, 0644u);
    EXPECT_EQ(first.st_uid, geteuid());
  }
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);  // e.g. left by an older agent: readers could not open it
  ClockMappingPublisher pub;
  std::string error;
  ASSERT_TRUE(pub.Open(path, 5, &error)) << error;
  struct stat again {};
  ASSERT_EQ(stat(path.c_str(), &again), 0);
  EXPECT_EQ(again.st_ino, first.st_ino);
  EXPECT_EQ(again.st_mode & 07777, 0644u);
  ClockMapping m;
  m.node_id = 5;
  m.valid = true;
  m.local_ref_ns = 1'000;
  m.offset_ns = 42;
  m.uncertainty_ns = 9;
  m.valid_until_ns = 2'000'000'000;
  pub.Publish(m);
  ClockMappingReader reader;
  ASSERT_TRUE(reader.Open(path));
  ClockMapping back;
  ASSERT_TRUE(reader.Read(&back));
  EXPECT_EQ(back.offset_ns, 42);
  pub.Close();
  unlink(path.c_str());
}

}  // namespace
}  // namespace chronolink
