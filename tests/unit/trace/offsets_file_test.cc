// Reading offsets.jsonl: field checks with file:line messages, the last line
// per (node, t_ns), several files, one reference, skipping bad lines on
// request; rows and columns lines alike.
#include "trace/correct/offsets_file.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "tests/unit/trace/offsets_truth.h"

namespace chronolink::trace {
namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kT = 1'795'324'431'000'000'000;

// The docs/formats.md example line.
const char kExample[] =
    R"({"schema":"chronolink.offset.v1","node":3,"reference":1,"t_ns":1795324431000000000,)"
    R"("offset_ns":-23001234.5,"drift":-9.9998e-05,"uncertainty_ns":41.2,"residual_ns":12.3,)"
    R"("reachable":true,"component":0,"edges_used":10,"leader":1})";

Json Line(uint32_t node, int64_t t_ns, double offset_ns = 1000.5, Json reference = 1) {
  Json j = Json::parse(kExample);
  j["node"] = node;
  j["t_ns"] = t_ns;
  j["offset_ns"] = offset_ns;
  j["reference"] = reference;
  return j;
}

std::string Text(const std::vector<Json>& lines) {
  std::string text;
  for (const Json& j : lines) text += j.dump() + "\n";
  return text;
}

// Reads texts as files named a.jsonl, b.jsonl, ...
bool Read(const std::vector<std::string>& texts, OffsetsInput* out, std::string* error,
          OffsetsReadOptions options = {}) {
  OffsetsReader reader(options);
  char name = 'a';
  for (const std::string& t : texts) {
    if (!reader.AddText(t, std::string(1, name++) + ".jsonl", error)) return false;
  }
  return reader.Finish(out, error);
}

std::string ErrorOf(const std::string& text) {
  OffsetsInput input;
  std::string error;
  EXPECT_FALSE(Read({text}, &input, &error)) << text;
  return error;
}

TEST(OffsetsFileTest, ReadsTheDocumentedLine) {
  OffsetsInput input;
  std::string error;
  ASSERT_TRUE(Read({std::string(kExample) + "\n"}, &input, &error)) << error;
  ASSERT_EQ(input.records.size(), 1u);
  const OffsetRecord& r = input.records[0];
  EXPECT_EQ(r.node, 3u);
  EXPECT_EQ(r.t_ns, 1'795'324'431'000'000'000);  // exact: never through a double
  EXPECT_TRUE(r.reachable);
  EXPECT_DOUBLE_EQ(r.offset_ns, -23001234.5);
  EXPECT_DOUBLE_EQ(r.drift, -9.9998e-05);
  EXPECT_DOUBLE_EQ(r.uncertainty_ns, 41.2);
  EXPECT_EQ(r.residual_ns, 12.3);
  EXPECT_EQ(r.edges_used, 10);
  EXPECT_EQ(r.leader, 1u);
  EXPECT_FALSE(r.recomputed);
  EXPECT_EQ(input.reference, (ClockReference{.is_mean = false, .node = 1}));
  EXPECT_EQ(input.Where(r), "a.jsonl:1");
}

TEST(OffsetsFileTest, UnreachableLinesCarryNoNumbers) {
  Json j = Line(4, kT);
  for (const char* f : {"offset_ns", "drift", "uncertainty_ns", "residual_ns"}) j[f] = nullptr;
  j["reachable"] = false;
  j["component"] = -1;
  OffsetsInput input;
  std::string error;
  ASSERT_TRUE(Read({Text({j})}, &input, &error)) << error;
  EXPECT_FALSE(input.records[0].reachable);
  EXPECT_EQ(input.records[0].component, -1);
}

TEST(OffsetsFileTest, ARecomputedLineReplacesTheEarlierOneOfItsInstant) {
  Json again = Line(3, kT, 2000.25);
  again["recomputed"] = true;
  OffsetsInput input;
  std::string error;
  ASSERT_TRUE(Read({Text({Line(3, kT), Line(2, kT), Line(3, kT + 2'000'000'000), again})}, &input, &error))
      << error;
  ASSERT_EQ(input.records.size(), 3u);
  EXPECT_EQ(input.lines_read, 4u);
  EXPECT_EQ(input.lines_replaced, 1u);
  const OffsetRecord& r = input.records[1];  // sorted: (2, T), (3, T), (3, T + 2 s)
  EXPECT_EQ(r.node, 3u);
  EXPECT_EQ(r.t_ns, kT);
  EXPECT_DOUBLE_EQ(r.offset_ns, 2000.25);
  EXPECT_TRUE(r.recomputed);
  EXPECT_EQ(input.Where(r), "a.jsonl:4");
}

TEST(OffsetsFileTest, LaterFilesWinWhereLeadersOverlapAndOrderInAFileDoesNotMatter) {
  // Leader 1 solved T..T+6 s; leader 2 took over and solved back from T+4 s.
  const int64_t s = 2'000'000'000;
  const std::string first = Text({Line(2, kT), Line(2, kT + s), Line(2, kT + 2 * s), Line(2, kT + 3 * s)});
  const std::string second = Text({Line(2, kT + 3 * s, 7.0), Line(2, kT + 2 * s, 6.0), Line(2, kT + 4 * s)});
  OffsetsInput input;
  std::string error;
  ASSERT_TRUE(Read({first, second}, &input, &error)) << error;
  ASSERT_EQ(input.records.size(), 5u);
  for (size_t i = 0; i + 1 < input.records.size(); ++i)
    EXPECT_LT(input.records[i].t_ns, input.records[i + 1].t_ns);
  EXPECT_DOUBLE_EQ(input.records[2].offset_ns, 6.0);
  EXPECT_DOUBLE_EQ(input.records[3].offset_ns, 7.0);
  EXPECT_EQ(input.Where(input.records[3]), "b.jsonl:1");
  EXPECT_EQ(input.files, (std::vector<std::string>{"a.jsonl", "b.jsonl"}));
  EXPECT_EQ(input.lines_replaced, 2u);
}

TEST(OffsetsFileTest, AChangeOfReferenceIsRefusedNamingBothPlaces) {
  OffsetsInput input;
  std::string error;
  EXPECT_FALSE(Read({Text({Line(2, kT), Line(3, kT)}), Text({Line(2, kT + 1, 0, 2)})}, &input, &error));
  EXPECT_NE(error.find("b.jsonl:1: reference changes from node 1 (a.jsonl:1) to node 2"), std::string::npos)
      << error;
  EXPECT_FALSE(Read({Text({Line(2, kT), Line(3, kT, 0, "mean")})}, &input, &error));
  EXPECT_NE(error.find("a.jsonl:2: reference changes from node 1 (a.jsonl:1) to mean"), std::string::npos)
      << error;
  // ... even when skipping bad lines: it is not a damaged line.
  EXPECT_FALSE(Read({Text({Line(2, kT), Line(3, kT, 0, "mean")})}, &input, &error, {.skip_bad_lines = true}));
}

// One edit of a good line, and what the refusal of the edited line says.
struct BadLineCase {
  std::function<void(Json&)> edit;
  std::string expected;
};

// Each case's edit of `base`, read as the third line after two good ones:
// refused, naming a.jsonl:3 and why.
void ExpectEachRefusedAsTheThirdLine(const Json& base, const std::vector<BadLineCase>& cases) {
  const std::string good = Line(2, kT).dump() + "\n";
  for (const BadLineCase& c : cases) {
    Json j = base;
    c.edit(j);
    const std::string error = ErrorOf(good + good + j.dump() + "\n");
    EXPECT_EQ(error.rfind("a.jsonl:3: ", 0), 0u) << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << error << "\nexpected: " << c.expected;
  }
}

TEST(OffsetsFileTest, BadLinesAreRefusedWithFileLineAndWhy) {
  const std::string good = Line(2, kT).dump() + "\n";
  ExpectEachRefusedAsTheThirdLine(Line(2, kT + 1), {
      {[](Json& j) { j["schema"] = "chronolink.edge.v1"; }, "schema is neither \"chronolink.offset.v1\""},
      {[](Json& j) { j.erase("schema"); }, "no \"schema\" field"},
      {[](Json& j) { j["t_ns"] = 1.7953244310000000e18; }, "\"t_ns\" must be an int64 integer"},
      {[](Json& j) { j["t_ns"] = "1795324431000000000"; }, "\"t_ns\" must be an int64 integer"},
      {[](Json& j) { j["t_ns"] = 18446744073709551615ULL; }, "\"t_ns\" must be an int64 integer"},
      {[](Json& j) { j["node"] = "3"; }, "\"node\" must be an int64 integer"},
      {[](Json& j) { j["node"] = -1; }, "\"node\" is out of range"},
      {[](Json& j) { j["node"] = 4294967296LL; }, "\"node\" is out of range"},
      {[](Json& j) { j["reference"] = "median"; }, "\"reference\" must be a node id"},
      {[](Json& j) { j["reachable"] = 1; }, "\"reachable\" must be true or false"},
      {[](Json& j) { j["offset_ns"] = "5"; }, "\"offset_ns\" must be a number or null"},
      {[](Json& j) { j["drift"] = nullptr; }, "a reachable line needs numbers"},
      {[](Json& j) { j.erase("uncertainty_ns"); }, "\"uncertainty_ns\" is missing"},
      {[](Json& j) { j["offset_ns"] = 2 * 86'400e9; }, "more than a day"},
      {[](Json& j) { j["drift"] = 0.3; }, "more than 25 %"},
      {[](Json& j) { j["uncertainty_ns"] = -1.0; }, "\"uncertainty_ns\" is negative"},
      {[](Json& j) { j["recomputed"] = "yes"; }, "\"recomputed\" must be true or false"},
      {[](Json& j) { j["edges_used"] = -2; }, "\"edges_used\" is out of range"},
  });
  EXPECT_NE(ErrorOf(good + R"({"schema":"chronolink.offset.v1","offset_ns":1e999})" + "\n").find("a.jsonl:2: not JSON"),
            std::string::npos);
  EXPECT_NE(ErrorOf(good + "[1,2]\n").find("a.jsonl:2: not a JSON object"), std::string::npos);
  EXPECT_NE(ErrorOf(good + good.substr(0, 40)).find("a.jsonl:2: not JSON"), std::string::npos);  // torn
}

// The docs/formats.md columns example: nodes 1, 3 and 7 at one instant, 7
// unreachable.
const char kColumnsExample[] =
    R"({"schema":"chronolink.offset_columns.v1","reference":1,"t_ns":1795324431000000000,"leader":1,)"
    R"("node_delta":[1,2,4],"offset_ps":[0,-23001234500,null],"drift_ps_per_s":[0,-99998000,null],)"
    R"("uncertainty_ps":[0,41200,null],"residual_ps":[0,12300,null],"component":[0,0,-1],)"
    R"("edges_used":[4,10,0]})";

TEST(OffsetsFileTest, AColumnsLineIsEveryNodeOfItsInstant) {
  OffsetsInput input;
  std::string error;
  ASSERT_TRUE(Read({std::string(kColumnsExample) + "\n"}, &input, &error)) << error;
  EXPECT_EQ(input.lines_read, 1u);
  EXPECT_EQ(input.solutions_read, 3u);
  ASSERT_EQ(input.records.size(), 3u);
  const OffsetRecord& r = input.records[1];
  EXPECT_EQ(r.node, 3u);
  EXPECT_EQ(r.t_ns, kT);
  EXPECT_TRUE(r.reachable);
  EXPECT_DOUBLE_EQ(r.offset_ns, -23001234.5);
  EXPECT_DOUBLE_EQ(r.drift, -9.9998e-05);
  EXPECT_DOUBLE_EQ(r.uncertainty_ns, 41.2);
  EXPECT_DOUBLE_EQ(*r.residual_ns, 12.3);
  EXPECT_EQ(r.edges_used, 10);
  EXPECT_EQ(r.leader, 1u);
  EXPECT_EQ(input.Where(r), "a.jsonl:1");
  EXPECT_EQ(input.records[2].node, 7u);
  EXPECT_FALSE(input.records[2].reachable);
  EXPECT_EQ(input.records[2].component, -1);
  EXPECT_EQ(input.reference, (ClockReference{.is_mean = false, .node = 1}));
}

TEST(OffsetsFileTest, RowsAndColumnsMixInOneFileAndTheLastSolutionWins) {
  // A leader that grew past the columns threshold, then re-solved the instant as rows.
  Json again = Line(3, kT, 2000.25);
  again["recomputed"] = true;
  OffsetsInput input;
  std::string error;
  ASSERT_TRUE(Read({Text({Line(3, kT - 2'000'000'000)}) + kColumnsExample + "\n" + Text({again})}, &input, &error))
      << error;
  ASSERT_EQ(input.records.size(), 4u);
  EXPECT_EQ(input.lines_replaced, 1u);
  EXPECT_EQ(input.solutions_read, 5u);
  EXPECT_DOUBLE_EQ(input.records[2].offset_ns, 2000.25);
  EXPECT_EQ(input.Where(input.records[2]), "a.jsonl:3");
}

TEST(OffsetsFileTest, BadColumnsLinesAreRefusedWithFileLineAndWhy) {
  ExpectEachRefusedAsTheThirdLine(Json::parse(kColumnsExample), {
      {[](Json& j) { j["offset_ps"].erase(0); }, "column \"offset_ps\" has 2 entries, \"node_delta\" 3"},
      {[](Json& j) { j.erase("residual_ps"); }, "field \"residual_ps\" is missing"},
      {[](Json& j) { j["component"] = 0; }, "column \"component\" must be an array"},
      {[](Json& j) { j["node_delta"][1] = 0; }, "node 1 appears twice in one instant"},
      {[](Json& j) { j["node_delta"][0] = -1; }, "column \"node_delta\" entry 0 must be an integer in [0, "},
      {[](Json& j) { j["node_delta"][2] = 4294967295LL; }, "column \"node_delta\" entry 2 must be an integer"},
      {[](Json& j) { j["node_delta"][2] = nullptr; }, "column \"node_delta\" entry 2 must be an integer"},
      {[](Json& j) { j["offset_ps"][1] = 1.5; }, "column \"offset_ps\" entry 1 must be an integer"},
      {[](Json& j) { j["drift_ps_per_s"][1] = nullptr; }, "node 3 (entry 1): a reachable line needs numbers"},
      {[](Json& j) { j["offset_ps"][1] = 2 * 86'400'000'000'000'000LL; }, "node 3 (entry 1): \"offset_ps\" 172800000000000000"},
      {[](Json& j) { j["drift_ps_per_s"][1] = 300'000'000'000LL; }, "\"drift_ps_per_s\" 300000000000.000000 is more than 25 %"},
      {[](Json& j) { j["uncertainty_ps"][1] = -1; }, "\"uncertainty_ps\" is negative"},
      {[](Json& j) { j["edges_used"][0] = -1; }, "column \"edges_used\" entry 0 must be an integer in [0, "},
      {[](Json& j) { j["component"][2] = -2; }, "column \"component\" entry 2 must be an integer in [-1, "},
      {[](Json& j) { j["t_ns"] = "now"; }, "\"t_ns\" must be an int64 integer"},
  });
}

TEST(OffsetsFileTest, AnEmptyFileIsAWarningAndNoLineAtAllAnError) {
  // Every agent that may lead opens offsets.jsonl; one that never led leaves it empty.
  OffsetsInput input;
  std::string error;
  ASSERT_TRUE(Read({Text({Line(2, kT)}), "", "\n  \n"}, &input, &error)) << error;
  EXPECT_EQ(input.warnings, (std::vector<std::string>{"b.jsonl: no offsets line (empty file)",
                                                      "c.jsonl: no offsets line (empty file)"}));
  EXPECT_NE(ErrorOf("").find("no usable offsets line in a.jsonl"), std::string::npos);
  EXPECT_FALSE(Read({"", "\n"}, &input, &error));
  EXPECT_EQ(error, "no usable offsets line in a.jsonl, b.jsonl");
  OffsetsReader reader;
  EXPECT_FALSE(reader.Finish(&input, &error));
  EXPECT_EQ(error, "no usable offsets line in (no file)");
}

TEST(OffsetsFileTest, SkippingCountsAndWarnsButKeepsTheGoodLines) {
  const std::string text = Text({Line(2, kT)}) + "garbage\n" + Text({Line(2, kT + 2'000'000'000)}) +
                           R"({"schema":"chronolink.offset.v1"})" + "\n";
  OffsetsInput input;
  std::string error;
  ASSERT_TRUE(Read({text, ""}, &input, &error, {.skip_bad_lines = true})) << error;
  EXPECT_EQ(input.records.size(), 2u);
  EXPECT_EQ(input.lines_read, 4u);
  EXPECT_EQ(input.lines_skipped, 2u);
  ASSERT_EQ(input.warnings.size(), 3u);
  EXPECT_EQ(input.warnings[0].rfind("a.jsonl:2: not JSON", 0), 0u) << input.warnings[0];
  EXPECT_EQ(input.warnings[1].rfind("a.jsonl:4: field \"node\" is missing", 0), 0u) << input.warnings[1];
  EXPECT_EQ(input.warnings[2], "b.jsonl: no offsets line (empty file)");
  // Nothing good at all is still an error.
  EXPECT_FALSE(Read({"garbage\n"}, &input, &error, {.skip_bad_lines = true}));
  EXPECT_NE(error.find("no usable offsets line in a.jsonl"), std::string::npos) << error;
}

TEST(OffsetsFileTest, ReadsFilesFromDisk) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("offsets_file_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                    std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string a = (dir / "leader1.jsonl").string();
  const std::string b = (dir / "leader2.jsonl").string();
  std::ofstream(a) << Text({Line(2, kT), Line(3, kT)});
  std::ofstream(b) << Text({Line(2, kT + 2'000'000'000)}) << "{\"torn";
  OffsetsInput input;
  std::string error;
  EXPECT_FALSE(ReadOffsetsFiles({a, b}, {}, &input, &error));
  EXPECT_EQ(error, b + ":2: not JSON (or a number JSON cannot hold: NaN, infinity)");
  ASSERT_TRUE(ReadOffsetsFiles({a, b}, {.skip_bad_lines = true}, &input, &error)) << error;
  EXPECT_EQ(input.records.size(), 3u);
  EXPECT_EQ(input.files, (std::vector<std::string>{a, b}));
  EXPECT_FALSE(ReadOffsetsFiles({(dir / "missing.jsonl").string()}, {}, &input, &error));
  EXPECT_EQ(error, (dir / "missing.jsonl").string() + ": cannot open: No such file or directory");
  // A directory named as the file says so (it once read as "read error
  // after line 0").
  EXPECT_FALSE(ReadOffsetsFiles({dir.string()}, {}, &input, &error));
  EXPECT_EQ(error, dir.string() + ": is a directory, not a file");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chronolink::trace
