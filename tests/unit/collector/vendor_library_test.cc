// The pieces both vendor backends share: loading a library by candidates
// or an environment override with one-line reasons, and "key=value"
// backend settings against a table.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <string>
#include <vector>

#include "collector/device/backend_settings.h"
#include "collector/device/dynamic_library.h"

namespace chronolink::collector {
namespace {

TEST(DynamicLibrary, LoadsTheFirstCandidateThatExistsAndResolvesSymbols) {
  DynamicLibrary lib;
  std::string why;
  ASSERT_TRUE(
      lib.Open({"libm", "CHRONOLINK_TEST_UNSET_LIBRARY", {"/nonexistent/libm.so", "libm.so.6"}, "apt"}, &why))
      << why;
  EXPECT_EQ(lib.path(), "libm.so.6");
  double (*cos_fn)(double) = nullptr;
  ASSERT_TRUE(lib.Resolve({{"cos", SlotOf(&cos_fn)}}, &why)) << why;
  EXPECT_DOUBLE_EQ(cos_fn(0.0), 1.0);
  EXPECT_NE(lib.Find("sin"), nullptr);
  EXPECT_EQ(lib.Find("no_such_symbol_here"), nullptr);
}

TEST(DynamicLibrary, AMissingSymbolIsNamedAndClearsTheTable) {
  DynamicLibrary lib;
  std::string why;
  ASSERT_TRUE(lib.Open({"libm", nullptr, {"libm.so.6"}, "apt"}, &why)) << why;
  double (*cos_fn)(double) = nullptr;
  void (*missing)() = nullptr;
  EXPECT_FALSE(lib.Resolve({{"cos", SlotOf(&cos_fn)}, {"cuInitNope", SlotOf(&missing)}}, &why));
  EXPECT_NE(why.find("lacks cuInitNope"), std::string::npos) << why;
  EXPECT_EQ(cos_fn, nullptr);
}

TEST(DynamicLibrary, NothingFoundNamesEveryCandidateTheHintAndTheOverride) {
  DynamicLibrary lib;
  std::string why;
  EXPECT_FALSE(lib.Open({"libfoo (tests)",
                         "CHRONOLINK_TEST_FOO",
                         {"libfoo.so.9", "/opt/foo/libfoo.so.9"},
                         "apt-get install libfoo9"},
                        &why));
  EXPECT_FALSE(lib.loaded());
  for (const char* part : {"libfoo (tests) not found", "libfoo.so.9", "/opt/foo/libfoo.so.9",
                           "apt-get install libfoo9", "CHRONOLINK_TEST_FOO"}) {
    EXPECT_NE(why.find(part), std::string::npos) << part << " in: " << why;
  }
  EXPECT_EQ(why.find('\n'), std::string::npos);
  double (*cos_fn)(double) = nullptr;
  EXPECT_FALSE(lib.Resolve({{"cos", SlotOf(&cos_fn)}}, &why));
}

TEST(DynamicLibrary, TheOverrideIsTheOnlyPathTried) {
  setenv("CHRONOLINK_TEST_LIBM", "/nonexistent/libm.so.6", 1);
  DynamicLibrary lib;
  std::string why;
  EXPECT_FALSE(lib.Open({"libm", "CHRONOLINK_TEST_LIBM", {"libm.so.6"}, "apt"}, &why));
  EXPECT_NE(why.find("CHRONOLINK_TEST_LIBM=/nonexistent/libm.so.6"), std::string::npos) << why;
  setenv("CHRONOLINK_TEST_LIBM", "libm.so.6", 1);
  EXPECT_TRUE(lib.Open({"libm", "CHRONOLINK_TEST_LIBM", {"/nonexistent"}, "apt"}, &why)) << why;
  unsetenv("CHRONOLINK_TEST_LIBM");
}

TEST(BackendSettings, ValuesWithinRangeAndChoicesAreSet) {
  int64_t period = 50, tolerance = 100;
  std::string mode = "raw";
  std::string why;
  const std::vector<std::string> settings = {"period=7", "mode=cupti", "tolerance=0"};
  ASSERT_TRUE(ParseBackendSettings("test", settings,
                                   {{"period", 1, 100, &period}, {"tolerance", 0, 1000, &tolerance}},
                                   {{"mode", {"raw", "cupti"}, &mode}}, &why))
      << why;
  EXPECT_EQ(period, 7);
  EXPECT_EQ(tolerance, 0);
  EXPECT_EQ(mode, "cupti");
}

TEST(BackendSettings, EachKindOfBadInputIsNamed) {
  int64_t period = 50;
  std::string mode = "raw";
  std::string why;
  auto parse = [&](std::vector<std::string> s) {
    return ParseBackendSettings("test", s, {{"period", 1, 100, &period}}, {{"mode", {"raw", "cupti"}, &mode}},
                                &why);
  };
  EXPECT_FALSE(parse({"period"}));
  EXPECT_NE(why.find("not key=value"), std::string::npos) << why;
  EXPECT_FALSE(parse({"=3"}));
  EXPECT_FALSE(parse({"periodd=3"}));
  EXPECT_NE(why.find("unknown test setting 'periodd' (known: period, mode)"), std::string::npos) << why;
  EXPECT_FALSE(parse({"period=0"}));
  EXPECT_NE(why.find("out of range [1, 100]"), std::string::npos) << why;
  EXPECT_FALSE(parse({"period=3x"}));
  EXPECT_NE(why.find("not an integer"), std::string::npos) << why;
  EXPECT_FALSE(parse({"period=99999999999999999999"}));
  EXPECT_FALSE(parse({"mode=fast"}));
  EXPECT_NE(why.find("not one of raw, cupti"), std::string::npos) << why;
  EXPECT_EQ(period, 50);
  EXPECT_EQ(mode, "raw");
}

}  // namespace
}  // namespace chronolink::collector
