// offsets.jsonl rotated and gzip-compressed by the leader's writer, and read
// back as one set by the trace tools' reader; and the gzip helpers under it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
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

}  // namespace
}  // namespace chronolink
