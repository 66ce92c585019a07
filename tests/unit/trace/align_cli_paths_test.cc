// chronolink-trace align, the real binary, on generated multi-host runs
// (tests/support/xspace_generator.h): the default run (each file's span
// predicted from its headers, the wire-level rewrite, re-planned where a
// prediction was wrong, the model for a host the rewrite declines),
// --no-wire-rewrite and --hold-all must all exit 0 and write files that
// protobuf parses to the same XSpace, or all refuse the run; and no host
// may need the "output failed its check" fallback.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "proto/xplane.pb.h"
#include "tests/support/align_paths_check.h"
#include "tests/support/run_process.h"
#include "tests/support/xspace_generator.h"
#include "trace/wire/xspace_wire_align.h"

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;
using chronolink::testing::ProcessResult;
using chronolink::testing::RunProcess;
using testing::GeneratedXSpace;
using testing::GeneratorRandom;
using testing::XSpaceGenOptions;

constexpr int64_t kSessionStart = 1'795'320'926'000'000'000;
constexpr int kHosts = 3;
constexpr const char* kRun = "2026_11_22_00_00_00";

// offsets.jsonl for nodes 1..3, node 1 the reference, the others skewed
// (ms and tens of ms, ±100 ppm), every 2 s over the session and a margin.
void WriteOffsets(const fs::path& path, int64_t span_ns, uint64_t seed) {
  std::ofstream f(path);
  const double offsets[] = {0, -12.5e6 + static_cast<double>(seed % 7) * 1e6, 33.3e6};
  const double drifts[] = {0, seed % 2 ? 100e-6 : -100e-6, 12e-6};
  for (int64_t t = kSessionStart - 30'000'000'000; t <= kSessionStart + span_ns + 30'000'000'000;
       t += 2'000'000'000) {
    for (int n = 1; n <= kHosts; ++n) {
      const double since = static_cast<double>(t - kSessionStart);
      nlohmann::ordered_json j = {{"schema", "chronolink.offset.v1"}, {"node", n}, {"reference", 1}, {"t_ns", t},
                                  {"offset_ns", offsets[n - 1] + drifts[n - 1] * since},
                                  {"drift", drifts[n - 1]}, {"uncertainty_ns", n == 1 ? 0.0 : 25.0},
                                  {"residual_ns", 0.0}, {"reachable", true}, {"component", 0},
                                  {"edges_used", 4}, {"leader", 1}};
      f << j.dump() << "\n";
    }
  }
}

std::string Canonical(const std::string& bytes) {
  xspace::XSpace space;
  if (!space.ParseFromString(bytes)) return "<does not parse>";
  return testing::CanonicalBytes(space);
}

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class AlignCliPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("chronolink-align-paths-" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ProcessResult Align(const fs::path& in, const fs::path& out, const std::vector<std::string>& flags) {
    std::vector<std::string> args = {CHRONOLINK_TRACE_BIN, "align", in.string(), "--offsets",
                                     (in / "offsets.jsonl").string(), "--out", out.string(), "--timings"};
    for (int n = 1; n <= kHosts; ++n) args.insert(args.end(), {"--host", std::to_string(n) + "=host" + std::to_string(n)});
    args.insert(args.end(), flags.begin(), flags.end());
    return RunProcess(args, {}, std::chrono::seconds(120));
  }

  fs::path dir_;
};

TEST_F(AlignCliPathsTest, EveryFlagWritesTheSameParsedRunFromGeneratedHosts) {
  const std::vector<std::vector<std::string>> paths = {{}, {"--no-wire-rewrite"}, {"--hold-all"}};
  int aligned = 0, refused = 0, wire_hosts = 0;
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    const fs::path in = dir_ / std::to_string(seed);
    const fs::path run = in / "plugins" / "profile" / kRun;
    fs::create_directories(run);
    XSpaceGenOptions gen;
    gen.session_start_ns = kSessionStart;
    gen.max_bytes = 8 << 10;
    GeneratorRandom random(seed * 7919);
    for (int n = 1; n <= kHosts; ++n) {
      const GeneratedXSpace host = GenerateXSpace(random, gen);
      std::ofstream(run / ("host" + std::to_string(n) + ".xplane.pb"), std::ios::binary) << host.bytes;
    }
    WriteOffsets(in / "offsets.jsonl", gen.span_ns, seed);
    std::vector<ProcessResult> results;
    for (size_t p = 0; p < paths.size(); ++p) results.push_back(Align(in, dir_ / ("out" + std::to_string(p)), paths[p]));
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + results[0].err.substr(0, 600));
    const bool ok = results[0].exit_code == 0;
    for (const auto& r : results) {
      ASSERT_TRUE(r.started && !r.timed_out);
      EXPECT_EQ(r.exit_code == 0, ok) << "one path aligned what another refused: " << r.err;
      EXPECT_EQ(r.err.find(kWireCheckFailed), std::string::npos) << "the rewrite's output failed its check";
    }
    if (!ok) {
      ++refused;
      std::cout << "seed " << seed << " refused: " << results[0].err.substr(results[0].err.rfind("align: ", results[0].err.size() - 2));
      EXPECT_EQ(results[0].exit_code, 1);
      EXPECT_FALSE(results[0].err.empty()) << "a refusal says why";
      continue;
    }
    ++aligned;
    for (size_t pos = 0; (pos = results[0].err.find("wire-level rewrite\n", pos)) != std::string::npos; ++pos) {
      ++wire_hosts;
    }
    for (int n = 1; n <= kHosts; ++n) {
      const std::string name = "host" + std::to_string(n) + ".xplane.pb";
      const std::string first = Canonical(ReadFile(dir_ / "out0" / "plugins" / "profile" / kRun / name));
      ASSERT_NE(first, "<does not parse>") << name;
      for (size_t p = 1; p < paths.size(); ++p) {
        EXPECT_EQ(Canonical(ReadFile(dir_ / ("out" + std::to_string(p)) / "plugins" / "profile" / kRun / name)), first)
            << name << " differs with " << paths[p][0];
      }
    }
    for (size_t p = 0; p < paths.size(); ++p) fs::remove_all(dir_ / ("out" + std::to_string(p)));
  }
  std::cout << "generated runs: " << aligned << " aligned on every path, " << refused << " refused on every path; "
            << wire_hosts << " hosts took the wire-level rewrite\n";
  EXPECT_GT(aligned, 10);
  EXPECT_GT(wire_hosts, 10) << "the default path hardly ran the rewrite";
}

}  // namespace
}  // namespace chronolink::trace
