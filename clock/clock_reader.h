// Reads of the node clock, and the one place where the test-only virtual
// clock is applied to every node-clock timestamp the agent ingests.
#pragma once

#include <sys/timex.h>
#include <time.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "clock/clock_bracket.h"
#include "clock/clock_state_file.h"
#include "clock/realtime_raw_map.h"
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

// Test mode: a test bed node's clock as its state file says (oscillator
// wander, a daemon's discipline), shared by every copy of the NodeClock and
// safe to read from any thread. A writer that died mid-change leaves the
// last state read in force, tried again once a second.
class TestbedNodeClock {
 public:
  bool Open(const std::string& path, std::string* error) {
    path_ = path;
    return reader_.Open(path, error);
  }
  int64_t RealtimeAt(int64_t real_ns) {
    std::lock_guard lock(mutex_);
    Refresh(real_ns);
    return reader_.RealtimeAt(real_ns);
  }
  int64_t TrueInstantOfRealtime(int64_t node_ns) {
    std::lock_guard lock(mutex_);
    return reader_.TrueInstantOfRealtime(node_ns);
  }
  // The node's REALTIME and MONOTONIC_RAW at one real instant, and
  // REALTIME's rate against RAW there (the correction's over the
  // oscillator's).
  ClockPairSample PairAt(int64_t real_ns) {
    std::lock_guard lock(mutex_);
    Refresh(real_ns);
    const __int128 rate = static_cast<__int128>(reader_.correction().SlopeAt(real_ns)) * kFinePerNs /
                          reader_.raw().SlopeAt(real_ns);
    return {reader_.RealtimeAt(real_ns), reader_.RawAt(real_ns), 0, static_cast<int64_t>(rate)};
  }
  const std::string& path() const { return path_; }

 private:
  void Refresh(int64_t real_ns) {
    if (real_ns < retry_at_ns_) return;
    std::string error;
    retry_at_ns_ = reader_.Refresh(&error) ? 0 : real_ns + 1'000'000'000;
  }
  std::mutex mutex_;
  ClockStateReader reader_;
  std::string path_;
  int64_t retry_at_ns_ = 0;
};

// The node clock as the agent sees it: CLOCK_REALTIME, through the virtual
// clock (linear, or the test bed's node clock) when (and only when) test
// mode configured one.
class NodeClock {
 public:
  NodeClock() = default;
  // Test mode's linear virtual clock: the node is simulated, its clock a
  // function of the host's REALTIME (the test bed's true time) even where
  // it is the identity, and undisciplined: its RAW is itself.
  explicit NodeClock(const VirtualClockParams& p) : virtual_(p), skewed_(!p.IsIdentity()), linear_(true) {}
  explicit NodeClock(std::shared_ptr<TestbedNodeClock> testbed) : testbed_(std::move(testbed)) {}

  int64_t Now() const { return Ingest(ReadClockNs(CLOCK_REALTIME)); }
  // The node clock and CLOCK_MONOTONIC at one instant: REALTIME read between
  // two MONOTONIC reads, the tightest of three, at their midpoint. What a
  // clock page's step check compares (clock_mapping_page.h allows 20 µs): a
  // reader preempted between two plain reads would see a step.
  struct WithMonotonic {
    int64_t node_ns = 0;
    int64_t monotonic_ns = 0;
  };
  WithMonotonic NowWithMonotonic() const {
    const BracketOffset o = TightestOfReads(3, ReadClockNs, CLOCK_MONOTONIC, CLOCK_REALTIME).OffsetAtMidpoint(0);
    return {Ingest(o.ref_ns + o.offset_ns), o.ref_ns};
  }
  // A CLOCK_REALTIME instant from elsewhere (a kernel packet stamp).
  int64_t Ingest(int64_t realtime_ns) const {
    if (testbed_) return testbed_->RealtimeAt(realtime_ns);
    return skewed_ ? virtual_.Apply(realtime_ns) : realtime_ns;
  }
  // Back to the real clock, for deadlines handed to the kernel.
  int64_t ToReal(int64_t node_ns) const {
    if (testbed_) return testbed_->TrueInstantOfRealtime(node_ns);
    return skewed_ ? virtual_.Invert(node_ns) : node_ns;
  }

  // One sample of the node's REALTIME against its MONOTONIC_RAW, which no
  // clock daemon steers (clock/realtime_raw_map.h): the tightest of three
  // brackets of RAW between two REALTIME reads, at their midpoint. The test
  // bed's node clock reads both at one real instant (bracket 0); a linear
  // virtual clock is undisciplined, so its RAW is its REALTIME.
  ClockPairSample SamplePair() const {
    if (testbed_) return testbed_->PairAt(ReadClockNs(CLOCK_REALTIME));
    if (linear_) {
      const int64_t now = Now();
      return {now, now, 0, 0};
    }
    const TightestBracket b = TightestOfReads(3, ReadClockNs, CLOCK_REALTIME, CLOCK_MONOTONIC_RAW);
    const BracketOffset o = b.OffsetAtMidpoint(0);
    return {o.ref_ns, o.ref_ns + o.offset_ns, o.bracket_ns, KernelRealtimeRate()};
  }

  // The node's MONOTONIC_RAW now: the test bed node's oscillator; a linear
  // virtual clock's own reading (it is undisciplined: its RAW is itself).
  int64_t RawNow() const {
    if (testbed_) return testbed_->PairAt(ReadClockNs(CLOCK_REALTIME)).raw_ns;
    if (linear_) return Now();
    return ReadClockNs(CLOCK_MONOTONIC_RAW);
  }

  // REALTIME's rate against the clocksource (MONOTONIC_RAW) as the kernel
  // has it (a read-only adjtimex): the tick's and the frequency's, 1e-15 per
  // ns. Unknown while the kernel PLL slews a phase (STA_PLL with an offset
  // left): that changes the rate every second.
  static int64_t KernelRealtimeRate() {
    timex tx{};
    if (::adjtimex(&tx) < 0) return kRateUnknown;
    if ((tx.status & STA_PLL) && tx.offset != 0) return kRateUnknown;
    const __int128 tick = static_cast<__int128>(tx.tick - 10000) * (kFinePerNs / 10000);
    const __int128 scaled = static_cast<__int128>(tx.freq) * 1'000'000'000;
    const __int128 freq = (scaled >= 0 ? scaled + 32768 : scaled - 32768) / 65536;
    return static_cast<int64_t>(tick + freq);
  }

  const VirtualClock& virtual_clock() const { return virtual_; }
  // The test bed's node clock, if this is one (its state file is the truth).
  const TestbedNodeClock* testbed() const { return testbed_.get(); }

 private:
  VirtualClock virtual_;
  bool skewed_ = false;
  bool linear_ = false;
  std::shared_ptr<TestbedNodeClock> testbed_;
};

}  // namespace chronolink
