// PeriodicTasks: the agent loop's timer list.
#include "agent/runtime/periodic_tasks.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chronolink {
namespace {

TEST(PeriodicTasks, RunsEachTaskWhenDueInTheOrderAdded) {
  PeriodicTasks tasks;
  std::vector<std::string> ran;
  tasks.Add(100, 0, [&](int64_t now) { ran.push_back("a@" + std::to_string(now)); });
  tasks.Add(250, 250, [&](int64_t) { ran.push_back("b"); });
  tasks.RunDue(0, 7);
  EXPECT_EQ(ran, (std::vector<std::string>{"a@7"}));
  EXPECT_EQ(tasks.next_due_ns(), 100);
  tasks.RunDue(99, 8);
  EXPECT_EQ(ran.size(), 1u) << "not due yet";
  tasks.RunDue(260, 9);
  EXPECT_EQ(ran, (std::vector<std::string>{"a@7", "a@9", "b"}));
  EXPECT_EQ(tasks.next_due_ns(), 360);
}

// A late turn runs a task once, and its next deadline counts from that
// turn: a stalled loop never runs a burst of catch-up calls.
TEST(PeriodicTasks, ALateTurnRunsATaskOnceAndDelaysItsNext) {
  PeriodicTasks tasks;
  int runs = 0;
  tasks.Add(10, 0, [&](int64_t) { ++runs; });
  tasks.RunDue(0, 0);
  tasks.RunDue(1'000, 0);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(tasks.next_due_ns(), 1'010);
  tasks.RunDue(1'009, 0);
  EXPECT_EQ(runs, 2);
}

TEST(PeriodicTasks, NoTaskIsNeverDue) {
  PeriodicTasks tasks;
  EXPECT_EQ(tasks.next_due_ns(), std::numeric_limits<int64_t>::max());
  tasks.RunDue(0, 0);
}

}  // namespace
}  // namespace chronolink
