// Chrome ts/dur text -> ns + ps, with no floating point: exact for epoch
// values a double cannot hold, rounding only below a picosecond. (What is
// written back is micros_grid_test.cc's.)
#include "trace/importers/chrome_json/micros_text.h"

#include <gtest/gtest.h>

#include <string>

namespace chronolink::trace {
namespace {

NsPs Parse(std::string_view text) {
  NsPs v{-7, 7};
  EXPECT_EQ(ParseMicrosText(text, &v), MicrosParse::kOk) << text;
  return v;
}

TEST(MicrosText, ParsesEpochMicrosecondsBeyondDoublePrecision) {
  EXPECT_EQ(Parse("1699999999999999.123"), (NsPs{1699999999999999123, 0}));
  EXPECT_EQ(Parse("1699999999999999.123456"), (NsPs{1699999999999999123, 456}));
  // A double would read this as ...999.125.
  EXPECT_NE(static_cast<int64_t>(1699999999999999.123 * 1000), 1699999999999999123);
}

TEST(MicrosText, ParsesEveryJsonNumberForm) {
  EXPECT_EQ(Parse("0"), (NsPs{0, 0}));
  EXPECT_EQ(Parse("12"), (NsPs{12000, 0}));
  EXPECT_EQ(Parse("12.3456"), (NsPs{12345, 600}));
  EXPECT_EQ(Parse("1.5e3"), (NsPs{1500000, 0}));
  EXPECT_EQ(Parse("15E-1"), (NsPs{1500, 0}));
  EXPECT_EQ(Parse("2.5e-4"), (NsPs{0, 250}));
  EXPECT_EQ(Parse("0.000000"), (NsPs{0, 0}));
  EXPECT_EQ(Parse("-1.5"), (NsPs{-1500, 0}));
  EXPECT_EQ(Parse("-0.0015"), (NsPs{-2, 500}));  // -1.5 ns = -2 ns + 500 ps
  EXPECT_EQ(Parse("0.0000004"), (NsPs{0, 0}));   // 0.4 ps
  EXPECT_EQ(Parse("0.0000005"), (NsPs{0, 1}));   // 0.5 ps rounds away from zero
  EXPECT_EQ(Parse("0.9999995"), (NsPs{1000, 0}));  // the rounding carries into ns
  EXPECT_EQ(Parse("1e-400"), (NsPs{0, 0}));
}

TEST(MicrosText, RefusesWhatIsNotANumberOrDoesNotFit) {
  NsPs v;
  for (const char* bad : {"", "-", "1.", ".5", "1e", "1e+", "abc", "1x", "--1", "0x10", " 1"}) {
    EXPECT_EQ(ParseMicrosText(bad, &v), MicrosParse::kNotANumber) << bad;
  }
  EXPECT_EQ(ParseMicrosText("9223372036854776", &v), MicrosParse::kOverflow);  // > INT64_MAX ns
  EXPECT_EQ(ParseMicrosText("1e30", &v), MicrosParse::kOverflow);
  EXPECT_EQ(ParseMicrosText("-1e1000000000", &v), MicrosParse::kOverflow);
  EXPECT_EQ(ParseMicrosText("9223372036854775.807", &v), MicrosParse::kOk);  // INT64_MAX ns
  EXPECT_EQ(v, (NsPs{INT64_MAX, 0}));
  EXPECT_FALSE(MicrosIntToNs(INT64_MAX / 100, &v));
  EXPECT_FALSE(MicrosUintToNs(UINT64_MAX, &v));
}

}  // namespace
}  // namespace chronolink::trace
