// The agent takes every descriptor its runtime grants (a leader holds one
// connection per node): the soft open-file limit goes up to the hard one.
#include "agent/runtime/file_limit.h"

#include <sys/resource.h>

#include <gtest/gtest.h>

namespace chronolink {
namespace {

TEST(FileLimit, TheSoftLimitIsRaisedToTheHardOne) {
  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  ASSERT_GE(original.rlim_max, 64u) << "no machine this runs on has fewer";
  rlimit lowered = original;
  lowered.rlim_cur = 32;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);

  const FileLimitChange change = RaiseOpenFileLimit();
  rlimit now{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &now), 0);
  ::setrlimit(RLIMIT_NOFILE, &original);
  EXPECT_TRUE(change.error.empty()) << change.error;
  EXPECT_EQ(change.before, 32u);
  EXPECT_EQ(change.after, original.rlim_max);
  EXPECT_EQ(now.rlim_cur, original.rlim_max);

  // At the hard limit already: nothing to do, and said so.
  const FileLimitChange again = RaiseOpenFileLimit();
  EXPECT_TRUE(again.error.empty());
  ::setrlimit(RLIMIT_NOFILE, &original);
  EXPECT_EQ(again.before, again.after);
}

}  // namespace
}  // namespace chronolink
