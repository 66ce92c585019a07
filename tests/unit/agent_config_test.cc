// Tests of the agent configuration: precedence (defaults < file < env <
// flags), strict file parsing, cluster file validation, whole-config
// validation, test-only options, and the deploy/ examples.
#include "agent/config/agent_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/etcd_tls_pki.h"

extern char** environ;

namespace chronolink {
namespace {

namespace fs = std::filesystem;

#define EXPECT_CONTAINS(hay, needle)                                           \
  EXPECT_NE(std::string(hay).find(needle), std::string::npos)                  \
      << "expected \"" << (needle) << "\" in: " << (hay)

constexpr char kKeyHex[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
constexpr char kOtherKeyHex[] = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

constexpr char kCluster3[] = R"({
  "cluster_id": 7,
  "nodes": [
    {"id": 1, "address": "10.0.0.1", "port": 7319},
    {"id": 2, "address": "10.0.0.2", "port": 7400},
    {"id": 3, "address": "10.0.0.3"}
  ]
})";

// The repository root, absolute: tests change the working directory, and
// __FILE__ is relative in a ccache build.
fs::path SourceRoot() { return fs::path(CHRONOLINK_SOURCE_DIR); }

std::string ReadFileForTest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

ClusterKey KeyFromHex(const char* hex) {
  ClusterKey key{};
  std::string error;
  EXPECT_TRUE(ParseClusterKeyHex(hex, &key, &error)) << error;
  return key;
}

struct Result {
  std::optional<AgentConfig> config;
  std::string error;
  int exit_code = -1;
};

class AgentConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agent_config_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = fs::path(tmpl);
    old_cwd_ = fs::current_path();
    // Hide any CHRONOLINK_* variables of the surrounding environment.
    std::vector<std::string> names;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry(*e);
      if (entry.rfind("CHRONOLINK_", 0) == 0) names.push_back(entry.substr(0, entry.find('=')));
    }
    for (const std::string& n : names) {
      saved_env_[n] = getenv(n.c_str());
      unsetenv(n.c_str());
    }
  }

  void TearDown() override {
    fs::current_path(old_cwd_);
    for (const std::string& n : set_env_) unsetenv(n.c_str());
    for (const auto& [n, v] : saved_env_) setenv(n.c_str(), v.c_str(), 1);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void SetEnv(const std::string& name, const std::string& value) {
    setenv(name.c_str(), value.c_str(), 1);
    set_env_.push_back(name);
  }

  std::string Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }

  // A key file as the agent wants it: readable by its owner only.
  std::string WriteKey(const std::string& name, const std::string& text, fs::perms mode = fs::perms::owner_read |
                                                                                        fs::perms::owner_write) {
    const std::string path = Write(name, text);
    fs::permissions(path, mode);
    return path;
  }

  std::string Cluster() { return Write("cluster.json", kCluster3); }

  Result Load(std::vector<std::string> args) {
    args.insert(args.begin(), "chronolink-agent");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    Result r;
    r.config = LoadAgentConfig(static_cast<int>(argv.size()), argv.data(), &r.error, &r.exit_code);
    return r;
  }

  // Minimal valid flags plus extra ones.
  Result LoadMinimal(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--node-id", "1", "--cluster-file", Cluster(), "--key-hex", kKeyHex};
    args.insert(args.end(), extra.begin(), extra.end());
    return Load(args);
  }

  // Expects failure with exit code 2 and every fragment in the message.
  void ExpectError(const Result& r, std::vector<std::string> fragments) {
    EXPECT_FALSE(r.config.has_value());
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.error.find('\n'), std::string::npos) << "not one paragraph: " << r.error;
    for (const std::string& f : fragments) EXPECT_CONTAINS(r.error, f);
  }

  fs::path dir_;
  fs::path old_cwd_;
  std::vector<std::string> set_env_;
  std::map<std::string, std::string> saved_env_;
};

// ---------------------------------------------------------------------------
// Defaults and precedence.

