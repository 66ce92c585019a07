// Bad input to the Chrome trace reader: each class of mistake gives one
// clear message with a byte offset, nothing is half-filled, and no input
// (every truncation of a real document, deep nesting, garbage) crashes or
// hangs it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/trace/chrome_json_test_util.h"
#include "trace/importers/chrome_json/chrome_json_reader.h"

namespace chronolink::trace {
namespace {

std::string ErrorOf(const std::string& doc) {
  HostTrace trace;
  trace.host = "untouched";
  std::string error;
  EXPECT_FALSE(ParseChromeJson(doc, {}, &trace, &error)) << doc;
  EXPECT_EQ(trace.host, "untouched");  // a failed read leaves the output alone
  EXPECT_EQ(trace.space->planes_size(), 0);
  EXPECT_EQ(error.rfind("byte ", 0), 0u) << error;
  return error;
}

void ExpectError(const std::string& doc, const std::string& fragment) {
  const std::string error = ErrorOf(doc);
  EXPECT_NE(error.find(fragment), std::string::npos) << "error: " << error << "\ninput: " << doc;
}

TEST(ChromeJsonErrors, NotJson) {
  ExpectError("", "unexpected end of input");
  ExpectError("hello", "syntax error");
  ExpectError("[{\"ph\":\"X\",", "unexpected end of input");
  ExpectError("{\"traceEvents\": [}", "syntax error");
  ExpectError("[\xff]", "syntax error");
}

TEST(ChromeJsonErrors, JsonThatIsNotATrace) {
  ExpectError("5", "not a trace");
  ExpectError("\"trace\"", "not a trace");
  ExpectError("{\"displayTimeUnit\": \"ms\"}", "no \"traceEvents\" array");
  ExpectError("{\"traceEvents\": 5}", "\"traceEvents\" is not an array");
  ExpectError("{\"traceEvents\": {\"a\": 1}}", "\"traceEvents\" is an object");
  ExpectError("{\"baseTimeNanoseconds\": 1.5, \"traceEvents\": []}", "baseTimeNanoseconds");
  ExpectError("{\"baseTimeNanoseconds\": \"1\", \"traceEvents\": []}", "baseTimeNanoseconds");
}

TEST(ChromeJsonErrors, EventThatIsNotAnObject) {
  ExpectError("[1]", "traceEvents[0] is not an object");
  ExpectError("[{\"ph\":\"i\",\"pid\":1,\"ts\":0}, \"x\"]", "traceEvents[1] is not an object");
  ExpectError("[[]]", "traceEvents[0] is an array");
  ExpectError("[null]", "traceEvents[0] is not an object");
}

TEST(ChromeJsonErrors, EventFieldsOfTheWrongKindOrMissing) {
  ExpectError(R"([{"ph":"X","pid":1,"tid":1,"ts":"5","dur":1}])",
              "traceEvents[0]: \"ts\" is a string");
  ExpectError(R"([{"ph":"X","pid":1,"tid":1,"ts":[5]}])", "\"ts\" is not a number");
  ExpectError(R"([{"ph":"X","pid":1,"tid":1,"ts":5,"dur":true}])", "\"dur\" is not a number");
  ExpectError(R"([{"ph":"X","tid":1,"ts":5}])", "has no \"pid\"");
  ExpectError(R"([{"ph":"B","pid":1,"ts":5}])", "has no \"tid\"");
  ExpectError(R"([{"pid":1,"tid":1,"ts":5}])", "has no \"ph\"");
  ExpectError(R"([{"ph":1,"pid":1,"tid":1,"ts":5}])", "\"ph\" is not a string");
  ExpectError(R"([{"ph":"X","pid":1,"tid":1,"ts":1e30}])", "\"ts\" does not fit");
  ExpectError(R"([{"ph":"X","pid":1,"tid":1,"ts":1,"dur":9000000000000000}])", "longer than");
  // Two events of one thread more than int64 ps (106 days) apart.
  ExpectError(R"([{"ph":"i","pid":1,"tid":1,"ts":0},{"ph":"i","pid":1,"tid":1,"ts":1e13}])",
              "106 days");
}

TEST(ChromeJsonErrors, TrailingGarbageNamesItsOffset) {
  const std::string doc = R"([{"ph":"i","pid":1,"tid":1,"ts":0}] x)";
  const std::string error = ErrorOf(doc);
  EXPECT_NE(error.find("expected end of input"), std::string::npos) << error;
  EXPECT_EQ(error.rfind("byte " + std::to_string(doc.size()) + ":", 0), 0u) << error;
  ExpectError("[] []", "expected end of input");
}

TEST(ChromeJsonErrors, NestingDeeperThan64Levels) {
  std::string deep = R"([{"ph":"i","pid":1,"tid":1,"ts":0,"args":{"a":)";
  for (int i = 0; i < 80; ++i) deep += "[";
  for (int i = 0; i < 80; ++i) deep += "]";
  deep += "}}]";
  ExpectError(deep, "nesting deeper than 64");
  // 64 levels in all are fine.
  std::string ok = R"([{"ph":"i","pid":1,"tid":1,"ts":0,"args":{"a":)";
  for (int i = 0; i < 61; ++i) ok += "[";
  for (int i = 0; i < 61; ++i) ok += "]";
  ok += "}}]";
  HostTrace trace;
  std::string error;
  EXPECT_TRUE(ParseChromeJson(ok, {}, &trace, &error)) << error;
  // Far deeper than any stack: still one message, no crash.
  ExpectError(R"([{"args":)" + std::string(1'000'000, '['), "nesting deeper than 64");
  ExpectError(R"({"x":)" + std::string(1'000'000, '['), "nesting deeper than 64");
}

TEST(ChromeJsonErrors, EveryTruncationOfARealTraceIsRefusedCleanly) {
  const std::string doc = testing::KinetoDocument();
  HostTrace whole;
  std::string error;
  ASSERT_TRUE(ParseChromeJson(doc, {}, &whole, &error)) << error;
  // Trailing whitespace aside, every proper prefix is an incomplete document.
  const size_t end = doc.find_last_not_of(" \n") + 1;
  for (size_t n = 0; n < end; n += 1) {
    HostTrace trace;
    std::string why;
    ASSERT_FALSE(ParseChromeJson(std::string_view(doc).substr(0, n), {}, &trace, &why)) << n;
    ASSERT_EQ(why.rfind("byte ", 0), 0u) << why;
  }
}

TEST(ChromeJsonErrors, FileErrorsNameTheFile) {
  HostTrace trace;
  std::string error;
  EXPECT_FALSE(ReadChromeJsonFile("/nonexistent/trace.json", {}, &trace, &error));
  EXPECT_NE(error.find("/nonexistent/trace.json"), std::string::npos) << error;

  const auto dir = std::filesystem::temp_directory_path() / "chronolink_chrome_errors";
  std::filesystem::create_directories(dir);
  EXPECT_FALSE(ReadChromeJsonFile(dir, {}, &trace, &error));  // a directory
  EXPECT_NE(error.find(dir.string()), std::string::npos) << error;

  const auto bad = dir / "bad.json";
  std::ofstream(bad) << "[{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":\"soon\"}]";
  EXPECT_FALSE(ReadChromeJsonFile(bad, {}, &trace, &error));
  EXPECT_NE(error.find(bad.string() + ": byte "), std::string::npos) << error;
  EXPECT_NE(error.find("traceEvents[0]"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chronolink::trace
