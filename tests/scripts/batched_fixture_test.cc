// A GoogleTest program for the self-test of scripts/ctest-batched.py
// (tests/scripts/ctest_batched_selftest.py), not a test of chronolink: what
// each test does is set by CHRONOLINK_BATCHED_FIXTURE (pass, fail, crash).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

std::string Mode() {
  const char* mode = std::getenv("CHRONOLINK_BATCHED_FIXTURE");
  return mode == nullptr ? "pass" : mode;
}

TEST(BatchedFixture, Passes) { EXPECT_EQ(1 + 1, 2); }

TEST(BatchedFixture, Skips) { GTEST_SKIP() << "skipped on purpose"; }

TEST(BatchedFixture, FailsWhenAsked) { EXPECT_NE(Mode(), "fail") << "failed on purpose"; }

TEST(BatchedFixture, CrashesWhenAsked) {
  if (Mode() == "crash") std::abort();
}

class BatchedFixtureParam : public ::testing::TestWithParam<int> {};
TEST_P(BatchedFixtureParam, PassesForEveryValue) { EXPECT_GE(GetParam(), 0); }
INSTANTIATE_TEST_SUITE_P(Values, BatchedFixtureParam, ::testing::Values(0, 1));

TEST(BatchedFixture, RunsAfterTheCrash) { EXPECT_TRUE(true); }

}  // namespace