TEST_F(AgentConfigTest, DefaultsWithMinimalFlags) {
  Result r = LoadMinimal();
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.exit_code, 0);
  const AgentConfig& c = *r.config;
  EXPECT_EQ(c.node_id, 1u);
  EXPECT_EQ(c.cluster.cluster_id, 7u);
  ASSERT_EQ(c.cluster.nodes.size(), 3u);
  EXPECT_EQ(c.cluster.nodes[2].port, 7319);  // default port
  EXPECT_EQ(c.peers, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(c.listen_address, "10.0.0.1");
  EXPECT_EQ(c.listen_port, 7319);
  EXPECT_EQ(c.key, KeyFromHex(kKeyHex));
  EXPECT_TRUE(c.key_file_path.empty());
  EXPECT_EQ(c.output_dir, ".");
  EXPECT_EQ(c.log_level, "info");
  EXPECT_FALSE(c.duration_ns.has_value());
  EXPECT_EQ(c.probe.spacing_ns, 0);
  EXPECT_EQ(c.probe.interval_ns, 50'000'000);
  EXPECT_TRUE(c.probe.adaptive);
  EXPECT_EQ(c.probe.fastest_interval_ns, 6'250'000);
  EXPECT_EQ(c.probe.target_pure_points, 16);
  EXPECT_EQ(c.probe.target_uncertainty_ns, 0);
  EXPECT_DOUBLE_EQ(c.probe.jitter_fraction, 0.2);
  EXPECT_EQ(c.probe.tuple_timeout_ns, 500'000'000);
  EXPECT_EQ(c.probe.followup_delay_ns, 125'000'000);
  EXPECT_EQ(c.probe.max_pending_tuples, 4096u);
  EXPECT_EQ(c.estimation.window_ns, 2'000'000'000);
  EXPECT_TRUE(c.estimation.AdaptiveFitSpan());
  EXPECT_EQ(c.estimation.MinFitSpan(), 4'000'000'000) << "two windows";
  EXPECT_EQ(c.estimation.FitSpan(), 6'000'000'000) << "three windows at the longest";
  EXPECT_EQ(c.estimation.window_grace_ns, 300'000'000);
  EXPECT_EQ(c.estimation.purity_tolerance_ns, 300);
  EXPECT_EQ(c.estimation.min_points_per_side, 8);
  EXPECT_TRUE(c.estimation.fit_every_probe);
  EXPECT_TRUE(c.estimation.fit_peer_probes) << "an edge's fit takes the link's probes";
  EXPECT_EQ(c.estimation.source_classes, (std::vector<SourceClass>{SourceClass::kKernel}));
  EXPECT_FALSE(c.test_mode);
  EXPECT_TRUE(c.virtual_clock.IsIdentity());
  EXPECT_FALSE(c.virtual_t0_defaulted);
  EXPECT_TRUE(c.config_file_path.empty());
  EXPECT_EQ(c.run_as_user, "nobody");
  EXPECT_EQ(c.run_as_group, "");
  EXPECT_FALSE(c.run_as_user_explicit);
  EXPECT_FALSE(c.run_as_group_explicit);
  // The one warning: the key came from --key-hex.
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_CONTAINS(c.warnings[0], "--key-hex");
}

TEST_F(AgentConfigTest, ListenAndPortDefaultToOwnClusterEntry) {
  Result r = Load({"--node-id", "2", "--cluster-file", Cluster(), "--key-hex", kKeyHex});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->listen_address, "10.0.0.2");
  EXPECT_EQ(r.config->listen_port, 7400);
  EXPECT_EQ(r.config->peers, (std::vector<uint32_t>{1, 3}));

  r = LoadMinimal({"--listen", "::", "--port", "9000"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->listen_address, "::");
  EXPECT_EQ(r.config->listen_port, 9000);
}

TEST_F(AgentConfigTest, FileOnly) {
  Cluster();
  WriteKey("key.hex", std::string(kKeyHex) + "\n");
  std::string cfg = Write("agent.json", R"({
    "node_id": 3, "cluster_file": "cluster.json", "listen": "10.0.0.3", "port": 7500,
    "key_file": "key.hex", "output_dir": "out", "peers": [1], "log_level": "debug",
    "duration_s": 1.5,
    "probe": {"interval_us": 2000, "spacing_us": 50, "jitter": 0.1, "tuple_timeout_ms": 400,
              "followup_delay_ms": 10, "max_pending_tuples": 100},
    "estimation": {"window_s": 0.5, "window_grace_ms": 100, "purity_tolerance_ns": 200,
                   "min_points": 4, "sources": ["userspace", "kernel"]},
    "test_mode": false
  })");
  Result r = Load({"--config", cfg});
  ASSERT_TRUE(r.config) << r.error;
  const AgentConfig& c = *r.config;
  EXPECT_EQ(c.config_file_path, cfg);
  EXPECT_EQ(c.node_id, 3u);
  EXPECT_EQ(c.cluster_file_path, (dir_ / "cluster.json").string());
  EXPECT_EQ(c.listen_address, "10.0.0.3");
  EXPECT_EQ(c.listen_port, 7500);
  EXPECT_EQ(c.key_file_path, (dir_ / "key.hex").string());
  EXPECT_EQ(c.key, KeyFromHex(kKeyHex));
  EXPECT_EQ(c.output_dir, (dir_ / "out").string());
  EXPECT_EQ(c.peers, (std::vector<uint32_t>{1}));
  EXPECT_EQ(c.log_level, "debug");
  ASSERT_TRUE(c.duration_ns.has_value());
  EXPECT_EQ(*c.duration_ns, 1'500'000'000);
  EXPECT_EQ(c.probe.interval_ns, 2'000'000);
  EXPECT_EQ(c.probe.spacing_ns, 50'000);
  EXPECT_DOUBLE_EQ(c.probe.jitter_fraction, 0.1);
  EXPECT_EQ(c.probe.tuple_timeout_ns, 400'000'000);
  EXPECT_EQ(c.probe.followup_delay_ns, 10'000'000);
  EXPECT_EQ(c.probe.max_pending_tuples, 100u);
  EXPECT_EQ(c.estimation.window_ns, 500'000'000);
  EXPECT_EQ(c.estimation.window_grace_ns, 100'000'000);
  EXPECT_EQ(c.estimation.purity_tolerance_ns, 200);
  EXPECT_EQ(c.estimation.min_points_per_side, 4);
  EXPECT_EQ(c.estimation.source_classes,
            (std::vector<SourceClass>{SourceClass::kUserspace, SourceClass::kKernel}));
}

TEST_F(AgentConfigTest, ConfigFileFromEnvironment) {
  Cluster();
  std::string cfg = Write("agent.json", std::string(R"({"node_id": 2, "cluster_file": "cluster.json", "key_hex": ")") +
                                            kKeyHex + R"("})");
  SetEnv("CHRONOLINK_CONFIG", cfg);
  Result r = Load({});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->node_id, 2u);
  EXPECT_EQ(r.config->config_file_path, cfg);
}

TEST_F(AgentConfigTest, EnvOverridesFile) {
  Cluster();
  std::string cfg = Write("agent.json", std::string(R"({"node_id": 1, "cluster_file": "cluster.json",
      "key_hex": ")") + kKeyHex + R"(", "peers": [2, 3], "log_level": "warn",
      "probe": {"interval_us": 2000}, "estimation": {"window_s": 3}})");
  SetEnv("CHRONOLINK_NODE_ID", "2");
  SetEnv("CHRONOLINK_PEERS", "3");
  SetEnv("CHRONOLINK_PROBE_INTERVAL_US", "3000");
  SetEnv("CHRONOLINK_WINDOW_S", "1.25");
  SetEnv("CHRONOLINK_DURATION_S", "60");
  Result r = Load({"--config", cfg});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->node_id, 2u);
  EXPECT_EQ(r.config->peers, (std::vector<uint32_t>{3}));
  EXPECT_EQ(r.config->probe.interval_ns, 3'000'000);
  EXPECT_EQ(r.config->estimation.window_ns, 1'250'000'000);
  EXPECT_EQ(r.config->log_level, "warn");  // from the file, no env
  ASSERT_TRUE(r.config->duration_ns.has_value());
  EXPECT_EQ(*r.config->duration_ns, 60'000'000'000);
}

TEST_F(AgentConfigTest, FlagOverridesEnv) {
  SetEnv("CHRONOLINK_PROBE_INTERVAL_US", "3000");
  SetEnv("CHRONOLINK_LOG_LEVEL", "error");
  SetEnv("CHRONOLINK_PORT", "8000");
  SetEnv("CHRONOLINK_ESTIMATE_SOURCES", "userspace");
  Result r = LoadMinimal({"--probe-interval-us", "4000", "--log-level", "trace",
                          "--estimate-sources", "kernel,userspace"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->probe.interval_ns, 4'000'000);
  EXPECT_EQ(r.config->log_level, "trace");
  EXPECT_EQ(r.config->listen_port, 8000);  // env, no flag
  EXPECT_EQ(r.config->estimation.source_classes,
            (std::vector<SourceClass>{SourceClass::kKernel, SourceClass::kUserspace}));
}

TEST_F(AgentConfigTest, EmptyEnvironmentValueIsUnset) {
  SetEnv("CHRONOLINK_PORT", "");
  Result r = LoadMinimal();
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->listen_port, 7319);
}

TEST_F(AgentConfigTest, BadNumberInEnvNamesTheVariable) {
  SetEnv("CHRONOLINK_PORT", "73x9");
  ExpectError(LoadMinimal(), {"CHRONOLINK_PORT", "73x9", "integer"});
}

TEST_F(AgentConfigTest, BadValuesInEnvNameTheVariable) {
  SetEnv("CHRONOLINK_WINDOW_S", "two");
  ExpectError(LoadMinimal(), {"CHRONOLINK_WINDOW_S", "two"});
  unsetenv("CHRONOLINK_WINDOW_S");
  SetEnv("CHRONOLINK_VIRTUAL_DRIFT_PPM", "nan");
  ExpectError(LoadMinimal({"--test-mode"}), {"CHRONOLINK_VIRTUAL_DRIFT_PPM"});
  unsetenv("CHRONOLINK_VIRTUAL_DRIFT_PPM");
  SetEnv("CHRONOLINK_TEST_MODE", "maybe");
  ExpectError(LoadMinimal(), {"CHRONOLINK_TEST_MODE", "boolean"});
}

TEST_F(AgentConfigTest, BadFlagValueNamesTheFlag) {
  ExpectError(LoadMinimal({"--probe-jitter", "lots"}), {"--probe-jitter", "lots"});
  ExpectError(LoadMinimal({"--peers", "2,x"}), {"--peers", "'x'"});
  ExpectError(LoadMinimal({"--port", "70000"}), {"--port", "65535"});
  ExpectError(LoadMinimal({"--log-level", "verbose"}), {"--log-level", "verbose"});
  ExpectError(LoadMinimal({"--listen", "localhost"}), {"--listen", "localhost", "literal"});
  ExpectError(LoadMinimal({"--estimate-sources", "kernel,nic"}), {"--estimate-sources", "nic"});
}

TEST_F(AgentConfigTest, RepeatedFlagLastWins) {
  Result r = LoadMinimal({"--probe-interval-us", "2000", "--probe-interval-us", "3000", "--test-mode",
                          "--test-mode=false"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->probe.interval_ns, 3'000'000);
  EXPECT_FALSE(r.config->test_mode);
}

TEST_F(AgentConfigTest, UnknownFlagIsAnError) {
  ExpectError(LoadMinimal({"--probe-intervall-us", "5"}), {"--probe-intervall-us"});
  ExpectError(LoadMinimal({"stray"}), {"stray"});
}

TEST_F(AgentConfigTest, TypoInEnvironmentNameWarns) {
  SetEnv("CHRONOLINK_PROBE_INTERVALL_US", "5");
  SetEnv("CHRONOLINK_SOMETHING_ELSE_ENTIRELY", "1");  // another component's; no warning
  Result r = LoadMinimal();
  ASSERT_TRUE(r.config) << r.error;
  ASSERT_EQ(r.config->warnings.size(), 2u);  // and the one about --key-hex
  EXPECT_CONTAINS(r.config->warnings[0], "CHRONOLINK_PROBE_INTERVALL_US");
  EXPECT_CONTAINS(r.config->warnings[0], "CHRONOLINK_PROBE_INTERVAL_US");
}

TEST_F(AgentConfigTest, FractionalUnits) {
  Result r = LoadMinimal({"--probe-spacing-us", "12.5", "--probe-interval-us", "25.5", "--window-s", "0.25",
                          "--window-grace-ms", "0.5", "--purity-tolerance-ns", "100", "--duration-s", "0.001"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->probe.spacing_ns, 12'500);
  EXPECT_EQ(r.config->probe.interval_ns, 25'500);
  EXPECT_EQ(r.config->estimation.window_ns, 250'000'000);
  EXPECT_EQ(r.config->estimation.window_grace_ns, 500'000);
  EXPECT_EQ(*r.config->duration_ns, 1'000'000);
  EXPECT_EQ(r.config->probe.pilot_lead_ns, 0) << "the default lead: in the pair's own sendmmsg";
}

TEST_F(AgentConfigTest, PilotGoesWithLongIntervalsByDefaultAndCanBeTunedOrForced) {
  // auto: on at the default 50 ms, off at one pair per ms, on from 2 ms.
  Result r = LoadMinimal({});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_TRUE(r.config->probe.pilot);
  EXPECT_EQ(r.config->probe.pilot_lead_ns, 0);
  r = LoadMinimal({"--probe-interval-us", "1000"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_FALSE(r.config->probe.pilot);
  r = LoadMinimal({"--probe-interval-us", "1999"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_FALSE(r.config->probe.pilot);
  r = LoadMinimal({"--probe-interval-us", "2000"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_TRUE(r.config->probe.pilot);

  r = LoadMinimal({"--probe-pilot", "on"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_TRUE(r.config->probe.pilot);
  r = LoadMinimal({"--probe-pilot", "off", "--probe-interval-us", "10000"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_FALSE(r.config->probe.pilot);

  r = LoadMinimal({"--probe-pilot-lead-us", "0"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->probe.pilot_lead_ns, 0);

  ExpectError(LoadMinimal({"--probe-pilot", "maybe"}), {"pilot mode 'maybe'", "--probe-pilot", "auto, on or off"});
  // The reverse pair's pilot: on by default where pilots go, never without them.
  r = LoadMinimal({});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_TRUE(r.config->probe.reverse_pilot);
  r = LoadMinimal({"--probe-reverse-pilot", "off"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_FALSE(r.config->probe.reverse_pilot);
  r = LoadMinimal({"--probe-pilot", "off", "--probe-reverse-pilot", "on"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_FALSE(r.config->probe.reverse_pilot);
  ExpectError(LoadMinimal({"--probe-reverse-pilot", "auto"}),
              {"reverse pilot mode 'auto'", "--probe-reverse-pilot", "on or off"});
  // Set explicitly, a lead must fit the interval: a quarter of 1 ms at most.
  ExpectError(LoadMinimal({"--probe-pilot-lead-us", "251", "--probe-interval-us", "1000"}),
              {"pilot lead 251 us", "--probe-pilot-lead-us", "quarter of the probe interval 1000 us"});
  ExpectError(LoadMinimal({"--probe-pilot-lead-us", "-1"}), {"--probe-pilot-lead-us"});
}

// ---------------------------------------------------------------------------
// Config file strictness.

TEST_F(AgentConfigTest, UnknownKeyInFileIsNamed) {
  Cluster();
  std::string cfg = Write("a.json", R"({"node_id": 1, "probe": {"intervall_us": 5}})");
  ExpectError(Load({"--config", cfg}), {"unknown key 'probe.intervall_us'", "did you mean 'probe.interval_us'", cfg});

  cfg = Write("b.json", R"({"node_id": 1, "interval_us": 5})");
  ExpectError(Load({"--config", cfg}), {"unknown key 'interval_us'", "did you mean 'probe.interval_us'"});

  cfg = Write("c.json", R"({"node_id": 1, "probe.interval_us": 5})");
  ExpectError(Load({"--config", cfg}), {"unknown key 'probe.interval_us'"});

  cfg = Write("d.json", R"({"node_id": 1, "colour": "blue"})");
  ExpectError(Load({"--config", cfg}), {"unknown key 'colour'"});
}

TEST_F(AgentConfigTest, BadJsonReportsTheParseError) {
  std::string cfg = Write("a.json", R"({"node_id": 1,, })");
  Result r = Load({"--config", cfg});
  ExpectError(r, {"invalid JSON", "parse error", "line 1", cfg});
}

TEST_F(AgentConfigTest, WrongTypesInFile) {
  Cluster();
  std::string cfg = Write("a.json", R"({"port": "7319"})");
  ExpectError(Load({"--config", cfg}), {"\"port\"", "integer"});
  cfg = Write("b.json", R"({"probe": 5})");
  ExpectError(Load({"--config", cfg}), {"\"probe\"", "object"});
  cfg = Write("c.json", R"({"peers": "2,3"})");
  ExpectError(Load({"--config", cfg}), {"\"peers\"", "array"});
  cfg = Write("d.json", R"({"test_mode": 1})");
  ExpectError(Load({"--config", cfg}), {"\"test_mode\"", "true or false"});
  cfg = Write("e.json", R"([1, 2])");
  ExpectError(Load({"--config", cfg}), {"object"});
}

TEST_F(AgentConfigTest, DuplicateKeyInFileIsAnError) {
  std::string cfg = Write("a.json", R"({"node_id": 1, "node_id": 2})");
  ExpectError(Load({"--config", cfg}), {"'node_id' appears twice"});
}

TEST_F(AgentConfigTest, NullInFileMeansNotSet) {
  Cluster();
  std::string cfg = Write("a.json", std::string(R"({"node_id": 1, "cluster_file": "cluster.json", "key_hex": ")") +
                                        kKeyHex + R"(", "duration_s": null, "probe": null})");
  Result r = Load({"--config", cfg});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_FALSE(r.config->duration_ns.has_value());
}

TEST_F(AgentConfigTest, MissingConfigFile) {
  ExpectError(Load({"--config", (dir_ / "nope.json").string()}), {"config file", "cannot open", "nope.json"});
}

// ---------------------------------------------------------------------------
// Cluster file.

TEST_F(AgentConfigTest, MissingClusterFile) {
  ExpectError(Load({"--node-id", "1", "--cluster-file", (dir_ / "none.json").string(), "--key-hex", kKeyHex}),
              {"none.json", "cannot open", "--cluster-file"});
  ExpectError(Load({"--node-id", "1", "--key-hex", kKeyHex}), {"no cluster file", "--cluster-file"});
}

TEST_F(AgentConfigTest, ClusterValidationErrors) {
  struct Case {
    const char* json;
    std::vector<std::string> fragments;
  };
  const Case cases[] = {
      {R"({"nodes": [{"id": 1, "address": "10.0.0.1"}]})", {"'cluster_id' is missing"}},
      {R"({"cluster_id": -1, "nodes": [{"id": 1, "address": "10.0.0.1"}]})", {"cluster_id"}},
      {R"({"cluster_id": 4294967296, "nodes": [{"id": 1, "address": "10.0.0.1"}]})", {"cluster_id"}},
      {R"({"cluster_id": 1, "nodes": []})", {"'nodes' is empty"}},
      {R"({"cluster_id": 1})", {"'nodes' is missing"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "10.0.0.1"}, {"id": 1, "address": "10.0.0.2"}]})",
       {"nodes[1]", "node id 1 is listed twice"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 0, "address": "10.0.0.1"}]})", {"nodes[0]", "'id'"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "10.0.0.300"}]})",
       {"nodes[0] (id 1)", "10.0.0.300", "not an IPv4 or IPv6"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "node1.example"}]})", {"node1.example"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1}]})", {"'address' is missing"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "10.0.0.1", "port": 0}]})", {"'port'", "1..65535"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "10.0.0.1", "port": 65536}]})", {"'port'"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "::1"}, {"id": 2, "address": "0::1", "port": 7319}]})",
       {"nodes[1] (id 2)", "already used"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "10.0.0.1", "host": "a"}]})", {"unknown key 'host'"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "10.0.0.1"}], "extra": 1})", {"unknown key 'extra'"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "10.0.0.1", "hostname": ""}]})", {"'hostname'"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "10.0.0.1", "hostname": 7}]})", {"'hostname'"}},
      {R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "10.0.0.1"}])", {"invalid JSON"}},
      // A number beyond a double: nlohmann throws out_of_range, not parse_error (found by cluster_file_fuzz).
      {R"({"cluster_id": 1e400, "nodes": [{"id": 1, "address": "10.0.0.1"}]})", {"invalid JSON", "1e400"}},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.json);
    std::string path = Write("cluster.json", tc.json);
    ClusterFile cf;
    std::string error;
    EXPECT_FALSE(LoadClusterFile(path, &cf, &error));
    for (const std::string& f : tc.fragments) EXPECT_CONTAINS(error, f);
    EXPECT_CONTAINS(error, path);
    // The same problem surfaces through LoadAgentConfig.
    Result r = Load({"--node-id", "1", "--cluster-file", path, "--key-hex", kKeyHex});
    ExpectError(r, tc.fragments);
  }
}

