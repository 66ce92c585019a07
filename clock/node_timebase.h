// The node's REALTIME over its MONOTONIC_RAW as the agent follows it
// (docs/clocks.md "Disciplined clocks"): a sample of both (NodeClock::
// SamplePair: three brackets and a read-only adjtimex, about a microsecond)
// at most once per `min_interval_ns`, polled from the agent's loop, into
// the map that will convert stamps (RealtimeRawMap; not used yet) and the
// knots a trace needs (TimebaseKnots). At 1 ms: 0.1 % of a core at most.
#pragma once

#include <cstdint>

#include "clock/clock_reader.h"
#include "clock/realtime_raw_map.h"
#include "clock/timebase_knots.h"

namespace chronolink {

class NodeTimebase {
 public:
  explicit NodeTimebase(int64_t min_interval_ns = 1'000'000) : min_interval_ns_(min_interval_ns) {}

  // Takes a sample unless the last one is younger than the interval, judged
  // by the caller's CLOCK_MONOTONIC read (the loop has one each turn): a turn
  // within the interval costs a comparison, not the sample's clock reads and
  // adjtimex. True when it took one.
  bool Poll(const NodeClock& clock, int64_t monotonic_ns) {
    if (taken_ > 0 && monotonic_ns - last_monotonic_ns_ < min_interval_ns_) return false;
    last_monotonic_ns_ = monotonic_ns;
    Add(clock.SamplePair());
    return true;
  }
  void Add(const ClockPairSample& s) {
    map_.Add(s);
    knots_.Add(s);
    ++taken_;
  }

  const RealtimeRawMap& map() const { return map_; }
  const TimebaseKnots& knots() const { return knots_; }
  TimebaseKnots& knots() { return knots_; }
  uint64_t samples() const { return taken_; }

 private:
  int64_t min_interval_ns_;
  RealtimeRawMap map_;
  TimebaseKnots knots_;
  int64_t last_monotonic_ns_ = 0;
  uint64_t taken_ = 0;
};

}  // namespace chronolink
