// timebase.jsonl (agent/export/timebase_jsonl_writer.h): each knot written
// once, in order, as exact integers a JSON reader gets back, the knots the
// map no longer needs dropped, and a file another user planted refused.
#include "agent/export/timebase_jsonl_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace chronolink {
namespace {

constexpr int64_t kT0 = 1'795'320'926'000'000'123;

class TimebaseJsonlWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("timebase_writer_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::vector<nlohmann::json> Lines() const {
    std::ifstream in(dir_ / "timebase.jsonl");
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  std::filesystem::path dir_;
};

TEST_F(TimebaseJsonlWriterTest, EachKnotOnceInOrderAsExactIntegers) {
  TimebaseJsonlWriter writer;
  std::string error;
  ASSERT_TRUE(writer.Open(dir_.string(), 3, 0xfeedULL, &error)) << error;
  TimebaseKnots knots(1);
  // A rate change of +1 ppm at 0.5 s, then a step back of 2 ms at 1.2 s.
  for (int64_t i = 0; i <= 1500; ++i) {
    const int64_t raw = 5'000'000'000 + i * 1'000'000;
    int64_t rt = kT0 + i * 1'000'000;
    if (i > 500) rt += (i - 500) * 1;  // 1 ns per ms
    if (i >= 1200) rt -= 2'000'000;
    knots.Add({rt, raw, 0});
    if (i % 400 == 0) {
      ASSERT_TRUE(writer.WriteNew(knots, &error)) << error;
    }
  }
  ASSERT_TRUE(writer.WriteNew(knots, &error)) << error;
  ASSERT_TRUE(writer.WriteNew(knots, &error)) << "nothing new: nothing written";
  const auto lines = Lines();
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines.size(), writer.lines_written());
  int64_t previous = 0;
  size_t steps = 0;
  for (const auto& j : lines) {
    EXPECT_EQ(j.at("schema"), kTimebaseSchema);
    EXPECT_EQ(j.at("node"), 3);
    EXPECT_EQ(j.at("session"), std::to_string(0xfeedULL));
    ASSERT_TRUE(j.at("realtime_ns").is_number_integer());
    EXPECT_GT(j.at("raw_ns").get<int64_t>(), previous);
    previous = j.at("raw_ns").get<int64_t>();
    steps += j.at("after_step").get<bool>();
  }
  EXPECT_EQ(steps, 1u);
  EXPECT_EQ(lines.front().at("realtime_ns").get<int64_t>(), kT0) << "epoch ns to the last digit";
}

TEST_F(TimebaseJsonlWriterTest, AFilePlantedAsALinkIsRefused) {
  std::filesystem::create_symlink("/etc/passwd", dir_ / "timebase.jsonl");
  TimebaseJsonlWriter writer;
  std::string error;
  EXPECT_FALSE(writer.Open(dir_.string(), 1, 1, &error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace chronolink