TEST_F(AgentConfigTest, ClusterFileAcceptsSamePortOnDifferentAddresses) {
  std::string path = Write("cluster.json", R"({"cluster_id": 0, "nodes": [
      {"id": 5, "address": "::1", "port": 7319}, {"id": 9, "address": "::1", "port": 7320},
      {"id": 6, "address": "127.0.0.1", "port": 7319}]})");
  ClusterFile cf;
  std::string error;
  ASSERT_TRUE(LoadClusterFile(path, &cf, &error)) << error;
  EXPECT_EQ(cf.cluster_id, 0u);
  ASSERT_NE(cf.Find(9), nullptr);
  EXPECT_EQ(cf.Find(9)->port, 7320);
  EXPECT_EQ(cf.Find(9)->address, "::1");
  EXPECT_EQ(cf.Find(4), nullptr);
}

TEST_F(AgentConfigTest, ClusterFileNamesTheHostOfANode) {
  std::string path = Write("cluster.json", R"({"cluster_id": 1, "nodes": [
      {"id": 1, "address": "10.0.0.1", "hostname": "gpu-a"}, {"id": 2, "address": "10.0.0.2"}]})");
  ClusterFile cf;
  std::string error;
  ASSERT_TRUE(LoadClusterFile(path, &cf, &error)) << error;
  EXPECT_EQ(cf.Find(1)->hostname, "gpu-a");
  EXPECT_EQ(cf.Find(2)->hostname, "");
}

TEST_F(AgentConfigTest, NodeIdMustBeInCluster) {
  ExpectError(Load({"--node-id", "9", "--cluster-file", Cluster(), "--key-hex", kKeyHex}),
              {"node id 9", "--node-id", "not in cluster file", "ids: 1, 2, 3"});
  ExpectError(Load({"--cluster-file", Cluster(), "--key-hex", kKeyHex}), {"no node id"});
  ExpectError(Load({"--node-id", "0", "--cluster-file", Cluster(), "--key-hex", kKeyHex}),
              {"--node-id", "out of range"});
}

// ---------------------------------------------------------------------------
// Key.

TEST_F(AgentConfigTest, KeyBothNeitherBad) {
  std::string key_file = WriteKey("key.hex", kKeyHex);
  ExpectError(LoadMinimal({"--key-file", key_file}), {"--key-file", "--key-hex", "exactly one"});
  ExpectError(Load({"--node-id", "1", "--cluster-file", Cluster()}), {"no cluster key", "--key-file", "authenticated"});
  ExpectError(Load({"--node-id", "1", "--cluster-file", Cluster(), "--key-hex", "abcd"}),
              {"--key-hex", "64 hex"});
  ExpectError(Load({"--node-id", "1", "--cluster-file", Cluster(), "--key-hex", std::string(64, 'g')}),
              {"--key-hex", "non-hex"});
  std::string bad_file = WriteKey("bad.key", "not a key");
  ExpectError(Load({"--node-id", "1", "--cluster-file", Cluster(), "--key-file", bad_file}),
              {"bad.key", "--key-file"});
  ExpectError(Load({"--node-id", "1", "--cluster-file", Cluster(), "--key-file", (dir_ / "missing.key").string()}),
              {"missing.key", "cannot open"});

  // Both in one file, or both in the environment: ambiguous.
  std::string cfg = Write("a.json", std::string(R"({"key_file": "key.hex", "key_hex": ")") + kKeyHex + "\"}");
  ExpectError(Load({"--config", cfg}), {"both", "key_file", "key_hex"});
  SetEnv("CHRONOLINK_KEY_FILE", key_file);
  SetEnv("CHRONOLINK_KEY_HEX", kKeyHex);
  ExpectError(Load({"--node-id", "1", "--cluster-file", Cluster()}), {"CHRONOLINK_KEY_FILE", "CHRONOLINK_KEY_HEX"});
}

TEST_F(AgentConfigTest, KeyFromHigherLayerReplacesEitherSpelling) {
  Cluster();
  WriteKey("key.hex", kKeyHex);
  std::string cfg = Write("a.json", R"({"node_id": 1, "cluster_file": "cluster.json", "key_file": "key.hex"})");
  Result r = Load({"--config", cfg, "--key-hex", kOtherKeyHex});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->key, KeyFromHex(kOtherKeyHex));
  EXPECT_TRUE(r.config->key_file_path.empty());

  SetEnv("CHRONOLINK_KEY_HEX", kOtherKeyHex);
  r = Load({"--config", cfg});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->key, KeyFromHex(kOtherKeyHex));

  r = Load({"--config", cfg, "--key-file", (dir_ / "key.hex").string()});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->key, KeyFromHex(kKeyHex));
}

// A key file others could read, or owned by another user, is refused with
// the fix in the message (exit 2, before anything starts).
TEST_F(AgentConfigTest, KeyFileReadableByOthersIsRefused) {
  const std::string loose = WriteKey("loose.key", kKeyHex, fs::perms::owner_read | fs::perms::owner_write |
                                                               fs::perms::group_read | fs::perms::others_read);
  ExpectError(Load({"--node-id", "1", "--cluster-file", Cluster(), "--key-file", loose}),
              {"loose.key", "its group (mode 0644)", "chmod 600", "--key-file"});
  const std::string tight = WriteKey("tight.key", kKeyHex, fs::perms::owner_read);
  Result r = Load({"--node-id", "1", "--cluster-file", Cluster(), "--key-file", tight});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->key, KeyFromHex(kKeyHex));
}

