// validate's text and JSON output on a result from real hand-built traces
// (three legacy gloo hosts, clocks +0, +5 ms, -3 ms: four 7 ms violations).
#include "trace/validate/validate_report.h"

#include <gtest/gtest.h>

#include "tests/unit/trace/validate_fixture.h"
#include "trace/validate/validate.h"

namespace chronolink::trace {
namespace {

ValidationResult SkewedGloo() {
  static const std::vector<HostTrace> hosts = [] {
    std::vector<HostTrace> h;
    h.push_back(testing::LegacyGlooHost("host0", 0, 0, 4));
    h.push_back(testing::LegacyGlooHost("host1", 1, 5'000'000, 4));
    h.push_back(testing::LegacyGlooHost("host2", 2, -3'000'000, 4));
    return h;
  }();
  return ValidateTraces({&hosts[0], &hosts[1], &hosts[2]}, {});
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ValidateReportTest, DurationsReadAsPeopleWriteThem) {
  EXPECT_EQ(FormatDurationPs(0), "0 ns");
  EXPECT_EQ(FormatDurationPs(850), "850 ps");
  EXPECT_EQ(FormatDurationPs(1'000), "1.00 ns");
  EXPECT_EQ(FormatDurationPs(12'300'000), "12.3 us");
  EXPECT_EQ(FormatDurationPs(4'570'000'000), "4.57 ms");
  EXPECT_EQ(FormatDurationPs(250'000'000'000), "250 ms");
  EXPECT_EQ(FormatDurationPs(1'200'000'000'000), "1.20 s");
  EXPECT_EQ(FormatDurationPs(-2'000'000), "-2.00 us");
}

TEST(ValidateReportTest, TextNamesTheViolationsAndTheSkews) {
  ValidateReportOptions options;
  options.listed_violations = 2;
  options.title = "validate (before align)";
  const std::string text = ValidationText(SkewedGloo(), options);
  EXPECT_TRUE(text.starts_with("validate (before align): 3 hosts (host0, host1, host2), tolerance 0 ns\n")) << text;
  EXPECT_TRUE(Contains(text, "24 collective events, 8 matched (4 checked for happens-before), 0 unmatched")) << text;
  EXPECT_TRUE(Contains(text, "VIOLATIONS: 4")) << text;
  EXPECT_TRUE(Contains(text, "worst violations (2 of 4):")) << text;
  EXPECT_TRUE(Contains(text, "gloo:all_reduce [host] #1: host2 ended 7.00 ms before host1 started (3 participants)"))
      << text;
  EXPECT_FALSE(Contains(text, "#3:")) << text;  // only two listed
  EXPECT_TRUE(Contains(text, "c10d::allreduce_: skew only")) << text;
  // One screen: a header, totals, skews, the table, two violations, notes.
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 25) << text;
}

TEST(ValidateReportTest, CleanResultSaysSo) {
  std::vector<HostTrace> hosts;
  hosts.push_back(testing::LegacyGlooHost("a", 0, 0, 2));
  hosts.push_back(testing::LegacyGlooHost("b", 1, 0, 2));
  const std::string text = ValidationText(ValidateTraces({&hosts[0], &hosts[1]}, {}));
  EXPECT_TRUE(Contains(text, "violations: none")) << text;
  EXPECT_FALSE(Contains(text, "worst violations")) << text;
}

// A third host recorded one iteration fewer: nothing matches, nothing is
// checked, and "none" must not read as a clean bill.
TEST(ValidateReportTest, NothingCheckableIsNotCalledClean) {
  std::vector<HostTrace> hosts;
  hosts.push_back(testing::LegacyGlooHost("a", 0, 0, 2));
  hosts.push_back(testing::LegacyGlooHost("b", 1, 0, 1));
  const std::string text = ValidationText(ValidateTraces({&hosts[0], &hosts[1]}, {}));
  EXPECT_TRUE(Contains(text, "violations: none, but nothing was checkable")) << text;
  EXPECT_TRUE(Contains(text, "start skew: no matched instances")) << text;
  EXPECT_TRUE(Contains(text, "gloo:all_reduce: counts differ across participants (1..2)")) << text;
}

TEST(ValidateReportTest, JsonCarriesEveryFigureAsIntegers) {
  ValidateReportOptions options;
  options.json_violations = 1;
  const nlohmann::json j = ValidationJson(SkewedGloo(), options);
  EXPECT_EQ(j["schema"], "chronolink.validate/1");
  EXPECT_EQ(j["hosts"], nlohmann::json({"host0", "host1", "host2"}));
  EXPECT_EQ(j["violations_total"], 4);
  EXPECT_EQ(j["matched_instances"], 8);
  ASSERT_EQ(j["violations"].size(), 1u);
  const auto& v = j["violations"][0];
  EXPECT_EQ(v["by_ps"], 7'000'000'000);
  EXPECT_EQ(v["by_ns"], 7'000'000);
  EXPECT_EQ(v["ended_first"], "host2");
  EXPECT_TRUE(v["seq"].is_null());
  EXPECT_TRUE(v["started_last_at"]["ns"].is_number_integer());
  EXPECT_EQ(v["started_last_at"]["ns"].get<int64_t>() - v["ended_first_at"]["ns"].get<int64_t>(), 7'000'000);
  const auto& families = j["families"];
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[1]["family"], "gloo:all_reduce");
  EXPECT_EQ(families[1]["dependency"], "all ranks");
  EXPECT_EQ(families[1]["violations"], 4);
  EXPECT_EQ(families[1]["start_skew"]["max_ns"], 7'990'000);
  EXPECT_EQ(j["start_skew"]["count"], 8);
  EXPECT_EQ(j["skipped"]["bad_time"], 0);
}

}  // namespace
}  // namespace chronolink::trace
