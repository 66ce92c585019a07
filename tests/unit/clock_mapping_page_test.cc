// The shared-memory clock page: a real /dev/shm file, a writer thread and
// reader threads that must never see a torn mapping.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "agent/export/clock_mapping_publisher.h"

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
  pub.Publish(m);
  ASSERT_TRUE(reader.Read(&got));
  EXPECT_TRUE(got.valid);
  EXPECT_EQ(got.offset_ns, 12345);
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
  std::thread writer([&] {
    for (int64_t k = 1; !stop.load(); ++k) {
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
      for (int i = 0; i < 200'000; ++i) {
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
  ClockMappingReader reader;
  ASSERT_TRUE(reader.Open(path));
  ClockMapping m;
  EXPECT_FALSE(reader.Read(&m));
  EXPECT_FALSE(reader.Open(path + "-missing"));
  unlink(path.c_str());
}

}  // namespace
}  // namespace chronolink