// --key-hex and CHRONOLINK_KEY_HEX put the key where others can see it:
// one warning each that says so and names the production way; a key file
// (or a key in the config file) gets none.
TEST_F(AgentConfigTest, KeyInArgvOrEnvironmentWarnsOnce) {
  auto key_warnings = [](const Result& r) {
    std::vector<std::string> out;
    for (const std::string& w : r.config->warnings) {
      if (w.find("cluster key") != std::string::npos) out.push_back(w);
    }
    return out;
  };
  Result r = LoadMinimal();
  ASSERT_TRUE(r.config) << r.error;
  auto w = key_warnings(r);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_CONTAINS(w[0], "--key-hex");
  EXPECT_CONTAINS(w[0], "process list");
  EXPECT_CONTAINS(w[0], "--key-file");

  SetEnv("CHRONOLINK_KEY_HEX", kKeyHex);
  r = Load({"--node-id", "1", "--cluster-file", Cluster()});
  ASSERT_TRUE(r.config) << r.error;
  w = key_warnings(r);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_CONTAINS(w[0], "CHRONOLINK_KEY_HEX");
  EXPECT_CONTAINS(w[0], "/proc/<pid>/environ");
  EXPECT_CONTAINS(w[0], "--key-file");
  unsetenv("CHRONOLINK_KEY_HEX");

  r = Load({"--node-id", "1", "--cluster-file", Cluster(), "--key-file", WriteKey("k.key", kKeyHex)});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_TRUE(key_warnings(r).empty());
  const std::string cfg = Write("with-key.json", std::string(R"({"node_id": 1, "cluster_file": "cluster.json", "key_hex": ")") +
                                                     kKeyHex + R"("})");
  r = Load({"--config", cfg});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_TRUE(key_warnings(r).empty());
}

// ---------------------------------------------------------------------------
// The user to become.

TEST_F(AgentConfigTest, UserAndGroupFromEverySource) {
  Result r = LoadMinimal({"--user", "daemon", "--group", "adm"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->run_as_user, "daemon");
  EXPECT_EQ(r.config->run_as_group, "adm");
  EXPECT_TRUE(r.config->run_as_user_explicit);
  EXPECT_TRUE(r.config->run_as_group_explicit);
  // An explicit user is part of the effective configuration; the default is not.
  EXPECT_CONTAINS(EffectiveConfigJson(*r.config), R"("user": "daemon")");
  EXPECT_EQ(EffectiveConfigJson(*LoadMinimal().config).find(R"("user")"), std::string::npos);

  SetEnv("CHRONOLINK_USER", "65534");
  r = LoadMinimal();
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->run_as_user, "65534");
  EXPECT_TRUE(r.config->run_as_user_explicit);
  EXPECT_FALSE(r.config->run_as_group_explicit);
  unsetenv("CHRONOLINK_USER");

  Cluster();
  const std::string cfg = Write("u.json", std::string(R"({"node_id": 1, "cluster_file": "cluster.json", "key_hex": ")") +
                                              kKeyHex + R"(", "user": "chronolink", "group": "chronolink"})");
  r = Load({"--config", cfg});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->run_as_user, "chronolink");
  EXPECT_EQ(r.config->run_as_group, "chronolink");
}

TEST_F(AgentConfigTest, RootIsNotAUserToRunAs) {
  ExpectError(LoadMinimal({"--user", "root"}), {"--user", "never keeps uid 0"});
  ExpectError(LoadMinimal({"--group", "root"}), {"--group", "never keeps gid 0"});
  ExpectError(LoadMinimal({"--group", "0"}), {"--group", "never keeps gid 0"});
  ExpectError(LoadMinimal({"--user", "0"}), {"--user", "never keeps uid 0"});
  ExpectError(LoadMinimal({"--user", ""}), {"--user", "must not be empty"});
}

// ---------------------------------------------------------------------------
// Peers.

TEST_F(AgentConfigTest, PeersValidation) {
  ExpectError(LoadMinimal({"--peers", "2,9"}), {"peer 9", "not in cluster"});
  ExpectError(LoadMinimal({"--peers", "1,2"}), {"peer 1", "this node itself"});
  ExpectError(LoadMinimal({"--peers", "2,2"}), {"peer 2", "twice"});
  SetEnv("CHRONOLINK_PEERS", "7");
  ExpectError(LoadMinimal(), {"peer 7", "CHRONOLINK_PEERS"});
  unsetenv("CHRONOLINK_PEERS");

  Result r = LoadMinimal({"--peers", "3"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->peers, (std::vector<uint32_t>{3}));
  r = LoadMinimal({"--peers", ""});  // empty: every other node
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->peers, (std::vector<uint32_t>{2, 3}));
}

TEST_F(AgentConfigTest, PeersMustShareTheListenFamily) {
  std::string path = Write("mixed.json", R"({"cluster_id": 1, "nodes": [
      {"id": 1, "address": "10.0.0.1"}, {"id": 2, "address": "10.0.0.2"}, {"id": 3, "address": "fd00::3"}]})");
  ExpectError(Load({"--node-id", "1", "--cluster-file", path, "--key-hex", kKeyHex}),
              {"peer 3", "fd00::3", "10.0.0.1", "other IP family"});
  ExpectError(Load({"--node-id", "3", "--cluster-file", path, "--key-hex", kKeyHex, "--peers", "1"}),
              {"peer 1", "other IP family"});
  Result r = Load({"--node-id", "1", "--cluster-file", path, "--key-hex", kKeyHex, "--peers", "2"});
  ASSERT_TRUE(r.config) << r.error;
  r = Load({"--node-id", "1", "--cluster-file", path, "--key-hex", kKeyHex, "--listen", "::"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->peers, (std::vector<uint32_t>{2, 3}));
  ExpectError(Load({"--node-id", "1", "--cluster-file", path, "--key-hex", kKeyHex, "--listen", "::1"}),
              {"peer 2", "--listen"});
}

TEST_F(AgentConfigTest, SingleNodeClusterHasNoPeers) {
  std::string path = Write("one.json", R"({"cluster_id": 1, "nodes": [{"id": 1, "address": "10.0.0.1"}]})");
  ExpectError(Load({"--node-id", "1", "--cluster-file", path, "--key-hex", kKeyHex}), {"no peer to probe"});
}

// ---------------------------------------------------------------------------
// Test-only options.

TEST_F(AgentConfigTest, VirtualClockWithoutTestModeIsRefusedFromFlag) {
  ExpectError(LoadMinimal({"--virtual-offset-ns", "5000"}), {"test-only", "--test-mode", "--virtual-offset-ns"});
  ExpectError(LoadMinimal({"--virtual-drift-ppm", "0"}), {"test-only", "--virtual-drift-ppm"});
  ExpectError(LoadMinimal({"--virtual-t0-ns", "1"}), {"test-only", "--virtual-t0-ns"});
}

