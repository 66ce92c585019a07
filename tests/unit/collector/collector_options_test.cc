// The collector's options: file < environment < flags (or the embedding's
// JSON), the agent's value parsers, clear errors naming the source.
#include "collector/config/collector_options.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace chronolink::collector {
namespace {

class CollectorOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("collector-options-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    for (const char* v : set_vars_) unsetenv(v);
    std::filesystem::remove_all(dir_);
  }
  void SetEnv(const char* name, const char* value) {
    setenv(name, value, 1);
    set_vars_.push_back(name);
  }
  std::string WriteFile(const std::string& text) {
    const auto p = dir_ / "collector.json";
    std::ofstream(p) << text;
    return p.string();
  }
  bool Load(const OptionSources& s, CollectorOptions* o, std::string* error) {
    std::vector<std::string> warnings;
    return LoadCollectorOptions(s, o, &warnings, error);
  }

  std::filesystem::path dir_;
  std::vector<const char*> set_vars_;
};

TEST_F(CollectorOptionsTest, DefaultsWithoutAnySource) {
  OptionSources s;
  s.read_environment = false;
  CollectorOptions o;
  std::string error;
  ASSERT_TRUE(Load(s, &o, &error)) << error;
  EXPECT_EQ(o.backend, "auto");
  EXPECT_FALSE(o.fail_without_gpu);
  EXPECT_EQ(o.sample_period_ns, 100'000'000);
  EXPECT_EQ(o.reads_per_sample, 8);
  EXPECT_TRUE(o.clock_page.empty());
  EXPECT_FALSE(o.host.empty());
}

TEST_F(CollectorOptionsTest, FlagsBeatEnvironmentBeatsFile) {
  OptionSources s;
  s.config_file = WriteFile(R"({"sample_period_ms": 10, "reads_per_sample": 3, "max_knots": 100})");
  SetEnv("CHRONOLINK_READS_PER_SAMPLE", "5");
  SetEnv("CHRONOLINK_MAX_KNOTS", "200");
  s.flags["max_knots"] = "300";
  CollectorOptions o;
  std::string error;
  ASSERT_TRUE(Load(s, &o, &error)) << error;
  EXPECT_EQ(o.sample_period_ns, 10'000'000);  // file only
  EXPECT_EQ(o.reads_per_sample, 5);            // env over file
  EXPECT_EQ(o.max_knots, 300);                 // flag over env
}

TEST_F(CollectorOptionsTest, EmbeddingJsonHasTheFlagsPrecedence) {
  OptionSources s;
  SetEnv("CHRONOLINK_BACKEND", "rocm");
  s.options_json = R"({"backend": "simulated", "devices": "0,2", "backend_settings": "devices=3, seed=4"})";
  CollectorOptions o;
  std::string error;
  ASSERT_TRUE(Load(s, &o, &error)) << error;
  EXPECT_EQ(o.backend, "simulated");
  EXPECT_EQ(o.devices, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(o.backend_settings, (std::vector<std::string>{"devices=3", "seed=4"}));
}

TEST_F(CollectorOptionsTest, BadValuesNameTheirSource) {
  struct Case {
    const char* key;
    const char* value;
    const char* expect;
  };
  for (const Case& c : {Case{"reads_per_sample", "0", "--reads-per-sample"},
                        Case{"sample_period_ms", "-5", "--sample-period-ms"},
                        Case{"backend", "opencl", "not a backend"},
                        Case{"no_device", "maybe", "continue or fail"},
                        Case{"devices", "0,x", "device ordinal"},
                        Case{"max_bracket_us", "abc", "--max-bracket-us"}}) {
    OptionSources s;
    s.read_environment = false;
    s.flags[c.key] = c.value;
    CollectorOptions o;
    std::string error;
    EXPECT_FALSE(Load(s, &o, &error)) << c.key;
    EXPECT_NE(error.find(c.expect), std::string::npos) << c.key << ": " << error;
  }
}

TEST_F(CollectorOptionsTest, UnknownFileKeySuggestsTheRightOne) {
  OptionSources s;
  s.read_environment = false;
  s.config_file = WriteFile(R"({"sample_perod_ms": 10})");
  CollectorOptions o;
  std::string error;
  EXPECT_FALSE(Load(s, &o, &error));
  EXPECT_NE(error.find("sample_period_ms"), std::string::npos) << error;
  s.config_file = WriteFile("{not json");
  EXPECT_FALSE(Load(s, &o, &error));
  EXPECT_NE(error.find("not a JSON object"), std::string::npos) << error;
  s.config_file = (dir_ / "absent.json").string();
  EXPECT_FALSE(Load(s, &o, &error));
  EXPECT_NE(error.find("cannot read"), std::string::npos) << error;
}

TEST_F(CollectorOptionsTest, VirtualClockNeedsTestMode) {
  OptionSources s;
  s.read_environment = false;
  s.flags["virtual_clock.offset_ns"] = "1000";
  CollectorOptions o;
  std::string error;
  EXPECT_FALSE(Load(s, &o, &error));
  EXPECT_NE(error.find("--test-mode"), std::string::npos) << error;
  s.flags["test_mode"] = "true";
  ASSERT_TRUE(Load(s, &o, &error)) << error;
  EXPECT_EQ(o.virtual_clock.offset_ns, 1000);
}

TEST_F(CollectorOptionsTest, AClockStateFileNeedsTestModeAndExcludesTheLinearClock) {
  OptionSources s;
  s.read_environment = false;
  s.flags["virtual_clock.state_file"] = "/tmp/node1.clock";
  CollectorOptions o;
  std::string error;
  EXPECT_FALSE(Load(s, &o, &error));
  EXPECT_NE(error.find("--test-mode"), std::string::npos) << error;
  s.flags["test_mode"] = "true";
  ASSERT_TRUE(Load(s, &o, &error)) << error;
  EXPECT_EQ(o.virtual_clock_state_file, "/tmp/node1.clock");
  s.flags["virtual_clock.drift_ppm"] = "3";
  EXPECT_FALSE(Load(s, &o, &error));
  EXPECT_NE(error.find("exclude each other"), std::string::npos) << error;
}

TEST_F(CollectorOptionsTest, ClockPageFollowsTheNodeId) {
  OptionSources s;
  s.read_environment = false;
  s.flags["node_id"] = "7";
  CollectorOptions o;
  std::string error;
  ASSERT_TRUE(Load(s, &o, &error)) << error;
  EXPECT_EQ(o.clock_page, "/dev/shm/chronolink-7");
  s.flags["clock_page"] = "none";
  ASSERT_TRUE(Load(s, &o, &error)) << error;
  EXPECT_TRUE(o.clock_page.empty());
  s.flags.erase("node_id");
  s.flags["clock_page"] = "auto";
  EXPECT_FALSE(Load(s, &o, &error));
  EXPECT_NE(error.find("--node-id"), std::string::npos) << error;
}

}  // namespace
}  // namespace chronolink::collector
