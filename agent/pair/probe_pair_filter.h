// Coded-probe purity: a pair is pure when its receive spacing equals its
// transmit spacing within a tolerance, i.e. neither packet queued behind
// something the other did not. Only pure pairs reach the estimator.
#pragma once

#include <cstdint>
#include <vector>

#include "agent/pair/offset_bound.h"
#include "agent/pair/probe_tuple.h"

namespace chronolink {

class ProbePairFilter {
 public:
  explicit ProbePairFilter(int64_t tolerance_ns) : tolerance_ns_(tolerance_ns) {}

  bool IsPure(const ProbeStamp tx[2], const ProbeStamp rx[2]) const;

  // Appends the bounds of the pure halves of `t`: an upper bound from a pure
  // forward pair, a lower bound from a pure reverse pair.
  void Extract(const PtPrTuple& t, std::vector<OffsetBound>* upper,
               std::vector<OffsetBound>* lower) const;

  int64_t tolerance_ns() const { return tolerance_ns_; }

 private:
  int64_t tolerance_ns_;
};

}  // namespace chronolink