// The test bed's node clock (a state file) is test-only too, and replaces
// the linear virtual clock: both at once is a contradiction, said as one.
TEST_F(AgentConfigTest, TheTestbedClockStateIsTestOnlyAndExcludesTheLinearClock) {
  ExpectError(LoadMinimal({"--virtual-clock-state", "/run/x.clock"}), {"test-only", "--virtual-clock-state"});
  ExpectError(LoadMinimal({"--test-mode", "--virtual-clock-state", "/run/x.clock", "--virtual-drift-ppm", "3"}),
              {"replaces the linear virtual clock", "--virtual-drift-ppm", "--virtual-clock-state"});
  Result r = LoadMinimal({"--test-mode", "--virtual-clock-state", "/run/x.clock"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->virtual_clock_state_file, "/run/x.clock");
  EXPECT_TRUE(r.config->virtual_clock.IsIdentity());
}

TEST_F(AgentConfigTest, VirtualClockWithoutTestModeIsRefusedFromEnv) {
  SetEnv("CHRONOLINK_VIRTUAL_DRIFT_PPM", "12.5");
  ExpectError(LoadMinimal(), {"test-only", "--test-mode", "CHRONOLINK_VIRTUAL_DRIFT_PPM"});
  // Test mode switched off explicitly by env.
  SetEnv("CHRONOLINK_TEST_MODE", "0");
  ExpectError(LoadMinimal(), {"test-only"});
}

TEST_F(AgentConfigTest, VirtualClockWithoutTestModeIsRefusedFromFile) {
  Cluster();
  std::string base = std::string(R"("node_id": 1, "cluster_file": "cluster.json", "key_hex": ")") + kKeyHex + "\"";
  std::string cfg = Write("a.json", "{" + base + R"(, "virtual_clock": {"offset_ns": 1000}})");
  ExpectError(Load({"--config", cfg}), {"test-only", "--test-mode", "virtual_clock.offset_ns"});
  cfg = Write("b.json", "{" + base + R"(, "test_mode": false, "virtual_clock": {}})");
  ExpectError(Load({"--config", cfg}), {"test-only", "\"virtual_clock\""});
  // test_mode true in the file, overridden off by the environment.
  cfg = Write("c.json", "{" + base + R"(, "test_mode": true, "virtual_clock": {"offset_ns": 1000}})");
  SetEnv("CHRONOLINK_TEST_MODE", "false");
  ExpectError(Load({"--config", cfg}), {"test-only"});
  // ... and back on by the flag.
  Result r = Load({"--config", cfg, "--test-mode"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->virtual_clock.offset_ns, 1000);
}

TEST_F(AgentConfigTest, VirtualClockInTestMode) {
  Result r = LoadMinimal({"--test-mode", "--virtual-offset-ns", "-5000", "--virtual-drift-ppm", "12.5",
                          "--virtual-t0-ns", "1700000000000000000"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_TRUE(r.config->test_mode);
  EXPECT_EQ(r.config->virtual_clock.offset_ns, -5000);
  EXPECT_DOUBLE_EQ(r.config->virtual_clock.drift_ppm, 12.5);
  EXPECT_EQ(r.config->virtual_clock.t0_ns, 1'700'000'000'000'000'000);
  EXPECT_FALSE(r.config->virtual_t0_defaulted);

  r = LoadMinimal({"--test-mode", "--virtual-offset-ns=-7"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->virtual_clock.offset_ns, -7);

  SetEnv("CHRONOLINK_TEST_MODE", "1");
  SetEnv("CHRONOLINK_VIRTUAL_OFFSET_NS", "250000");
  SetEnv("CHRONOLINK_VIRTUAL_T0_NS", "42");
  r = LoadMinimal();
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->virtual_clock.offset_ns, 250000);
  EXPECT_EQ(r.config->virtual_clock.t0_ns, 42);

  ExpectError(LoadMinimal({"--virtual-drift-ppm", "200000"}), {"drift", "100000"});
}

TEST_F(AgentConfigTest, VirtualT0DefaultsToStartRealtime) {
  timespec before{}, after{};
  clock_gettime(CLOCK_REALTIME, &before);
  Result r = LoadMinimal({"--test-mode", "--virtual-drift-ppm", "50"});
  clock_gettime(CLOCK_REALTIME, &after);
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_TRUE(r.config->virtual_t0_defaulted);
  int64_t lo = before.tv_sec * 1'000'000'000LL + before.tv_nsec;
  int64_t hi = after.tv_sec * 1'000'000'000LL + after.tv_nsec;
  EXPECT_GE(r.config->virtual_clock.t0_ns, lo);
  EXPECT_LE(r.config->virtual_clock.t0_ns, hi);
}

// ---------------------------------------------------------------------------
// Probe and estimation ranges.

TEST_F(AgentConfigTest, IntervalVersusSpacing) {
  ExpectError(LoadMinimal({"--probe-spacing-us", "100", "--probe-interval-us", "150"}),
              {"probe interval 150 us", "--probe-interval-us", "twice the probe spacing 100 us", "--probe-spacing-us"});
  ExpectError(LoadMinimal({"--probe-spacing-us", "600", "--probe-interval-us", "1000"}),
              {"twice", "--probe-spacing-us"});
  Result r = LoadMinimal({"--probe-interval-us", "200"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->probe.spacing_ns, 0) << "pairs go back to back by default";
  EXPECT_EQ(r.config->probe.pilot_lead_ns, 0) << "and the pilot with them";
  ExpectError(LoadMinimal({"--probe-spacing-us", "0.5", "--purity-tolerance-ns", "100"}), {"0 (back to back) or at least 1 us"});
  ExpectError(LoadMinimal({"--purity-tolerance-ns", "100001"}), {"purity tolerance", "1 ns..100 us", "back to back"});
  ExpectError(LoadMinimal({"--probe-interval-us", "10000001", "--window-s", "200"}), {"at most 10 s"});
}

// Adaptive cadence: its range follows the interval unless given, and its
// bounds and targets are checked; the follow-up delay follows the interval.
TEST_F(AgentConfigTest, AdaptiveCadenceRangeAndTargets) {
  Result r = LoadMinimal({"--probe-interval-us", "4000"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->probe.fastest_interval_ns, 500'000);
  EXPECT_EQ(r.config->probe.followup_delay_ns, 10'000'000);
  r = LoadMinimal({"--probe-interval-us", "1000", "--probe-spacing-us", "100"});  // interval / 8 < twice the spacing
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->probe.fastest_interval_ns, 200'000);
  r = LoadMinimal({"--probe-adaptive", "off", "--probe-followup-delay-ms", "30"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_FALSE(r.config->probe.adaptive);
  EXPECT_EQ(r.config->probe.followup_delay_ns, 30'000'000);
  r = LoadMinimal({"--probe-min-interval-us", "5000", "--probe-target-pure-points", "40",
                   "--probe-target-uncertainty-ns", "900"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->probe.fastest_interval_ns, 5'000'000);
  EXPECT_EQ(r.config->probe.target_pure_points, 40);
  EXPECT_EQ(r.config->probe.target_uncertainty_ns, 900);
  ExpectError(LoadMinimal({"--probe-adaptive", "maybe"}), {"adaptive cadence 'maybe'", "--probe-adaptive", "on or off"});
  ExpectError(LoadMinimal({"--probe-min-interval-us", "150", "--probe-spacing-us", "100"}),
              {"fastest probe interval 150 us", "--probe-min-interval-us", "twice the probe spacing"});
  ExpectError(LoadMinimal({"--probe-min-interval-us", "60000"}), {"at most the probe interval 50000 us"});
  ExpectError(LoadMinimal({"--probe-target-pure-points", "4"}),
              {"4 pure points", "--probe-target-pure-points", "minimum points 8"});
  ExpectError(LoadMinimal({"--probe-target-uncertainty-ns", "-1"}), {"target uncertainty", "--probe-target-uncertainty-ns"});
}

// A solution is published about SolveLagNs after its instant T; the clock
// page keeps it until T + SolutionLifetimeNs. The next solve (one window
// later) must land well inside that, whatever the windows and fit spans:
// with five windows counted from T, a 1 s window's 6 s longest span left
// 0.7 s, and collectors saw their page lapse every window.
TEST_F(AgentConfigTest, ASolutionOutlivesTheNextSolveByFourWindows) {
  const std::vector<std::vector<std::string>> setups = {
      {}, {"--window-s", "1"}, {"--fit-span-max-s", "16"}, {"--window-s", "1", "--fit-span-s", "1"},
      {"--solve-delay-ms", "5000", "--window-grace-ms", "900"}};
  for (const auto& flags : setups) {
    const Result r = LoadMinimal(flags);
    ASSERT_TRUE(r.config.has_value()) << r.error;
    const EstimationSettings& e = r.config->estimation;
    const int64_t lag = SolveLagNs(*r.config);
    EXPECT_GE(lag, e.FitSpan() / 2 + e.window_grace_ns + r.config->cluster_settings.solve_delay_ns);
    const int64_t next_solve = e.window_ns + lag;
    EXPECT_GE(SolutionLifetimeNs(*r.config) - next_solve, 4 * e.window_ns) << ::testing::PrintToString(flags);
  }
  const Result defaults = LoadMinimal();
  ASSERT_TRUE(defaults.config.has_value());
  // 6 s longest span, 0.3 s grace, 1 s solve delay, then five 2 s windows.
  EXPECT_EQ(SolveLagNs(*defaults.config), 4'300'000'000);
  EXPECT_EQ(SolutionLifetimeNs(*defaults.config), 14'300'000'000);
}

TEST_F(AgentConfigTest, OtherRanges) {
  ExpectError(LoadMinimal({"--probe-jitter", "0.95"}), {"jitter", "0..0.9"});
  ExpectError(LoadMinimal({"--probe-jitter", "-0.1"}), {"jitter"});
  ExpectError(LoadMinimal({"--window-s", "0.05"}), {"window", "0.1 s"});
  ExpectError(LoadMinimal({"--probe-interval-us", "200000", "--window-s", "0.5"}), {"fit span 1 s", "10x the probe interval"});
  ExpectError(LoadMinimal({"--fit-span-s", "1"}), {"fit span 1 s", "--fit-span-s", "from the window 2 s"});
  ExpectError(LoadMinimal({"--fit-span-s", "17"}), {"fit span", "8 windows"});
  ExpectError(LoadMinimal({"--probe-interval-us", "300000", "--fit-span-s", "2.5"}), {"fit span 2.5 s", "10x the probe interval"});
  {
    const Result r = LoadMinimal({"--probe-interval-us", "300000", "--fit-span-s", "4"});
    ASSERT_TRUE(r.config.has_value()) << r.error;
    EXPECT_EQ(r.config->estimation.FitSpan(), 4'000'000'000);
    EXPECT_FALSE(r.config->estimation.AdaptiveFitSpan()) << "a span given is fixed";
  }
  ExpectError(LoadMinimal({"--fit-span-max-s", "3"}), {"longest fit span 3 s", "--fit-span-max-s", "2 windows"});
  ExpectError(LoadMinimal({"--fit-span-max-s", "17"}), {"longest fit span 17 s", "8 windows"});
  // The shortest chosen span must hold ten intervals too.
  ExpectError(LoadMinimal({"--probe-interval-us", "500000"}), {"fit span 4 s", "10x the probe interval"});
  {
    const Result r = LoadMinimal({"--fit-span-max-s", "8"});
    ASSERT_TRUE(r.config.has_value()) << r.error;
    EXPECT_EQ(r.config->estimation.FitSpan(), 8'000'000'000);
    EXPECT_EQ(r.config->estimation.MinFitSpan(), 4'000'000'000);
    EXPECT_EQ(r.config->estimation.FitSpans().longest_trailing_ns, 20'000'000'000);
  }
  // Spans reaching back: 20 s by default, from the longest centred span to 16 windows.
  {
    const Result r = LoadMinimal();
    ASSERT_TRUE(r.config.has_value()) << r.error;
    EXPECT_EQ(r.config->estimation.FitSpans().longest_trailing_ns, 20'000'000'000);
    const Result longest = LoadMinimal({"--fit-span-trailing-max-s", "32"});
    ASSERT_TRUE(longest.config.has_value()) << longest.error;
    EXPECT_EQ(longest.config->estimation.FitSpans().longest_trailing_ns, 32'000'000'000);
    const Result all_centred = LoadMinimal({"--fit-span-trailing-max-s", "6"});
    ASSERT_TRUE(all_centred.config.has_value()) << all_centred.error;
    EXPECT_EQ(all_centred.config->estimation.FitSpans().longest_trailing_ns, 6'000'000'000);
  }
  ExpectError(LoadMinimal({"--fit-span-trailing-max-s", "5"}),
              {"longest trailing fit span 5 s", "--fit-span-trailing-max-s", "longest centred span 6 s"});
  ExpectError(LoadMinimal({"--fit-span-max-s", "8", "--fit-span-trailing-max-s", "7"}),
              {"longest trailing fit span 7 s", "longest centred span 8 s", "--fit-span-max-s"});
  ExpectError(LoadMinimal({"--fit-span-trailing-max-s", "33"}), {"longest trailing fit span 33 s", "16 windows"});
  ExpectError(LoadMinimal({"--window-grace-ms", "2000"}), {"grace", "shorter than the window"});
  ExpectError(LoadMinimal({"--window-grace-ms", "-1"}), {"grace"});
  ExpectError(LoadMinimal({"--purity-tolerance-ns", "0"}), {"purity tolerance"});
  ExpectError(LoadMinimal({"--probe-spacing-us", "100", "--purity-tolerance-ns", "100001"}), {"purity tolerance", "probe spacing 100 us"});
  ExpectError(LoadMinimal({"--min-points", "1"}), {"min points", "at least 2"});
  ExpectError(LoadMinimal({"--estimate-points", "some"}), {"estimate points 'some'", "every or pure"});
  ExpectError(LoadMinimal({"--path-asymmetry-ns", "-5"}), {"path asymmetry", "--path-asymmetry-ns"});
  {
    Result asym = LoadMinimal({"--path-asymmetry-ns", "800"});
    ASSERT_TRUE(asym.config) << asym.error;
    EXPECT_EQ(asym.config->estimation.path_asymmetry_ns, 800);
  }
  {
    Result pure = LoadMinimal({"--estimate-points", "pure"});
    ASSERT_TRUE(pure.config) << pure.error;
    EXPECT_FALSE(pure.config->estimation.fit_every_probe);
  }
  {
    Result own = LoadMinimal({"--fit-probes", "own"});
    ASSERT_TRUE(own.config) << own.error;
    EXPECT_FALSE(own.config->estimation.fit_peer_probes);
  }
  ExpectError(LoadMinimal({"--fit-probes", "both"}), {"fit probes 'both'", "link or own", "--fit-probes"});
  {
    EXPECT_TRUE(LoadMinimal({}).config->estimation.FitSpans().later_half) << "on by default";
    Result off = LoadMinimal({"--fit-later-half", "off"});
    ASSERT_TRUE(off.config) << off.error;
    EXPECT_FALSE(off.config->estimation.FitSpans().later_half);
    Result fixed = LoadMinimal({"--fit-span-s", "4"});
    ASSERT_TRUE(fixed.config) << fixed.error;
    EXPECT_FALSE(fixed.config->estimation.FitSpans().later_half) << "a fixed span takes no half";
  }
  ExpectError(LoadMinimal({"--fit-later-half", "yes"}), {"fit later half 'yes'", "on or off", "--fit-later-half"});
  {
    Result hard = LoadMinimal({"--fit-floor-points", "1"});
    ASSERT_TRUE(hard.config) << hard.error;
    EXPECT_EQ(hard.config->estimation.floor_points, 1);
    EXPECT_EQ(LoadMinimal({}).config->estimation.floor_points, 8);
  }
  ExpectError(LoadMinimal({"--fit-floor-points", "0"}), {"fit floor points 0", "1..64", "--fit-floor-points"});
  ExpectError(LoadMinimal({"--fit-floor-points", "65"}), {"fit floor points 65", "1..64"});
  ExpectError(LoadMinimal({"--estimate-sources", ""}), {"source class"});
  ExpectError(LoadMinimal({"--estimate-sources", "kernel,kernel"}), {"twice"});
  ExpectError(LoadMinimal({"--duration-s", "0"}), {"duration", "positive"});
  ExpectError(LoadMinimal({"--duration-s", "1e300"}), {"--duration-s", "out of range"});
  ExpectError(LoadMinimal({"--probe-followup-delay-ms", "600"}), {"follow-up delay", "tuple timeout"});
  ExpectError(LoadMinimal({"--probe-max-pending-tuples", "0"}), {"max pending"});
}

// ---------------------------------------------------------------------------
// Help and version.

TEST_F(AgentConfigTest, HelpReturnsExitZeroWithUsage) {
  Result r = Load({"--help"});
  EXPECT_FALSE(r.config.has_value());
  EXPECT_EQ(r.exit_code, 0);
  for (const char* f : {"Usage", "--config", "--node-id", "--cluster-file", "--probe-interval-us",
                        "--estimate-sources", "--test-mode", "--virtual-offset-ns", "CHRONOLINK_PROBE_INTERVAL_US",
                        "Test only", "docs/configuration.md"}) {
    EXPECT_CONTAINS(r.error, f);
  }
  // Help wins even over otherwise broken input.
  SetEnv("CHRONOLINK_PORT", "bogus");
  r = Load({"--node-id", "1", "-h"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_CONTAINS(r.error, "Usage");
}

TEST_F(AgentConfigTest, VersionReturnsExitZero) {
  Result r = Load({"--version"});
  EXPECT_FALSE(r.config.has_value());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_CONTAINS(r.error, "chronolink-agent");
  EXPECT_EQ(r.error, std::string(AgentVersionString()));
}

// ---------------------------------------------------------------------------
// Paths.

TEST_F(AgentConfigTest, RelativePathsInFileResolveAgainstTheFile) {
  Write("conf/cluster.json", kCluster3);
  WriteKey("conf/keys/key.hex", kKeyHex);
  std::string cfg = Write("conf/agent.json", R"({"node_id": 1, "cluster_file": "cluster.json",
      "key_file": "keys/key.hex", "output_dir": "../out"})");
  fs::create_directories(dir_ / "elsewhere");
  fs::current_path(dir_ / "elsewhere");
  Result r = Load({"--config", "../conf/agent.json"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->config_file_path, cfg);
  EXPECT_EQ(r.config->cluster_file_path, (dir_ / "conf/cluster.json").string());
  EXPECT_EQ(r.config->key_file_path, (dir_ / "conf/keys/key.hex").string());
  EXPECT_EQ(r.config->output_dir, (dir_ / "out").string());
}

TEST_F(AgentConfigTest, RelativePathsOnCommandLineAndEnvResolveAgainstCwd) {
  Write("conf/cluster.json", kCluster3);
  WriteKey("run/key.hex", kKeyHex);
  Write("run/cluster.json", kCluster3);
  std::string cfg = Write("conf/agent.json", R"({"node_id": 1, "cluster_file": "cluster.json"})");
  fs::current_path(dir_ / "run");
  SetEnv("CHRONOLINK_KEY_FILE", "key.hex");
  Result r = Load({"--config", cfg, "--cluster-file", "cluster.json", "--output-dir", "out"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->cluster_file_path, (dir_ / "run/cluster.json").string());
  EXPECT_EQ(r.config->key_file_path, (dir_ / "run/key.hex").string());
  EXPECT_EQ(r.config->output_dir, (dir_ / "run/out").string());
}

// ---------------------------------------------------------------------------
// Examples and round trip.

TEST_F(AgentConfigTest, DeployExamplesLoad) {
  const fs::path deploy = SourceRoot() / "deploy";
  ClusterFile cf;
  std::string error;
  ASSERT_TRUE(LoadClusterFile((deploy / "example-cluster.json").string(), &cf, &error)) << error;
  EXPECT_GE(cf.nodes.size(), 2u);

  // The example names a production key path (/etc/chronolink/cluster.key);
  // a key from the command line replaces it.
  fs::current_path(dir_);
  Result r = Load({"--config", (deploy / "example-config.json").string(), "--key-hex", kKeyHex});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->cluster_file_path, (deploy / "example-cluster.json").string());
  EXPECT_EQ(r.config->cluster.cluster_id, cf.cluster_id);
  EXPECT_FALSE(r.config->test_mode);
  EXPECT_EQ(r.config->peers.size(), cf.nodes.size() - 1);
  // Copied to every node with only node_id edited: each node's page must be
  // its own, where `chronolink-collect --node-id N` looks for it.
  Result node3 = Load({"--config", (deploy / "example-config.json").string(), "--key-hex", kKeyHex, "--node-id", "3"});
  ASSERT_TRUE(node3.config) << node3.error;
  EXPECT_EQ(node3.config->cluster_settings.clock_page_path, "/dev/shm/chronolink-3");
  // What an operator copies probes at the measured defaults (docs/PERFORMANCE.md §3).
  const AgentConfig defaults;
  EXPECT_EQ(r.config->probe.interval_ns, defaults.probe.interval_ns);
  EXPECT_EQ(r.config->probe.spacing_ns, defaults.probe.spacing_ns);
  EXPECT_EQ(r.config->probe.followup_delay_ns, 125'000'000) << "2.5 intervals";
  EXPECT_EQ(r.config->estimation.FitSpan(), defaults.estimation.FitSpan());
  EXPECT_EQ(r.config->estimation.MinFitSpan(), defaults.estimation.MinFitSpan());
  EXPECT_EQ(r.config->estimation.AdaptiveFitSpan(), defaults.estimation.AdaptiveFitSpan());
  EXPECT_EQ(r.config->estimation.FitSpans().longest_trailing_ns, defaults.estimation.FitSpans().longest_trailing_ns);

  Result etcd = Load({"--config", (deploy / "example-config-etcd.json").string(), "--key-hex", kKeyHex});
  ASSERT_TRUE(etcd.config) << etcd.error;
  EXPECT_EQ(etcd.config->cluster_settings.backend, CoordinationBackend::kEtcd);
  EXPECT_EQ(etcd.config->cluster_settings.etcd_endpoints.size(), 2u);
  EXPECT_EQ(etcd.config->cluster.cluster_id, 7u);
  EXPECT_EQ(etcd.config->probe.interval_ns, AgentConfig{}.probe.interval_ns);
}

TEST_F(AgentConfigTest, EffectiveConfigRoundTrips) {
  std::string key_file = WriteKey("key.hex", kKeyHex);
  Result r = Load({"--node-id", "1", "--cluster-file", Cluster(), "--key-file", key_file, "--peers", "3",
            "--probe-spacing-us", "12.5", "--window-s", "0.75", "--duration-s", "30", "--test-mode",
            "--virtual-offset-ns", "123", "--virtual-drift-ppm", "-4.5", "--estimate-sources", "userspace"});
  ASSERT_TRUE(r.config) << r.error;
  const std::string dumped = EffectiveConfigJson(*r.config);
  EXPECT_EQ(dumped.find(kKeyHex), std::string::npos) << "key material leaked";
  std::string cfg = Write("effective.json", dumped);
  Result again = Load({"--config", cfg});
  ASSERT_TRUE(again.config) << again.error << "\n" << dumped;
  const AgentConfig& a = *r.config;
  const AgentConfig& b = *again.config;
  EXPECT_EQ(a.node_id, b.node_id);
  EXPECT_EQ(a.peers, b.peers);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.listen_address, b.listen_address);
  EXPECT_EQ(a.listen_port, b.listen_port);
  EXPECT_EQ(a.probe.spacing_ns, b.probe.spacing_ns);
  EXPECT_EQ(a.probe.interval_ns, b.probe.interval_ns);
  EXPECT_EQ(a.estimation.window_ns, b.estimation.window_ns);
  EXPECT_EQ(a.estimation.source_classes, b.estimation.source_classes);
  EXPECT_EQ(a.duration_ns, b.duration_ns);
  EXPECT_EQ(a.virtual_clock.offset_ns, b.virtual_clock.offset_ns);
  EXPECT_DOUBLE_EQ(a.virtual_clock.drift_ppm, b.virtual_clock.drift_ppm);
  EXPECT_EQ(a.virtual_clock.t0_ns, b.virtual_clock.t0_ns);
  EXPECT_TRUE(a.virtual_t0_defaulted);
  EXPECT_FALSE(b.virtual_t0_defaulted);
  // The default output directory, ".", is the agent's working directory;
  // loaded back it must not become the config file's directory (found by
  // agent_config_fuzz).
  EXPECT_TRUE(std::filesystem::equivalent(std::filesystem::absolute(a.output_dir), b.output_dir))
      << a.output_dir << " vs " << b.output_dir;
}

TEST_F(AgentConfigTest, NullArgvIsTolerated) {
  std::string error;
  int code = -1;
  EXPECT_FALSE(LoadAgentConfig(0, nullptr, &error, &code).has_value());
  EXPECT_EQ(code, 2);
  EXPECT_CONTAINS(error, "no cluster file");
}


// ---------------------------------------------------------------------------
// Timestamp capture.

TEST_F(AgentConfigTest, CaptureDefaultsAndFlags) {
  Result d = LoadMinimal();
  ASSERT_TRUE(d.config) << d.error;
  EXPECT_EQ(d.config->capture.bpf, BpfMode::kAuto);
  EXPECT_EQ(d.config->capture.forced_source, StampSource::kNone);
  EXPECT_TRUE(d.config->capture.bpf_interfaces.empty());
  Result r = LoadMinimal({"--bpf", "on", "--bpf-interfaces", "eth0,eth1", "--timestamp-source",
                          "bpf_tc", "--stamp-log", "stamps.jsonl"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->capture.bpf, BpfMode::kOn);
  EXPECT_EQ(r.config->capture.bpf_interfaces, (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(r.config->capture.forced_source, StampSource::kBpfTc);
  EXPECT_EQ(fs::path(r.config->capture.stamp_log_path).filename(), "stamps.jsonl");
}

TEST_F(AgentConfigTest, CaptureRejectsBadValues) {
  ExpectError(LoadMinimal({"--bpf", "maybe"}), {"eBPF mode 'maybe'", "--bpf", "auto, on or off"});
  ExpectError(LoadMinimal({"--timestamp-source", "userspace"}), {"timestamp source 'userspace'"});
  ExpectError(LoadMinimal({"--timestamp-source", "nic"}), {"timestamp source 'nic'"});
  ExpectError(LoadMinimal({"--bpf", "off", "--timestamp-source", "bpf_xdp"}),
              {"needs the eBPF tap", "--bpf"});
  ExpectError(LoadMinimal({"--bpf-interfaces", "a,,b"}), {"interface name ''"});
  ExpectError(LoadMinimal({"--bpf-interfaces", "averyveryverylongname"}), {"1..15 characters"});
}

// ---------------------------------------------------------------------------
// Cluster coordination.

TEST_F(AgentConfigTest, ClusterDefaultsAreStaticWithTheProbeGraph) {
  Result r = LoadMinimal();
  ASSERT_TRUE(r.config) << r.error;
  const ClusterSettings& cs = r.config->cluster_settings;
  EXPECT_EQ(cs.backend, CoordinationBackend::kStatic);
  EXPECT_FALSE(cs.peers_explicit);
  EXPECT_FALSE(cs.reference_node.has_value());
  EXPECT_EQ(cs.coordination_port, 0);
  EXPECT_EQ(cs.lease_ttl_s, 5);
  EXPECT_EQ(cs.member_lease_ttl_s, 180);  // one keepalive every 90 s
  // A new leader gets again what it solves back over: the solve's lag
  // (4.3 s), the takeover (two 5 s leases) and three windows.
  EXPECT_EQ(CoordinationOptionsFrom(*r.config).resend_ns, 20'300'000'000);
  EXPECT_EQ(cs.clock_page_path, "/dev/shm/chronolink-1");
}

TEST_F(AgentConfigTest, PeersComeFromTheProbeGraphOfALargeCluster) {
  std::string nodes;
  for (int i = 1; i <= 40; ++i) {
    nodes += std::string(i > 1 ? "," : "") + R"({"id": )" + std::to_string(i) + R"(, "address": "10.0.0.)" +
             std::to_string(i) + R"("})";
  }
  const std::string file = Write("big.json", R"({"cluster_id": 1, "nodes": [)" + nodes + "]}");
  Result r = Load({"--node-id", "7", "--cluster-file", file, "--key-hex", kKeyHex, "--probe-k", "4"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_GE(r.config->peers.size(), 4u);
  EXPECT_LE(r.config->peers.size(), 8u);  // bounded degree, not everyone
  for (uint32_t p : r.config->peers) EXPECT_NE(p, 7u);
}

TEST_F(AgentConfigTest, EtcdWithoutAClusterFileNeedsItsOwnIdentity) {
  Result r = Load({"--node-id", "4", "--key-hex", kKeyHex, "--coordination", "etcd", "--etcd-endpoints",
                   "http://10.0.0.9:2379", "--cluster-id", "9", "--listen", "10.0.0.4", "--port", "7319",
                   "--reference", "2", "--lease-ttl-s", "3"});
  ASSERT_TRUE(r.config) << r.error;
  const AgentConfig& c = *r.config;
  EXPECT_EQ(c.cluster_settings.backend, CoordinationBackend::kEtcd);
  EXPECT_EQ(c.cluster.cluster_id, 9u);
  EXPECT_TRUE(c.peers.empty());  // from etcd's members at run time
  EXPECT_EQ(c.cluster_settings.etcd_endpoints, (std::vector<std::string>{"http://10.0.0.9:2379"}));
  EXPECT_EQ(c.cluster_settings.etcd_prefix, "/chronolink/");
  EXPECT_EQ(c.cluster_settings.reference_node, std::optional<uint32_t>(2));
  EXPECT_EQ(c.cluster_settings.lease_ttl_s, 3);

  ExpectError(Load({"--node-id", "4", "--key-hex", kKeyHex, "--coordination", "etcd", "--etcd-endpoints",
                    "http://10.0.0.9:2379", "--listen", "10.0.0.4", "--port", "7319"}),
              {"--cluster-id"});
  ExpectError(Load({"--node-id", "4", "--key-hex", kKeyHex, "--coordination", "etcd", "--etcd-endpoints",
                    "http://10.0.0.9:2379", "--cluster-id", "9", "--listen", "0.0.0.0", "--port", "7319"}),
              {"wildcard"});
  ExpectError(Load({"--node-id", "4", "--key-hex", kKeyHex, "--coordination", "etcd", "--cluster-id", "9",
                    "--listen", "10.0.0.4", "--port", "7319"}),
              {"--etcd-endpoints"});
}

TEST_F(AgentConfigTest, BadClusterSettingsAreRefusedWithTheirSource) {
  ExpectError(LoadMinimal({"--coordination", "zookeeper"}), {"zookeeper", "static, etcd or none"});
  ExpectError(LoadMinimal({"--reference", "median"}), {"median", "mean or a node id"});
  ExpectError(LoadMinimal({"--reference", "9"}), {"reference node 9", "not in cluster file"});
  ExpectError(LoadMinimal({"--probe-k", "1"}), {"at least 2"});
  ExpectError(LoadMinimal({"--lease-ttl-s", "1"}), {"lease TTL", "2..60"});
  ExpectError(LoadMinimal({"--member-lease-ttl-s", "4"}), {"member lease TTL", "5..3600"});
  ExpectError(LoadMinimal({"--lease-ttl-s", "10", "--member-lease-ttl-s", "9"}), {"member lease TTL", "10..3600"});
  ExpectError(LoadMinimal({"--window-retention-s", "5"}), {"retention", "10 s"});
  ExpectError(LoadMinimal({"--offsets-format", "csv"}), {"offsets format 'csv'", "rows, columns or auto"});
  Result r = LoadMinimal({});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->cluster_settings.offsets_form, OffsetsForm::kAuto);
  r = LoadMinimal({"--offsets-format", "columns"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->cluster_settings.offsets_form, OffsetsForm::kColumns);
  // The clock pages' drift: a line over 30 s by default, 0 for the instant's own.
  EXPECT_EQ(r.config->cluster_settings.page_drift_span_ns, 30'000'000'000);
  for (const auto& [span, ns] : {std::pair{"0", int64_t{0}}, std::pair{"4", int64_t{4'000'000'000}},
                                 std::pair{"600", int64_t{600'000'000'000}}}) {
    r = LoadMinimal({"--page-drift-span-s", span});
    ASSERT_TRUE(r.config) << span << ": " << r.error;
    EXPECT_EQ(r.config->cluster_settings.page_drift_span_ns, ns) << span;
  }
  ExpectError(LoadMinimal({"--page-drift-span-s", "3"}), {"page drift span", "--page-drift-span-s", "4..600"});
  ExpectError(LoadMinimal({"--page-drift-span-s", "601"}), {"page drift span", "4..600"});
  ExpectError(LoadMinimal({"--etcd-endpoints", "http://10.0.0.9:2379"}), {"--coordination etcd"});
  ExpectError(LoadMinimal({"--coordination", "etcd", "--etcd-endpoints", "ftp://10.0.0.9:2379"}),
              {"http://HOST:PORT or https://HOST:PORT"});
  ExpectError(LoadMinimal({"--coordination", "etcd", "--etcd-endpoints", "http://10.0.0.9:2379", "--peers", "2"}),
              {"--peers", "etcd"});
  ExpectError(Load({"--node-id", "1", "--key-hex", kKeyHex}), {"no cluster file", "--coordination etcd"});
}

// etcd over https and with a user: the files are read (and the secret ones
// checked like the key file) when the configuration loads; what cannot work
// is refused with the option it came from; plain http warns once.
TEST_F(AgentConfigTest, EtcdTlsAndAuthSettings) {
  testing::EtcdTestPki pki;
  std::string error;
  ASSERT_TRUE(testing::MakeEtcdTestPki(dir_, &pki, &error)) << error;
  const std::string password = WriteKey("etcd-password", "pass word\nignored second line\n");
  const std::vector<std::string> base = {"--node-id", "4", "--key-hex", kKeyHex, "--coordination", "etcd",
                                         "--cluster-id", "9", "--listen", "10.0.0.4", "--port", "7319"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return Load(args);
  };
  auto plain_http_warnings = [](const Result& r) {
    return std::count_if(r.config->warnings.begin(), r.config->warnings.end(),
                         [](const std::string& w) { return w.find("plain http") != std::string::npos; });
  };

  Result r = with({"--etcd-endpoints", "https://10.0.0.9:2379,https://etcd-b:2379", "--etcd-cacert", pki.ca,
                   "--etcd-cert", pki.client_cert, "--etcd-key", pki.client_key, "--etcd-user", "chronolink",
                   "--etcd-password-file", password});
  ASSERT_TRUE(r.config) << r.error;
  const ClusterSettings& cs = r.config->cluster_settings;
  EXPECT_CONTAINS(cs.etcd_cacert_pem, "BEGIN CERTIFICATE");
  EXPECT_CONTAINS(cs.etcd_cert_pem, "BEGIN CERTIFICATE");
  EXPECT_CONTAINS(cs.etcd_key_pem, "PRIVATE KEY");
  EXPECT_EQ(cs.etcd_user, "chronolink");
  EXPECT_EQ(cs.etcd_password, "pass word");
  EXPECT_EQ(plain_http_warnings(r), 0);
  const std::string effective = EffectiveConfigJson(*r.config);
  EXPECT_CONTAINS(effective, pki.client_key);  // the path
  EXPECT_EQ(effective.find("pass word"), std::string::npos);
  EXPECT_EQ(effective.find("PRIVATE KEY"), std::string::npos);

  // The same from the config file, relative paths against its directory.
  const std::string cfg = Write("etcd.json", R"({"cluster": {"etcd_endpoints": "https://10.0.0.9:2379",
      "etcd_cacert": "ca.pem", "etcd_cert": "client.pem", "etcd_key": "client.key", "etcd_user": "chronolink",
      "etcd_password_file": "etcd-password"}})");
  r = with({"--config", cfg});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->cluster_settings.etcd_key_file, pki.client_key);
  EXPECT_EQ(r.config->cluster_settings.etcd_password, "pass word");

  // Plain http: one warning that says what is and is not protected.
  r = with({"--etcd-endpoints", "http://10.0.0.9:2379,http://10.0.0.10:2379"});
  ASSERT_TRUE(r.config) << r.error;
  ASSERT_EQ(plain_http_warnings(r), 1);
  for (const std::string& w : r.config->warnings) {
    if (w.find("plain http") == std::string::npos) continue;
    EXPECT_CONTAINS(w, "neither encrypted nor authenticated");
    EXPECT_CONTAINS(w, "seals its values");
  }

  ExpectError(with({"--etcd-endpoints", "http://10.0.0.9:2379,https://10.0.0.10:2379", "--etcd-cacert", pki.ca}),
              {"--etcd-endpoints", "mix http:// and https://"});
  ExpectError(with({"--etcd-endpoints", "https://10.0.0.9:2379"}), {"--etcd-cacert"});
  ExpectError(with({"--etcd-endpoints", "http://10.0.0.9:2379", "--etcd-cacert", pki.ca}),
              {"--etcd-cacert", "https://"});
  ExpectError(with({"--etcd-endpoints", "https://10.0.0.9:2379", "--etcd-cacert", pki.ca, "--etcd-cert",
                    pki.client_cert}),
              {"--etcd-cert", "--etcd-key", "both"});
  ExpectError(with({"--etcd-endpoints", "https://10.0.0.9:2379", "--etcd-cacert", pki.client_key}),
              {"no PEM certificate"});
  ExpectError(with({"--etcd-endpoints", "https://10.0.0.9:2379", "--etcd-cacert", pki.ca, "--etcd-cert",
                    pki.client_cert, "--etcd-key", pki.other_client_key}),
              {"does not belong"});
  ExpectError(with({"--etcd-endpoints", "https://10.0.0.9:2379", "--etcd-cacert", (dir_ / "none.pem").string()}),
              {"none.pem", "cannot open"});
  const std::string loose_key = WriteKey("loose.key", ReadFileForTest(pki.client_key),
                                         fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  ExpectError(with({"--etcd-endpoints", "https://10.0.0.9:2379", "--etcd-cacert", pki.ca, "--etcd-cert",
                    pki.client_cert, "--etcd-key", loose_key}),
              {"loose.key", "others (mode 0604)", "learn or change the etcd client key;", "--etcd-key"});

  ExpectError(with({"--etcd-endpoints", "http://10.0.0.9:2379", "--etcd-user", "chronolink"}),
              {"--etcd-user", "--etcd-password-file"});
  ExpectError(with({"--etcd-endpoints", "http://10.0.0.9:2379", "--etcd-password-file", password}),
              {"--etcd-user", "--etcd-password-file"});
  const std::string loose = WriteKey("loose-password", "pw\n", fs::perms::owner_read | fs::perms::group_read);
  ExpectError(with({"--etcd-endpoints", "http://10.0.0.9:2379", "--etcd-user", "u", "--etcd-password-file", loose}),
              {"loose-password", "its group (mode 0440)", "the etcd password", "--etcd-password-file"});
  const std::string empty = WriteKey("empty-password", "\nsecond\n");
  ExpectError(with({"--etcd-endpoints", "http://10.0.0.9:2379", "--etcd-user", "u", "--etcd-password-file", empty}),
              {"empty first line"});
  // No option carries the password itself.
  ExpectError(with({"--etcd-endpoints", "http://10.0.0.9:2379", "--etcd-password", "pw"}), {"--etcd-password"});
  ExpectError(LoadMinimal({"--etcd-user", "u", "--etcd-password-file", password}), {"--coordination etcd"});
}

TEST_F(AgentConfigTest, ClusterSettingsFromTheFileAndClockPageOff) {
  const std::string cfg = Write("agent.json", std::string(R"({"node_id": 2, "cluster_file": ")") + Cluster() +
                                                  R"(", "key_hex": ")" + kKeyHex +
                                                  R"(", "cluster": {"coordination": "none", "reference": "3",
                                                  "solve_delay_ms": 250}, "clock_page": "off"})");
  Result r = Load({"--config", cfg});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->cluster_settings.backend, CoordinationBackend::kNone);
  EXPECT_EQ(r.config->cluster_settings.reference_node, std::optional<uint32_t>(3));
  EXPECT_EQ(r.config->cluster_settings.solve_delay_ns, 250'000'000);
  EXPECT_TRUE(r.config->cluster_settings.clock_page_path.empty());
  // The effective configuration loads back to the same settings.
  const std::string back = Write("back.json", EffectiveConfigJson(*r.config));
  Result again = Load({"--config", back, "--key-hex", kKeyHex});
  ASSERT_TRUE(again.config) << again.error << "\n" << EffectiveConfigJson(*r.config);
  EXPECT_EQ(again.config->cluster_settings.reference_node, std::optional<uint32_t>(3));
  EXPECT_EQ(again.config->cluster_settings.backend, CoordinationBackend::kNone);
}


// ---------------------------------------------------------------------------
// The metrics port.

TEST_F(AgentConfigTest, MetricsBarePortIsLoopbackAndAWildcardWarns) {
  auto wildcard_warnings = [](const AgentConfig& c) {
    return std::count_if(c.warnings.begin(), c.warnings.end(), [](const std::string& w) {
      return w.find("reachable from every network") != std::string::npos;
    });
  };
  Result r = LoadMinimal();
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_TRUE(r.config->metrics_address.empty()) << "off by default";

  r = LoadMinimal({"--metrics", "9319"});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->metrics_address, "127.0.0.1");
  EXPECT_EQ(r.config->metrics_port, 9319);
  EXPECT_EQ(wildcard_warnings(*r.config), 0);
  // From the file too, and the effective configuration spells it out.
  const std::string cfg = Write("m.json", R"({"metrics": "0"})");
  r = LoadMinimal({"--config", cfg});
  ASSERT_TRUE(r.config) << r.error;
  EXPECT_EQ(r.config->metrics_address, "127.0.0.1");
  EXPECT_EQ(r.config->metrics_port, 0);
  EXPECT_CONTAINS(EffectiveConfigJson(*r.config), "\"metrics\": \"127.0.0.1:0\"");

  for (const auto& [given, address] : {std::pair{"10.0.0.1:9319", "10.0.0.1"}, std::pair{"[::1]:9319", "::1"},
                                       std::pair{"127.0.0.1:9319", "127.0.0.1"}}) {
    r = LoadMinimal({"--metrics", given});
    ASSERT_TRUE(r.config) << given << ": " << r.error;
    EXPECT_EQ(r.config->metrics_address, address);
    EXPECT_EQ(r.config->metrics_port, 9319);
    EXPECT_EQ(wildcard_warnings(*r.config), 0) << given;
  }
  for (const char* given : {"0.0.0.0:9319", "[::]:9319", "[0:0::0]:9319"}) {
    r = LoadMinimal({"--metrics", given});
    ASSERT_TRUE(r.config) << given << ": " << r.error;
    ASSERT_EQ(wildcard_warnings(*r.config), 1) << given;
    for (const std::string& w : r.config->warnings) {
      if (w.find("reachable from every network") != std::string::npos) {
        EXPECT_CONTAINS(w, given);
        EXPECT_CONTAINS(w, "--metrics");
        EXPECT_CONTAINS(w, "node's own address");
      }
    }
  }
  for (const char* bad : {"localhost:9319", "70000", "-1", "9319x", "10.0.0.1:"}) {
    ExpectError(LoadMinimal({"--metrics", bad}), {"must be IP:PORT", "bare PORT", "--metrics"});
  }
}

}  // namespace
}  // namespace chronolink
