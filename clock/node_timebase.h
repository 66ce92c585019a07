// The node's REALTIME over its MONOTONIC_RAW as the agent follows it
// (docs/clocks.md "Disciplined clocks"): a sample of both (NodeClock::
// SamplePair, ~100 ns) at most once per `min_interval_ns`, polled from the
// agent's loop, into the map that converts stamps (RealtimeRawMap) and the
// knots a trace needs (TimebaseKnots). 1 ms keeps a rate change of 1.6 ppm
// within 0.4 ns of the polyline, for 0.01 % of a core.
#pragma once

#include <cstdint>

#include "clock/clock_reader.h"
#include "clock/realtime_raw_map.h"
#include "clock/timebase_knots.h"

namespace chronolink {

class NodeTimebase {
 public:
  explicit NodeTimebase(int64_t min_interval_ns = 1'000'000) : min_interval_ns_(min_interval_ns) {}

  // Takes a sample unless the last one is younger than the interval (by
  // RAW); true when it took one.
  bool Poll(const NodeClock& clock) {
    const ClockPairSample s = clock.SamplePair();
    if (taken_ > 0 && s.raw_ns - last_raw_ns_ < min_interval_ns_) return false;
    Add(s);
    return true;
  }
  void Add(const ClockPairSample& s) {
    map_.Add(s);
    knots_.Add(s);
    last_raw_ns_ = s.raw_ns;
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
  int64_t last_raw_ns_ = 0;
  uint64_t taken_ = 0;
};

}  // namespace chronolink
