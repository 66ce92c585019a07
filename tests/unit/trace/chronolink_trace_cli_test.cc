// chronolink-trace as a user runs it: real files in, the real binary, its
// exit code, its one message, and what it leaves on disk.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/run_process.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;
using chronolink::testing::ProcessResult;
using chronolink::testing::RunProcess;

constexpr int64_t kStart = 1'795'320'000'000'000'000;  // epoch ns

class TraceCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("chronolink-trace-cli-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ProcessResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), CHRONOLINK_TRACE_BIN);
    return RunProcess(args, {}, std::chrono::seconds(60));
  }

  // A host whose CPU line has `events` events 1 ms apart from kStart + 1 s,
  // line timestamps relative to the Task Environment start, like JAX.
  fs::path WriteHost(const std::string& host, int events, int64_t line_ts_ns = 0) {
    HostTrace h;
    h.host = host;
    SetProfileStartTime(h.space, kStart);
    SetHostnames(h.space, {host});
    xspace::XPlane* cpu = GetOrCreatePlane(h.space, "/host:CPU");
    const int64_t md = GetOrCreateEventMetadata(cpu, "all-reduce.1")->id();
    xspace::XLine* line = GetOrCreateLine(cpu, "python");
    line->set_timestamp_ns(line_ts_ns);
    for (int i = 0; i < events; ++i) {
      xspace::XEvent* e = line->add_events();
      e->set_metadata_id(md);
      e->set_offset_ps((1'000'000'000 + i * 1'000'000LL) * 1000);
      e->set_duration_ps(500'000'000);
    }
    const fs::path run = dir_ / "logs" / "plugins" / "profile" / "2026_11_25_10_00_00";
    fs::create_directories(run);
    std::string error;
    EXPECT_TRUE(WriteXSpaceFile(h, run / (host + ".xplane.pb"), &error)) << error;
    return run / (host + ".xplane.pb");
  }

  // Offsets for nodes 1 (reference) and 2 (+1 ms, 10 ppm) every 2 s over
  // [kStart, kStart + 20 s], skipping the instants in `missing` for node 2.
  fs::path WriteOffsets(const std::vector<int>& missing = {}) {
    const fs::path path = dir_ / "offsets.jsonl";
    std::ofstream out(path);
    for (int k = 0; k <= 10; ++k) {
      const int64_t t = kStart + k * 2'000'000'000LL;
      for (int node : {1, 2}) {
        const bool gone = node == 2 && std::find(missing.begin(), missing.end(), k) != missing.end();
        nlohmann::json j = {{"schema", "chronolink.offset.v1"}, {"node", node}, {"reference", 1},
                            {"t_ns", t}, {"reachable", !gone}, {"component", gone ? -1 : 0},
                            {"edges_used", gone ? 0 : 2}, {"leader", 1}};
        j["offset_ns"] = gone ? nlohmann::json() : nlohmann::json(node == 1 ? 0.0 : 1e6 + 10e-6 * k * 2e9);
        j["drift"] = gone ? nlohmann::json() : nlohmann::json(node == 1 ? 0.0 : 1e-5);
        j["uncertainty_ns"] = gone ? nlohmann::json() : nlohmann::json(node == 1 ? 0.0 : 30.0);
        j["residual_ns"] = gone ? nlohmann::json() : nlohmann::json(5.0);
        out << j.dump() << "\n";
      }
    }
    return path;
  }

  // `align` of the run WriteHost made, hosts a and b on nodes 1 and 2, into dir_/out.
  ProcessResult AlignHostsAB(const fs::path& offsets, const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"align", (dir_ / "logs").string(), "--offsets", offsets.string(), "--host",
                                     "1=a", "--host", "2=b", "--timings", "--out", (dir_ / out).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const ProcessResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  }

  // Hosts a and b of two aligned runs: the same bytes.
  void ExpectSameHostFiles(const std::string& out1, const std::string& out2) {
    for (const char* host : {"a", "b"}) {
      const fs::path rel =
          fs::path("plugins") / "profile" / "2026_11_25_10_00_00" / (std::string(host) + ".xplane.pb");
      std::ifstream x(dir_ / out1 / rel, std::ios::binary), y(dir_ / out2 / rel, std::ios::binary);
      const std::string sx((std::istreambuf_iterator<char>(x)), {}), sy((std::istreambuf_iterator<char>(y)), {});
      EXPECT_FALSE(sx.empty()) << host;
      EXPECT_EQ(sx, sy) << host;
    }
  }

  // Nothing, not even a partial directory, where the output would be.
  void ExpectNoOutput(const fs::path& out) {
    EXPECT_FALSE(fs::exists(out)) << out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
    }
  }

  fs::path dir_;
};

