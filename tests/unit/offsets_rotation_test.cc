// offsets.jsonl rotated and gzip-compressed by the leader's writer, and read
// back as one set by the trace tools' reader; its columns form read back as
// the rows are; and the gzip helpers under it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agent/export/offsets_jsonl_writer.h"
#include "common/gzip_file.h"
#include "common/rotating_file.h"
#include "agent/export/timebase_jsonl_writer.h"
#include "trace/correct/timebase_file.h"
#include "trace/correct/offsets_file.h"

namespace chronolink {
namespace {

namespace fs = std::filesystem;

class OffsetsRotationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("offsets_rotation_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // An instant of `nodes` nodes against node 1.
  static OffsetsSnapshot Instant(int64_t t, int nodes) {
    OffsetsSnapshot s;
    s.leader = 1;
    s.reference_instant_ns = t;
    s.reference_node = 1;
    for (int n = 1; n <= nodes; ++n) {
      NodeSolution ns;
      ns.node = static_cast<uint32_t>(n);
      ns.reachable = true;
      ns.offset_ns = n == 1 ? 0 : 1000.5 * n + static_cast<double>(t % 997);
      ns.drift = n == 1 ? 0 : 1e-6 * n;
      ns.uncertainty_ns = n == 1 ? 0 : 12.25;
      ns.edges_used = 2;
      s.nodes.push_back(ns);
    }
    return s;
  }

  std::vector<std::string> Names() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir_)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }

  fs::path dir_;
};

constexpr int64_t kT0 = 1'796'000'000'000'000'000;

