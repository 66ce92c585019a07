#include "trace/model/trace_time.h"

#include <gtest/gtest.h>

#include <limits>

namespace chronolink::trace {
namespace {

TEST(TraceTimeTest, EventStartSplitsPicosecondsWithoutOverflow) {
  xspace::XLine line;
  line.set_timestamp_ns(1'000);
  xspace::XEvent event;
  event.set_offset_ps(2'500);
  event.set_duration_ps(-1'700);  // negative durations are refused elsewhere; the arithmetic holds
  const int64_t epoch = 1'795'320'926'000'000'000;
  const auto start = EventStart(epoch, line, event);
  ASSERT_TRUE(start);
  EXPECT_EQ(start->ns, epoch + 1'002);
  EXPECT_EQ(start->ps, 500);
  const auto end = EventEnd(epoch, line, event);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->ns, epoch + 1'000);
  EXPECT_EQ(end->ps, 800);
}

TEST(TraceTimeTest, NegativeOffsetsBorrowAWholeNanosecond) {
  const auto t = AddPs({100, 200}, -300);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->ns, 99);
  EXPECT_EQ(t->ps, 900);
}

TEST(TraceTimeTest, DiffIsExactAndOverflowIsReported) {
  EXPECT_EQ(DiffPs({10, 5}, {8, 900}), 1'105);
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_FALSE(DiffPs({max, 0}, {0, 0}));  // ns x 1000 does not fit
  EXPECT_FALSE(AddPs({max, 999}, 1));
  xspace::XLine line;
  line.set_timestamp_ns(max);
  xspace::XEvent event;
  EXPECT_FALSE(EventStart(1, line, event));
}

}  // namespace
}  // namespace chronolink::trace
