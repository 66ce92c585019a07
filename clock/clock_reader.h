// Reads of the node clock, and the one place where the test-only virtual
// clock is applied to every node-clock timestamp the agent ingests.
#pragma once

#include <time.h>

#include <cstdint>

#include "clock/virtual_clock.h"

namespace chronolink {

inline int64_t TimespecToNs(const timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

inline int64_t ReadClockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return TimespecToNs(ts);
}

// The node clock as the agent sees it: CLOCK_REALTIME, through the virtual
// clock when (and only when) test mode configured one.
class NodeClock {
 public:
  NodeClock() = default;
  explicit NodeClock(const VirtualClockParams& p) : virtual_(p), skewed_(!p.IsIdentity()) {}

  int64_t Now() const { return Ingest(ReadClockNs(CLOCK_REALTIME)); }
  // A CLOCK_REALTIME instant from elsewhere (a kernel packet stamp).
  int64_t Ingest(int64_t realtime_ns) const {
    return skewed_ ? virtual_.Apply(realtime_ns) : realtime_ns;
  }
  // Back to the real clock, for deadlines handed to the kernel.
  int64_t ToReal(int64_t node_ns) const { return skewed_ ? virtual_.Invert(node_ns) : node_ns; }

  const VirtualClock& virtual_clock() const { return virtual_; }

 private:
  VirtualClock virtual_;
  bool skewed_ = false;
};

}  // namespace chronolink