TEST_F(TraceCliTest, EverySubcommandHasHelp) {
  for (const char* cmd : {"align", "combine", "export-chrome", "validate", "report"}) {
    const ProcessResult r = Run({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("--"), std::string::npos) << cmd << ": " << r.out;
  }
  const ProcessResult none = Run({});
  EXPECT_NE(none.exit_code, 0);
}

TEST_F(TraceCliTest, AlignsARunAndRefusesToWriteOverIt) {
  WriteHost("a", 5);
  WriteHost("b", 5);
  const fs::path offsets = WriteOffsets();
  const fs::path out = dir_ / "aligned";
  const std::vector<std::string> args = {"align", (dir_ / "logs").string(), "--offsets", offsets.string(),
                                         "--host", "1=a", "--host", "2=b", "--out", out.string()};
  ProcessResult r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "plugins" / "profile" / "2026_11_25_10_00_00" / "b.xplane.pb"));
  EXPECT_NE(r.out.find("common origin"), std::string::npos) << r.out;
  // b's correction is about -1 ms (node 2 runs 1 ms ahead).
  EXPECT_NE(r.out.find("-1.0"), std::string::npos) << r.out;
  r = Run(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
}

// align streams an XSpace run one host at a time (the origin from a span
// scan of every file first); --hold-all reads every host before aligning
// any. Both must write the same bytes, the second host's span reaching
// before the first's included (the origin comes from it).
TEST_F(TraceCliTest, AligningOneHostAtATimeWritesWhatHoldingAllWrites) {
  WriteHost("a", 40);
  WriteHost("b", 40, /*line_ts_ns=*/-3'000'000);  // b starts 3 ms before a
  const fs::path offsets = WriteOffsets();
  auto align = [&](const std::string& out, bool hold_all) {
    std::vector<std::string> args = {"align", (dir_ / "logs").string(), "--offsets", offsets.string(), "--host",
                                     "1=a", "--host", "2=b", "--annotate-events", "--out", (dir_ / out).string()};
    if (hold_all) args.push_back("--hold-all");
    const ProcessResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string streamed = align("streamed", false);
  const std::string held = align("held", true);
  EXPECT_EQ(streamed.substr(0, streamed.find("wrote")), held.substr(0, held.find("wrote")));
  for (const char* host : {"a", "b"}) {
    const fs::path rel = fs::path("plugins") / "profile" / "2026_11_25_10_00_00" / (std::string(host) + ".xplane.pb");
    std::ifstream x(dir_ / "streamed" / rel, std::ios::binary), y(dir_ / "held" / rel, std::ios::binary);
    const std::string sx((std::istreambuf_iterator<char>(x)), {}), sy((std::istreambuf_iterator<char>(y)), {});
    EXPECT_FALSE(sx.empty()) << host;
    EXPECT_EQ(sx, sy) << host;
  }
}

// Each host is rewritten from its wire bytes unless that declines
// (--annotate-events, a bad file), and --timings says which path each host
// took; --no-wire-rewrite aligns through the model. Same files either way.
TEST_F(TraceCliTest, TheWireRewriteWritesWhatTheModelWrites) {
  WriteHost("a", 40);
  WriteHost("b", 40, /*line_ts_ns=*/-3'000'000);
  const fs::path offsets = WriteOffsets();
  auto align = [&](const std::string& out, std::vector<std::string> extra) {
    return AlignHostsAB(offsets, out, std::move(extra));
  };
  const ProcessResult wire = align("wire", {});
  const ProcessResult model = align("model", {"--no-wire-rewrite"});
  const ProcessResult annotated = align("annotated", {"--annotate-events"});
  EXPECT_NE(wire.err.find("align: host a: wire-level rewrite"), std::string::npos) << wire.err;
  EXPECT_NE(wire.err.find("align: host b: wire-level rewrite"), std::string::npos) << wire.err;
  EXPECT_EQ(model.err.find("wire-level"), std::string::npos) << model.err;
  EXPECT_NE(annotated.err.find("align: host a: through the model: --annotate-events"), std::string::npos)
      << annotated.err;
  EXPECT_EQ(wire.out.substr(0, wire.out.find("wrote")), model.out.substr(0, model.out.find("wrote")));
  ExpectSameHostFiles("wire", "model");
}

// The plan predicts each span from the files' headers; a host whose line
// does not start with its earliest event proves it wrong during the
// rewrite, and the run is planned from every event and done again: the
// same files as the model writes.
TEST_F(TraceCliTest, AWrongPredictedSpanIsPlannedAgainExactly) {
  WriteHost("a", 40);
  const fs::path b = WriteHost("b", 40, /*line_ts_ns=*/-2'000'000'000);  // its events before the session's start
  {
    HostTrace h;
    std::string error;
    ASSERT_TRUE(ReadXSpaceFile(b, &h, &error)) << error;
    xspace::XLine* line = GetOrCreatePlane(h.space, "/host:CPU")->mutable_lines(0);
    std::reverse(line->mutable_events()->begin(), line->mutable_events()->end());
    ASSERT_TRUE(WriteXSpaceFile(h, b, &error)) << error;
  }
  const fs::path offsets = WriteOffsets();
  auto align = [&](const std::string& out, std::vector<std::string> extra) {
    return AlignHostsAB(offsets, out, std::move(extra));
  };
  const ProcessResult wire = align("wire", {});
  align("model", {"--no-wire-rewrite"});
  EXPECT_NE(wire.err.find("align: host b: its predicted span was wrong"), std::string::npos) << wire.err;
  EXPECT_NE(wire.err.find("planning every host from all its events"), std::string::npos) << wire.err;
  ExpectSameHostFiles("wire", "model");
}

TEST_F(TraceCliTest, ATruncatedXSpaceIsOneClearErrorAndNoOutput) {
  const fs::path host = WriteHost("a", 50);
  fs::resize_file(host, fs::file_size(host) / 2);
  const fs::path out = dir_ / "aligned";
  const ProcessResult r = Run({"align", host.string(), "--offsets", WriteOffsets().string(), "--host", "1=a",
                               "--out", out.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("a.xplane.pb"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  ExpectNoOutput(out);
}

TEST_F(TraceCliTest, JsonThatIsNotATraceIsOneClearError) {
  const fs::path json = dir_ / "rank0.json";
  std::ofstream(json) << R"({"model": "resnet", "epochs": 3})";
  const fs::path out = dir_ / "aligned";
  const ProcessResult r = Run({"align", json.string(), "--offsets", WriteOffsets().string(), "--host",
                               "1=rank0", "--out", out.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("rank0.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("traceEvents"), std::string::npos) << r.err;
  ExpectNoOutput(out);
}

// --timebase: the nodes' knots change where events between solved
// instants land (node 2's REALTIME bends 1 µs at a knot inside an
// interval), and a bad timebase file is one clear error with no output.
TEST_F(TraceCliTest, TimebasesBendTheCorrectionBetweenInstantsAndABadOneIsAClearError) {
  WriteHost("a", 3);
  WriteHost("b", 3000);  // events 1 ms apart from kStart + 1 s: across three instants
  const fs::path offsets = WriteOffsets();
  // Node 2's REALTIME over RAW: straight, but for 1 µs more between 1.5 s and 2.5 s
  // after kStart (a daemon's slew), from knots around the solved span.
  const fs::path tb = dir_ / "timebase.jsonl";
  {
    std::ofstream out(tb);
    const int64_t x0 = kStart + 1'000'000;  // node 2 reads 1 ms ahead
    const std::vector<std::pair<int64_t, int64_t>> knots = {
        {x0 - 10'000'000'000, 0}, {x0 + 1'500'000'000, 0}, {x0 + 2'500'000'000, 1'000}, {x0 + 30'000'000'000, 1'000}};
    for (const auto& [rt, extra] : knots) {
      out << nlohmann::json({{"schema", "chronolink.timebase.v1"}, {"node", 2}, {"session", "1"},
                             {"after_step", false}, {"realtime_ns", rt}, {"raw_ns", rt - 777 - extra}})
                 .dump()
          << "\n";
    }
  }
  AlignHostsAB(offsets, "straight", {});
  const ProcessResult r = Run({"align", (dir_ / "logs").string(), "--offsets", offsets.string(), "--host", "1=a",
                               "--host", "2=b", "--timebase", tb.string(), "--out", (dir_ / "bent").string(),
                               "--summary-json", (dir_ / "bent.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream summary(dir_ / "bent.json");
  const nlohmann::json j = nlohmann::json::parse(summary);
  EXPECT_NE(j["offsets"].get<std::string>().find("following the clocks' discipline"), std::string::npos) << j.dump();
  const fs::path rel = fs::path("plugins") / "profile" / "2026_11_25_10_00_00" / "b.xplane.pb";
  std::ifstream x(dir_ / "straight" / rel, std::ios::binary), y(dir_ / "bent" / rel, std::ios::binary);
  const std::string sx((std::istreambuf_iterator<char>(x)), {}), sy((std::istreambuf_iterator<char>(y)), {});
  EXPECT_FALSE(sx.empty());
  EXPECT_NE(sx, sy) << "the events between 0 and 4 s moved";

  std::ofstream(dir_ / "bad.jsonl") << "{\"schema\":\"chronolink.timebase.v1\",\"node\":2}\n";
  const fs::path out = dir_ / "refused";
  const ProcessResult bad = Run({"align", (dir_ / "logs").string(), "--offsets", offsets.string(), "--host", "1=a",
                                 "--host", "2=b", "--timebase", (dir_ / "bad.jsonl").string(), "--out", out.string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.jsonl:1:"), std::string::npos) << bad.err;
  ExpectNoOutput(out);
}

TEST_F(TraceCliTest, AHostWithNoNodeIsNamed) {
  WriteHost("gpu-17", 5);
  const fs::path out = dir_ / "aligned";
  const ProcessResult r =
      Run({"align", (dir_ / "logs").string(), "--offsets", WriteOffsets().string(), "--out", out.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'gpu-17'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--host NODE=HOST"), std::string::npos) << r.err;
  ExpectNoOutput(out);
}

// A host is named by its file: whoever can write the logdir chooses the
// name. A newline or an escape sequence in it reaches the output escaped.
TEST_F(TraceCliTest, AHostNameCannotForgeALineOrDriveTheTerminal) {
  WriteHost("gpu\n[fake] align: all hosts aligned\x1b[2J", 5);
  const ProcessResult r =
      Run({"align", (dir_ / "logs").string(), "--offsets", WriteOffsets().string(), "--out", (dir_ / "o").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("\n[fake]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\n[fake]"), std::string::npos) << r.err;
}

TEST_F(TraceCliTest, ATraceInALongGapOfTheOffsetsIsRefusedWithWhy) {
  WriteHost("b", 5);  // events at kStart + 1 s .. + 1.005 s
  // Node 2 unreachable from instant 0 to 9: the trace sits 17 s from its
  // nearest solved instant.
  const fs::path offsets = WriteOffsets({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  const fs::path out = dir_ / "aligned";
  const ProcessResult r = Run({"align", (dir_ / "logs").string(), "--offsets", offsets.string(), "--host",
                               "2=b", "--max-bound-us", "1", "--out", out.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("host b"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--max-bound-us"), std::string::npos) << r.err;
  ExpectNoOutput(out);
}

// Node 2's agent stalled at instant 1 (kStart + 2 s): solved 300 µs off
// under a 250 µs sigma. align sets it aside and says so; b's events at
// kStart + 1 s are corrected by the line from instant 0 to 2 (1.010 ms),
// not bent halfway to the stall (1.161 ms). --stalled-sigma-factor 0 keeps
// the instant: then the events' bound (three of its sigmas, halfway) is
// over --max-bound-us, and the host is refused unless that is raised.
TEST_F(TraceCliTest, AStalledInstantIsSetAsideAndSaidSo) {
  WriteHost("b", 5);
  const fs::path offsets = WriteOffsets();
  std::vector<std::string> lines;
  {
    std::ifstream in(offsets);
    for (std::string line; std::getline(in, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j["node"] == 2 && j["t_ns"] == kStart + 2'000'000'000LL) {
        j["offset_ns"] = j["offset_ns"].get<double>() + 300'000.0;
        j["uncertainty_ns"] = 250'000.0;
      }
      lines.push_back(j.dump());
    }
  }
  {
    std::ofstream out(offsets, std::ios::trunc);
    for (const std::string& line : lines) out << line << "\n";
  }
  auto align = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"align", (dir_ / "logs").string(), "--offsets", offsets.string(), "--host", "2=b",
                                     "--out", (dir_ / out).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return Run(args);
  };
  const ProcessResult set_aside = align("aside", {});
  ASSERT_EQ(set_aside.exit_code, 0) << set_aside.err;
  EXPECT_NE(set_aside.out.find("1 solved instant(s) set aside as a stalled agent's"), std::string::npos)
      << set_aside.out;
  EXPECT_NE(set_aside.out.find("-1.010 ms"), std::string::npos) << set_aside.out;
  const ProcessResult refused = align("refused", {"--stalled-sigma-factor", "0"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("--max-bound-us"), std::string::npos) << refused.err;
  const ProcessResult kept = align("kept", {"--stalled-sigma-factor", "0", "--max-bound-us", "1000"});
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_EQ(kept.out.find("set aside"), std::string::npos) << kept.out;
  EXPECT_NE(kept.out.find("-1.161 ms"), std::string::npos) << kept.out;
  const ProcessResult bad = align("bad", {"--stalled-sigma-factor", "-1"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--stalled-sigma-factor"), std::string::npos) << bad.err;
  // The report draws the same instant apart, by the same flag.
  const auto report = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> args = {"report", "--offsets", offsets.string(), "--out", (dir_ / out).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const ProcessResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(dir_ / out);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string marked = report("marked.svg", {});
  EXPECT_NE(marked.find("1 set aside"), std::string::npos);
  EXPECT_NE(marked.find("class=\"set-aside-mark\""), std::string::npos);
  const std::string unmarked = report("unmarked.svg", {"--stalled-sigma-factor", "0"});
  EXPECT_EQ(unmarked.find("set aside"), std::string::npos);
  EXPECT_EQ(unmarked.find("class=\"set-aside-mark\""), std::string::npos);
}

TEST_F(TraceCliTest, TimestampsThatOverflowWhenRebasedAreRefused) {
  WriteHost("a", 1, /*line_ts_ns=*/INT64_MAX - kStart);
  const fs::path out = dir_ / "aligned";
  const ProcessResult r = Run({"align", (dir_ / "logs").string(), "--offsets", WriteOffsets().string(),
                               "--host", "1=a", "--out", out.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("host a"), std::string::npos) << r.err;
  ExpectNoOutput(out);
}

TEST_F(TraceCliTest, ABadOffsetsLineIsNamedByFileAndLine) {
  WriteHost("a", 5);
  const fs::path offsets = dir_ / "offsets.jsonl";
  std::ofstream(offsets) << R"({"schema": "chronolink.offset.v1", "node": "one"})" << "\n";
  const ProcessResult r = Run({"align", (dir_ / "logs").string(), "--offsets", offsets.string(), "--host",
                               "1=a", "--out", (dir_ / "aligned").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("offsets.jsonl:1"), std::string::npos) << r.err;
}

TEST_F(TraceCliTest, ARelativeChromeTraceWithoutItsStartIsRefused) {
  const fs::path json = dir_ / "rank0.json";
  std::ofstream(json) << R"([{"name": "gloo:all_reduce", "ph": "X", "ts": 12.5, "dur": 3, "pid": 1, "tid": 1}])";
  const ProcessResult r = Run({"align", json.string(), "--offsets", WriteOffsets().string(), "--host",
                               "1=rank0", "--out", (dir_ / "aligned").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--origin"), std::string::npos) << r.err;
}

TEST_F(TraceCliTest, ValidateStrictFailsOnViolationsAndPassesAfterAlignment) {
  // Host b's clock runs 1 ms ahead: its collectives seem to start 1 ms
  // after a's ended (a's last 0.5 ms). Aligned, they overlap.
  WriteHost("a", 3);
  WriteHost("b", 3, /*line_ts_ns=*/1'000'020);
  ProcessResult r = Run({"validate", (dir_ / "logs").string(), "--strict"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  r = Run({"validate", (dir_ / "logs").string(), "--offsets", WriteOffsets().string(), "--host", "1=a",
           "--host", "2=b", "--strict", "--json", (dir_ / "v.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto v = nlohmann::json::parse(std::ifstream(dir_ / "v.json"));
  EXPECT_GE(v["before"]["violations_total"].get<int>(), 1);
  EXPECT_EQ(v["after"]["violations_total"].get<int>(), 0);
}

// report wrote "<out>.tmp" and followed a link planted there: in a
// directory others can write, another user chose the file it overwrote.
// Every output goes through mkstemp and rename now; the link's target is
// untouched, and a link at the output's own name is replaced, not followed.
TEST_F(TraceCliTest, ReportNeverWritesThroughALinkAnotherUserPlanted) {
  const fs::path offsets = WriteOffsets();
  const fs::path victim = dir_ / "victim";
  { std::ofstream(victim) << "precious"; }
  const fs::path out = dir_ / "report.svg";
  fs::create_symlink(victim, dir_ / "report.svg.tmp");
  const fs::path summary = dir_ / "summary.json";
  fs::create_symlink(victim, summary);
  ProcessResult r = Run({"report", "--offsets", offsets.string(), "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious") << "a planted link was written through";
  EXPECT_FALSE(fs::is_symlink(out));
  EXPECT_GT(fs::file_size(out), 100u);
  WriteHost("a", 3);
  r = Run({"validate", (dir_ / "logs").string(), "--json", summary.string()});
  EXPECT_FALSE(fs::is_symlink(summary)) << r.err;
  std::ifstream again(victim);
  std::string after((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, "precious") << "validate --json wrote through a link";
}

TEST_F(TraceCliTest, CombineAndExportWriteOneFileEach) {
  WriteHost("a", 3);
  WriteHost("b", 3);
  const fs::path offsets = WriteOffsets();
  const std::vector<std::string> common = {(dir_ / "logs").string(), "--offsets", offsets.string(),
                                           "--host", "1=a", "--host", "2=b"};
  std::vector<std::string> args = {"combine"};
  args.insert(args.end(), common.begin(), common.end());
  args.insert(args.end(), {"--out", (dir_ / "all.json").string()});
  ProcessResult r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(std::ifstream(dir_ / "all.json"));
  EXPECT_TRUE(doc.contains("traceEvents"));
  args.back() = (dir_ / "all.xplane.pb").string();
  r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(fs::file_size(dir_ / "all.xplane.pb"), 0u);
  r = Run({"export-chrome", (dir_ / "logs").string(), "--out", (dir_ / "raw.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(std::ifstream(dir_ / "raw.json")).contains("traceEvents"));
}

}  // namespace
}  // namespace chronolink::trace
