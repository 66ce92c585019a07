// The Chrome writer's time grid (trace/exporters/micros_grid.h) as a reader
// that parses doubles sees it (strtod, as browsers and Python do): every
// value written is exactly the double it names, ts + dur is exactly the
// end, rounding keeps order, and the motivating case: a child that ends
// with its parent ends with it after parsing, where six decimals of epoch
// microseconds do not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "trace/exporters/micros_grid.h"

namespace chronolink::trace {
namespace {

double Parse(const std::string& text) { return std::strtod(text.c_str(), nullptr); }

std::string Text(int64_t ticks, int exponent) {
  std::string s;
  AppendGridMicros(ticks, exponent, &s);
  return s;
}

TEST(MicrosGridTest, TextIsExactDecimalOfTheTicks) {
  EXPECT_EQ(Text(1, 10), "0.0009765625");
  EXPECT_EQ(Text(1024, 10), "1");
  EXPECT_EQ(Text(-1536, 10), "-1.5");
  EXPECT_EQ(Text(0, 10), "0");
  EXPECT_EQ(Text(3, 0), "3");
  EXPECT_EQ(Text(3, -2), "12");  // a coarse grid: 4 µs ticks
  std::mt19937_64 random(1);
  for (int i = 0; i < 200'000; ++i) {
    const int64_t ticks = static_cast<int64_t>(random() % (uint64_t{1} << 53)) * (i % 2 ? 1 : -1);
    const int exponent = static_cast<int>(random() % 11);
    ASSERT_EQ(Parse(Text(ticks, exponent)), std::ldexp(static_cast<double>(ticks), -exponent))
        << ticks << " at 2^-" << exponent;
  }
}

TEST(MicrosGridTest, TicksAreTheNearestAndKeepOrder) {
  // 2^-10 µs is 976.5625 ps.
  EXPECT_EQ(GridTicks(0, 10), 0);
  EXPECT_EQ(GridTicks(488, 10), 0);
  EXPECT_EQ(GridTicks(489, 10), 1);
  EXPECT_EQ(GridTicks(-488, 10), 0);
  EXPECT_EQ(GridTicks(-489, 10), -1);
  EXPECT_EQ(GridTicks(1'000'000, 10), 1024);
  EXPECT_FALSE(GridTicks(static_cast<__int128>(1) << 80, 10)) << "past 2^53 ticks";
  std::mt19937_64 random(2);
  for (int i = 0; i < 200'000; ++i) {
    const __int128 a = static_cast<__int128>(random() % 8'000'000'000'000'000'000ULL) - 4'000'000'000'000'000'000LL;
    const __int128 b = a + static_cast<__int128>(random() % 3'000);
    const auto ta = GridTicks(a, 10), tb = GridTicks(b, 10);
    ASSERT_TRUE(ta && tb);
    ASSERT_LE(*ta, *tb);
    const __int128 error = static_cast<__int128>(*ta) * 1'000'000 - a * 1024;  // in 2^-10 ps
    ASSERT_LE(error < 0 ? -error : error, 500'000) << "more than half a tick away";
  }
}

TEST(MicrosGridTest, TheGridCoarsensOnlyPast2To53Ticks) {
  constexpr __int128 kDay = __int128{86'400} * 1'000'000'000'000;
  EXPECT_EQ(GridExponentFor(0), 10);
  EXPECT_EQ(GridExponentFor(101 * kDay), 10);
  EXPECT_EQ(GridExponentFor(102 * kDay), 9);
  const __int128 int64_ns_in_ps = static_cast<__int128>(INT64_MAX) * 1000;
  const int coarse = GridExponentFor(int64_ns_in_ps);
  EXPECT_LT(coarse, 10);
  EXPECT_TRUE(GridTicks(int64_ns_in_ps, coarse));
  EXPECT_TRUE(GridTicks(-int64_ns_in_ps, coarse));
}

// Start, duration and end written as the Chrome writer writes them; a
// reader's ts + dur must be the end's own value, exactly.
TEST(MicrosGridTest, TsPlusDurIsTheEndExactlyForADoubleReader) {
  std::mt19937_64 random(3);
  for (int i = 0; i < 200'000; ++i) {
    const __int128 start = static_cast<__int128>(random() % 8'000'000'000'000'000'000ULL);  // up to 92 days
    const __int128 end = start + static_cast<__int128>(random() % 100'000'000'000'000ULL);
    const int64_t ts = *GridTicks(start, 10), te = *GridTicks(end, 10);
    const double reader_ts = Parse(Text(ts, 10)), reader_dur = Parse(Text(te - ts, 10));
    ASSERT_EQ(reader_ts + reader_dur, Parse(Text(te, 10)));
  }
}

// The failure the grid exists for: a parent and a child that end at the
// same instant, an epoch apart from zero. As six-decimal absolute µs the
// child's ts + dur comes out after the parent's; on the grid, relative to
// a base, it does not.
TEST(MicrosGridTest, AChildEndingWithItsParentStillEndsWithItOnceParsed) {
  int broken_as_decimals = 0, broken_on_grid = 0;
  std::mt19937_64 random(4);
  for (int i = 0; i < 10'000; ++i) {
    const int64_t parent_start_ns = 1'795'678'683'000'000'000 + static_cast<int64_t>(random() % 10'000'000'000);
    const int64_t parent_dur_ns = 1 + static_cast<int64_t>(random() % 10'000'000);
    const int64_t child_start_ns = parent_start_ns + static_cast<int64_t>(random() % static_cast<uint64_t>(parent_dur_ns));
    const int64_t end_ns = parent_start_ns + parent_dur_ns;
    auto decimal = [](int64_t ns) {  // as absolute µs with 6 decimals, then parsed
      char buf[64];
      std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
      return Parse(buf);
    };
    auto micros = [](int64_t ns) { return Parse(std::to_string(ns / 1000) + "." + std::to_string(1000 + ns % 1000).substr(1)); };
    const double parent_end = decimal(parent_start_ns) + micros(end_ns - parent_start_ns);
    const double child_end = decimal(child_start_ns) + micros(end_ns - child_start_ns);
    broken_as_decimals += child_end > parent_end;
    const int64_t base = 1'795'678'683'000'000'000;
    auto tick = [&](int64_t ns) { return *GridTicks(static_cast<__int128>(ns - base) * 1000, 10); };
    const int64_t ps = tick(parent_start_ns), cs = tick(child_start_ns), e = tick(end_ns);
    const double grid_parent_end = Parse(Text(ps, 10)) + Parse(Text(e - ps, 10));
    const double grid_child_end = Parse(Text(cs, 10)) + Parse(Text(e - cs, 10));
    broken_on_grid += grid_child_end > grid_parent_end;
  }
  EXPECT_GT(broken_as_decimals, 100) << "the old format broke nesting this often";
  EXPECT_EQ(broken_on_grid, 0);
}

}  // namespace
}  // namespace chronolink::trace