TEST_F(OffsetsRotationTest, AFullFileIsRotatedCompressedAndReadBackAsOneSet) {
  OffsetsJsonlWriter w;
  std::string error;
  ASSERT_TRUE(w.Open(dir_.string(), &error, FileRotation{.max_bytes = 4'000})) << error;
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(w.Write(Instant(kT0 + i * 2'000'000'000LL, 5), &error)) << error;
  w.Close();  // waits for the compressions
  EXPECT_GE(w.rotations(), 5u);
  const std::vector<std::string> names = Names();
  EXPECT_EQ(names.front(), "offsets.000001.jsonl.gz");
  for (const std::string& n : names) {
    EXPECT_TRUE(n == "offsets.jsonl" || n.ends_with(".jsonl.gz")) << n << ": none left uncompressed, no temporary";
  }
  ASSERT_EQ(names.size(), w.rotations() + 1);
  // Every file a whole number of instants, and the set reads as one: every
  // line once, in order.
  trace::OffsetsInput input;
  ASSERT_TRUE(trace::ReadOffsetsFiles({(dir_ / "offsets.jsonl").string()}, {}, &input, &error)) << error;
  EXPECT_EQ(input.files.size(), names.size());
  EXPECT_EQ(input.lines_read, 200u);
  EXPECT_EQ(input.records.size(), 200u);
  EXPECT_EQ(input.lines_replaced, 0u);
  // A rotated file named alone is read alone.
  trace::OffsetsInput one;
  ASSERT_TRUE(trace::ReadOffsetsFiles({(dir_ / names.front()).string()}, {}, &one, &error)) << error;
  EXPECT_EQ(one.files.size(), 1u);
  EXPECT_GT(one.lines_read, 0u);
  EXPECT_EQ(one.lines_read % 5, 0u) << "whole instants";
}

// A leader that crashed mid-compression left a plain rotated file and a
// temporary: the next Open compresses the one, removes the other, and
// numbers on from there.
TEST_F(OffsetsRotationTest, WhatACrashLeftIsCompressedAndNumberingGoesOn) {
  {
    std::ofstream(dir_ / "offsets.000007.jsonl") << "{\"partial\":true}\n";
    std::ofstream(dir_ / "offsets.000007.jsonl.gz.tmp") << "half";
    std::ofstream(dir_ / "offsets.000003.jsonl.gz") << "";
  }
  OffsetsJsonlWriter w;
  std::string error;
  ASSERT_TRUE(w.Open(dir_.string(), &error, FileRotation{.max_bytes = 1})) << error;
  ASSERT_TRUE(w.Write(Instant(kT0, 2), &error)) << error;
  w.Close();
  EXPECT_EQ(Names(), (std::vector<std::string>{"offsets.000003.jsonl.gz", "offsets.000007.jsonl.gz",
                                               "offsets.000008.jsonl.gz", "offsets.jsonl"}));
  LineFileReader r;
  ASSERT_TRUE(r.Open((dir_ / "offsets.000007.jsonl.gz").string(), &error)) << error;
  std::string line;
  ASSERT_TRUE(r.Next(&line));
  EXPECT_EQ(line, "{\"partial\":true}");
}

// Where a compression finished but the plain file was not yet removed, the
// set reads the .gz and not both.
TEST_F(OffsetsRotationTest, TheSetTakesTheCompressedCopyOnce) {
  std::ofstream(dir_ / "offsets.jsonl") << "";
  std::ofstream(dir_ / "offsets.000002.jsonl") << "x\n";
  std::ofstream(dir_ / "offsets.000002.jsonl.gz") << "";
  std::ofstream(dir_ / "offsets.000010.jsonl") << "x\n";
  std::ofstream(dir_ / "offsets.00x.jsonl.gz") << "";
  std::ofstream(dir_ / "other.000001.jsonl.gz") << "";
  const std::vector<std::string> set = RotatedSet((dir_ / "offsets.jsonl").string());
  EXPECT_EQ(set, (std::vector<std::string>{(dir_ / "offsets.000002.jsonl.gz").string(),
                                           (dir_ / "offsets.000010.jsonl").string(),
                                           (dir_ / "offsets.jsonl").string()}));
}

// The leader's cluster-timebase.jsonl is rotated too, at a knot; a session's
// polyline goes on across the files (one stretch, no gap at the seam).
TEST_F(OffsetsRotationTest, ARotatedClusterTimebaseIsOnePolylineAcrossItsFiles) {
  TimebaseJsonlWriter w;
  std::string error;
  ASSERT_TRUE(w.Open(dir_.string(), 1, 0, &error, kClusterTimebaseFile, FileRotation{.max_bytes = 1'000})) << error;
  for (int i = 0; i < 60; ++i) {
    const TimebaseKnot k{1'000'000'000LL * i, kT0 + 1'000'000'000LL * i + 50 * i * i, false};
    ASSERT_TRUE(w.WriteKnot(k, 3, 77, false, &error)) << error;
    ASSERT_TRUE(w.Flush(&error)) << error;
  }
  w.Close();
  EXPECT_GE(Names().size(), 5u) << "rotated";
  trace::TimebaseReader reader;
  ASSERT_TRUE(reader.AddFile((dir_ / kClusterTimebaseFile).string(), &error)) << error;
  std::map<uint32_t, trace::NodeTimebase> nodes;
  ASSERT_TRUE(reader.Finish(&nodes, &error)) << error;
  ASSERT_EQ(nodes.count(3), 1u);
  ASSERT_EQ(nodes[3].stretches.size(), 1u) << "one polyline, not one per file";
  EXPECT_EQ(nodes[3].stretches[0].knots.size(), 60u);
}

// Generated knots as the leader gathers them, turn by turn: nodes across
// the id range (0 and 2^32 − 1 too), restarts (new sessions), gaps, steps
// of REALTIME either way, RAW jumps of up to 1 000 s, rates up to 500 ppm.
std::vector<std::vector<RelayedKnot>> GeneratedTurns(uint64_t seed, int turns) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  struct Node {
    uint32_t id;
    uint64_t session;
    int64_t raw, offset;
  };
  std::vector<Node> nodes;
  for (uint32_t id : {0u, 1u, 2u, 77u, 4'294'967'295u}) nodes.push_back({id, rng(), 0, 0});
  for (int i = 0; i < 20; ++i) nodes.push_back({static_cast<uint32_t>(rng()), rng(), 0, 0});
  for (Node& n : nodes) {
    n.raw = static_cast<int64_t>(u(rng) * 1e15);
    n.offset = kT0 - n.raw;
  }
  std::vector<std::vector<RelayedKnot>> out(static_cast<size_t>(turns));
  for (auto& turn : out) {
    for (Node& n : nodes) {
      if (u(rng) < 0.5) continue;
      if (u(rng) < 0.03) n.session = rng();  // the agent restarted
      const int knots = 1 + static_cast<int>(u(rng) * 3);
      for (int k = 0; k < knots; ++k) {
        const auto step = static_cast<int64_t>(1 + u(rng) * (u(rng) < 0.05 ? 1e12 : 3e9));
        const bool after_step = u(rng) < 0.03;
        n.raw += step;
        n.offset += after_step ? static_cast<int64_t>((u(rng) - 0.5) * 2e9)
                               : std::llround((u(rng) - 0.5) * 1e-3 * static_cast<double>(step));
        turn.push_back({n.id, n.session, TimebaseKnot{n.raw, n.raw + n.offset, after_step}, u(rng) < 0.03});
      }
    }
  }
  return out;
}

std::map<uint32_t, trace::NodeTimebase> ReadTimebase(const fs::path& path) {
  trace::TimebaseReader reader;
  std::string error;
  std::map<uint32_t, trace::NodeTimebase> nodes;
  EXPECT_TRUE(reader.AddFile(path.string(), &error)) << error;
  EXPECT_TRUE(reader.Finish(&nodes, &error)) << error;
  return nodes;
}

// cluster-timebase.jsonl as columns (what a leader of 1 000 nodes or more
// writes) holds what the rows hold: the same knots, the same stretches,
// across rotations (each file decodes from its own start).
TEST_F(OffsetsRotationTest, ClusterTimebaseColumnsReadBackAsTheRowsAcrossRotations) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const auto turns = GeneratedTurns(seed, 40);
    for (const char* form : {"rows", "columns"}) {
      fs::create_directories(dir_ / form);
      TimebaseJsonlWriter w;
      std::string error;
      ASSERT_TRUE(w.Open((dir_ / form).string(), 1, 0, &error, kClusterTimebaseFile, FileRotation{.max_bytes = 6'000}))
          << error;
      for (const auto& turn : turns) ASSERT_TRUE(w.WriteKnots(turn, form[0] == 'c', &error)) << error;
      w.Close();
    }
    EXPECT_GE(RotatedSet((dir_ / "columns" / kClusterTimebaseFile).string()).size(), 4u) << "rotated";
    const auto rows = ReadTimebase(dir_ / "rows" / kClusterTimebaseFile);
    const auto columns = ReadTimebase(dir_ / "columns" / kClusterTimebaseFile);
    ASSERT_EQ(rows.size(), 25u);
    size_t stretches = 0;
    for (const auto& [node, r] : rows) stretches += r.stretches.size();
    EXPECT_GT(stretches, 25u) << "restarts, gaps and steps made stretches";
    EXPECT_TRUE(columns == rows) << "seed " << seed;
    fs::remove_all(dir_ / "rows");
    fs::remove_all(dir_ / "columns");
  }
}

// Every rule of a columns line, broken: an error naming the line, never a
// crash or a knot read wrong; nor from any one byte of a valid line changed.
TEST_F(OffsetsRotationTest, AColumnsTimebaseLineThatBreaksARuleIsAnError) {
  const std::string head = R"({"schema":"chronolink.timebase_columns.v1",)";
  const std::string good =
      head + R"("node_delta":[3],"knots":[2],"starts":[[0,"9","1000","1796000000000000000"]],"raw_step_ns":[0,500],)"
             R"("offset_step_ns":[0,-7],"after_step":[],"after_gap":[1]})";
  const std::string continued =
      head +
      R"("node_delta":[3],"knots":[1],"starts":[],"raw_step_ns":[500],"offset_step_ns":[1],"after_step":[],"after_gap":[]})";
  std::string error;
  {
    trace::TimebaseReader r;
    ASSERT_TRUE(r.AddText(good + "\n" + continued, "t.jsonl", &error)) << error;
    std::map<uint32_t, trace::NodeTimebase> nodes;
    ASSERT_TRUE(r.Finish(&nodes, &error)) << error;
    ASSERT_EQ(nodes.at(3).stretches.size(), 2u);  // the after_gap knot starts a stretch
    EXPECT_EQ(nodes.at(3).stretches[1].knots.back().raw_ns, 2000);
    EXPECT_EQ(nodes.at(3).stretches[1].knots.back().realtime_ns, 1796000000000000000 + 2000 - 6);
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {head + R"("knots":[1]})", "needs the arrays"},
      {head +
           R"("node_delta":[3,1],"knots":[2],"starts":[],"raw_step_ns":[0,1],"offset_step_ns":[0,1],"after_step":[],"after_gap":[]})",
       "one length"},
      {head +
           R"("node_delta":[-1],"knots":[1],"starts":[[0,"9","1","2"]],"raw_step_ns":[0],"offset_step_ns":[0],"after_step":[],"after_gap":[]})",
       "node_delta"},
      {head +
           R"("node_delta":[4294967295,1],"knots":[1,1],"starts":[[0,"9","1","2"],[1,"9","1","2"]],"raw_step_ns":[0,0],"offset_step_ns":[0,0],"after_step":[],"after_gap":[]})",
       "32 bits"},
      {head +
           R"("node_delta":[3],"knots":[0],"starts":[[0,"9","1","2"]],"raw_step_ns":[],"offset_step_ns":[],"after_step":[],"after_gap":[]})",
       "positive integer"},
      {head +
           R"("node_delta":[3],"knots":[1],"starts":[[0,"9","1","2"]],"raw_step_ns":[0,1],"offset_step_ns":[0,1],"after_step":[],"after_gap":[]})",
       "raw_step_ns's length"},
      {head +
           R"("node_delta":[3],"knots":[1],"starts":[[0,9,"1","2"]],"raw_step_ns":[0],"offset_step_ns":[0],"after_step":[],"after_gap":[]})",
       "start 0"},
      {head +
           R"("node_delta":[3],"knots":[1],"starts":[[0,"9",1,"2"]],"raw_step_ns":[0],"offset_step_ns":[0],"after_step":[],"after_gap":[]})",
       "start 0"},
      {head +
           R"("node_delta":[3],"knots":[1],"starts":[[0,"9","1x","2"]],"raw_step_ns":[0],"offset_step_ns":[0],"after_step":[],"after_gap":[]})",
       "start 0"},
      {head +
           R"("node_delta":[3],"knots":[1],"starts":[[1,"9","1","2"]],"raw_step_ns":[0],"offset_step_ns":[0],"after_step":[],"after_gap":[]})",
       "start 0"},
      {continued, "no start"},
      {head +
           R"("node_delta":[3],"knots":[1],"starts":[[0,"9","1","2"],[0,"9","1","2"]],"raw_step_ns":[0],"offset_step_ns":[0],"after_step":[],"after_gap":[]})",
       "one twice"},
      {head +
           R"("node_delta":[3],"knots":[2],"starts":[[0,"9","1","2"]],"raw_step_ns":[0,1],"offset_step_ns":[0,1],"after_step":[1,1],"after_gap":[]})",
       "ascending knot indices"},
      {head +
           R"("node_delta":[3],"knots":[1],"starts":[[0,"9","1","2"]],"raw_step_ns":[0],"offset_step_ns":[0],"after_step":[],"after_gap":[1]})",
       "ascending knot indices"},
      {head +
           R"("node_delta":[3],"knots":[2],"starts":[[0,"9","9223372036854775000","2"]],"raw_step_ns":[0,9000],"offset_step_ns":[0,0],"after_step":[],"after_gap":[]})",
       "within int64"},
      {head +
           R"("node_delta":[3],"knots":[2],"starts":[[0,"9","1000","2"]],"raw_step_ns":[0,-5],"offset_step_ns":[0,0],"after_step":[],"after_gap":[]})",
       "must come after"},
  };
  for (const auto& [line, why] : bad) {
    trace::TimebaseReader r;
    EXPECT_FALSE(r.AddText(line, "t.jsonl", &error)) << line;
    EXPECT_NE(error.find("t.jsonl:1"), std::string::npos) << error;
    EXPECT_NE(error.find(why), std::string::npos) << why << " in: " << error;
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string text = good + "\n" + continued;
    text[rng() % text.size()] = "0123456789-,[]{}\":n"[rng() % 19];
    trace::TimebaseReader r;
    EXPECT_NO_THROW(r.AddText(text, "t.jsonl", &error));
  }
}

TEST_F(OffsetsRotationTest, GzipRoundTripsLongLinesAndATruncatedFileIsAnError) {
  const fs::path src = dir_ / "lines.txt";
  const std::string long_line(10'000, 'a');
  std::ofstream(src) << "first\n" << long_line << "\n\nlast without newline";
  std::string error;
  ASSERT_TRUE(GzipFileInPlace(src, &error)) << error;
  EXPECT_FALSE(fs::exists(src));
  const fs::path gz = dir_ / "lines.txt.gz";
  LineFileReader r;
  ASSERT_TRUE(r.Open(gz.string(), &error)) << error;
  std::vector<std::string> lines;
  std::string line;
  while (r.Next(&line)) lines.push_back(line);
  EXPECT_TRUE(r.error().empty()) << r.error();
  EXPECT_EQ(lines, (std::vector<std::string>{"first", long_line, "", "last without newline"}));
  // Cut in the middle: an error that says so, not a quiet end.
  const auto size = fs::file_size(gz);
  fs::resize_file(gz, size / 2);
  LineFileReader cut;
  ASSERT_TRUE(cut.Open(gz.string(), &error)) << error;
  while (cut.Next(&line)) {
  }
  EXPECT_NE(cut.error().find("truncated"), std::string::npos) << cut.error();
  // And through the offsets reader, with the file named.
  trace::OffsetsInput input;
  EXPECT_FALSE(trace::ReadOffsetsFiles({gz.string()}, {}, &input, &error));
  EXPECT_NE(error.find(gz.string()), std::string::npos) << error;
  // A directory, a missing file: the usual reasons.
  LineFileReader none;
  EXPECT_FALSE(none.Open(dir_.string(), &error));
  EXPECT_NE(error.find("directory"), std::string::npos) << error;
  EXPECT_FALSE(GzipFileInPlace(dir_ / "missing", &error));
}

TEST_F(OffsetsRotationTest, TheBackgroundWorkerCompressesEveryFileQueued) {
  BackgroundGzip gzip;
  for (int i = 0; i < 5; ++i) {
    std::ofstream(dir_ / ("f" + std::to_string(i))) << "content " << i << "\n";
    gzip.Compress(dir_ / ("f" + std::to_string(i)));
  }
  gzip.Compress(dir_ / "missing");
  gzip.Drain();
  EXPECT_EQ(gzip.compressed(), 5u);
  EXPECT_NE(gzip.TakeError().find("missing"), std::string::npos);
  EXPECT_TRUE(gzip.TakeError().empty()) << "taken once";
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(fs::exists(dir_ / ("f" + std::to_string(i) + ".gz")));
}

// A solution drawn from the whole space the forms must hold: node ids in
// any order, unreachable nodes, offsets from a picosecond to a day, drifts
// to 25 %, other components.
NodeSolution DrawSolution(std::mt19937_64& rng, uint32_t node) {
  std::uniform_real_distribution<double> unit(0, 1);
  NodeSolution s;
  s.node = node;
  s.reachable = unit(rng) < 0.85;
  s.component = s.reachable ? 0 : static_cast<int>(rng() % 4) - 1;
  s.edges_used = static_cast<int>(rng() % 20);
  if (!s.reachable) return s;
  const double sign = unit(rng) < 0.5 ? -1 : 1;
  s.offset_ns = sign * std::pow(10.0, -3 + unit(rng) * 16.9);  // 1 ps .. 0.9 day
  s.drift = unit(rng) < 0.2 ? (unit(rng) - 0.5) * 0.5 : (unit(rng) - 0.5) * 2e-4;
  s.uncertainty_ns = unit(rng) < 0.1 ? 0 : std::pow(10.0, -2 + unit(rng) * 8);
  s.residual_ns = std::pow(10.0, -3 + unit(rng) * 7);
  return s;
}

// The columns form is read back as the rows are, on generated instants,
// each file mixing both forms: the same solutions, to the columns'
// rounding (1 ps; drift 1e-12).
TEST(OffsetsForms, ColumnsReadBackAsTheRowsDoOnGeneratedInstants) {
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    std::mt19937_64 rng(seed);
    OffsetLineContext c;
    if (seed % 3 != 0) c.reference_node = static_cast<uint32_t>(rng() % 50);
    std::string rows, mixed;
    size_t columns_lines = 0;
    for (int instant = 0; instant < 30; ++instant) {
      c.reference_instant_ns = kT0 + static_cast<int64_t>(rng() % 40) * 2'000'000'000;  // repeats: re-solves
      c.recomputed = rng() % 4 == 0;
      c.leader = rng() % 5 == 0 ? std::nullopt : std::optional<uint32_t>(static_cast<uint32_t>(rng() % 9));
      std::set<uint32_t> ids;
      const size_t n = 1 + rng() % 40;
      while (ids.size() < n) ids.insert(rng() % 4 == 0 ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(rng() % 64));
      std::vector<NodeSolution> nodes;
      for (uint32_t id : ids) nodes.push_back(DrawSolution(rng, id));
      std::shuffle(nodes.begin(), nodes.end(), rng);
      rows += OffsetsInstantText(nodes, c, OffsetsForm::kRows);
      const bool as_columns = rng() % 3 != 0;
      size_t lines = 0;
      mixed += OffsetsInstantText(nodes, c, as_columns ? OffsetsForm::kColumns : OffsetsForm::kRows, &lines);
      if (as_columns) {
        EXPECT_EQ(lines, 1u);
        ++columns_lines;
      }
    }
    trace::OffsetsInput a, b;
    std::string error;
    trace::OffsetsReader ra, rb;
    ASSERT_TRUE(ra.AddText(rows, "rows", &error) && ra.Finish(&a, &error)) << error;
    ASSERT_TRUE(rb.AddText(mixed, "mixed", &error) && rb.Finish(&b, &error)) << "seed " << seed << ": " << error;
    EXPECT_GT(columns_lines, 0u);
    EXPECT_EQ(a.solutions_read, b.solutions_read);
    EXPECT_EQ(a.reference, b.reference);
    ASSERT_EQ(a.records.size(), b.records.size()) << "seed " << seed;
    for (size_t i = 0; i < a.records.size(); ++i) {
      const trace::OffsetRecord &x = a.records[i], &y = b.records[i];
      SCOPED_TRACE("seed " + std::to_string(seed) + ", node " + std::to_string(x.node));
      ASSERT_EQ(x.node, y.node);
      ASSERT_EQ(x.t_ns, y.t_ns);
      EXPECT_EQ(x.reachable, y.reachable);
      EXPECT_EQ(x.component, y.component);
      EXPECT_EQ(x.edges_used, y.edges_used);
      EXPECT_EQ(x.leader, y.leader);
      EXPECT_EQ(x.recomputed, y.recomputed);
      if (!x.reachable) continue;
      // Half a picosecond of rounding, plus what a double holds of a day in ps.
      EXPECT_NEAR(x.offset_ns, y.offset_ns, 0.5e-3 + std::fabs(x.offset_ns) * 1e-15);
      EXPECT_NEAR(x.drift, y.drift, 0.5e-12 + std::fabs(x.drift) * 1e-15);
      EXPECT_NEAR(x.uncertainty_ns, y.uncertainty_ns, 0.5e-3 + x.uncertainty_ns * 1e-15);
      ASSERT_TRUE(x.residual_ns && y.residual_ns);
      EXPECT_NEAR(*x.residual_ns, *y.residual_ns, 0.5e-3 + *x.residual_ns * 1e-15);
    }
  }
}

TEST(OffsetsForms, TheWriterTurnsToColumnsAtAThousandNodesAndToRowsWhereColumnsCannotHoldANumber) {
  const fs::path dir = fs::temp_directory_path() / ("offsets_forms_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  OffsetsJsonlWriter w;
  std::string error;
  ASSERT_TRUE(w.Open(dir.string(), &error)) << error;  // auto
  auto instant = [](int64_t t, uint32_t nodes) {
    OffsetsSnapshot s;
    s.reference_instant_ns = t;
    s.reference_node = 0;
    for (uint32_t n = 0; n < nodes; ++n) {
      s.nodes.push_back(NodeSolution{.node = n, .reachable = true, .offset_ns = 10.0 * n, .component = 0});
    }
    return s;
  };
  ASSERT_TRUE(w.Write(instant(kT0, kOffsetColumnsFromNodes - 1), &error)) << error;
  EXPECT_EQ(w.lines_written(), kOffsetColumnsFromNodes - 1);
  ASSERT_TRUE(w.Write(instant(kT0 + 2'000'000'000, kOffsetColumnsFromNodes), &error)) << error;
  EXPECT_EQ(w.lines_written(), kOffsetColumnsFromNodes);
  OffsetsSnapshot huge = instant(kT0 + 4'000'000'000, kOffsetColumnsFromNodes);
  huge.nodes[7].offset_ns = 1e20;  // no clock's, but the rows hold what the solver said
  ASSERT_TRUE(w.Write(huge, &error)) << error;
  EXPECT_EQ(w.lines_written(), 2 * kOffsetColumnsFromNodes);  // 999 rows, a columns line, 1000 rows
  w.Close();
  trace::OffsetsInput input;
  EXPECT_FALSE(trace::ReadOffsetsFiles({(dir / "offsets.jsonl").string()}, {}, &input, &error));
  EXPECT_NE(error.find("offsets.jsonl:" + std::to_string(kOffsetColumnsFromNodes + 8)), std::string::npos) << error;
  ASSERT_TRUE(trace::ReadOffsetsFiles({(dir / "offsets.jsonl").string()}, {.skip_bad_lines = true}, &input, &error))
      << error;
  EXPECT_EQ(input.solutions_read, 3 * kOffsetColumnsFromNodes - 2);  // the one bad row skipped
  EXPECT_EQ(input.lines_skipped, 1u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chronolink
