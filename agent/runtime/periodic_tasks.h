// The agent loop's periodic work (closing windows, the cluster check,
// metrics, the progress line), kept as a list of tasks with deadlines on
// CLOCK_MONOTONIC, as chrony keeps its SCH_AddTimeout list: adding one is
// one line, and the loop runs what is due once per turn. A task runs at
// most once per turn however late the loop is; its next deadline is the
// turn's instant plus its period (a slow turn delays, never bunches).
// Single-threaded: the loop owns it.
#pragma once

#include <cstdint>
#include <algorithm>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

namespace chronolink {

class PeriodicTasks {
 public:
  // The node-clock instant of the turn, for tasks that stamp what they do.
  using Task = std::function<void(int64_t now_ns)>;

  // Runs `task` first at monotonic `first_ns` (0: at the first turn), then
  // every `period_ns` (> 0).
  void Add(int64_t period_ns, int64_t first_ns, Task task) {
    tasks_.push_back(Entry{period_ns, first_ns, std::move(task)});
  }

  // Runs, in the order they were added, the tasks due at `monotonic_ns`.
  void RunDue(int64_t monotonic_ns, int64_t now_ns) {
    for (Entry& e : tasks_) {
      if (monotonic_ns < e.next_ns) continue;
      e.task(now_ns);
      e.next_ns = monotonic_ns + e.period_ns;
    }
  }

  // The earliest deadline (monotonic), INT64_MAX with no task.
  int64_t next_due_ns() const {
    int64_t next = std::numeric_limits<int64_t>::max();
    for (const Entry& e : tasks_) next = std::min(next, e.next_ns);
    return next;
  }

 private:
  struct Entry {
    int64_t period_ns;
    int64_t next_ns;
    Task task;
  };
  std::vector<Entry> tasks_;
};

}  // namespace chronolink
