// The happens-before check and the skew figures on matched instances, in
// exact integer picoseconds. A collective instance whose every rank waits
// for every other (MatchedInstance::checked) is violated when some
// participant ended before another started: min end < max start by more
// than the tolerance. A transfer is violated when the receive ended before
// the send started. Skews are max - min of starts and of ends over an
// instance's participants. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "trace/validate/collective_matcher.h"
#include "trace/validate/validation_result.h"

namespace chronolink::trace {

// The display name of an event's participant ("host-a", "host-a /device:GPU:0").
using ParticipantNamer = std::function<std::string(const CollectiveEvent&)>;

std::optional<Violation> CheckInstance(const MatchedInstance& instance, int64_t tolerance_ps,
                                       const ParticipantNamer& name);
std::optional<Violation> CheckTransfer(const MatchedTransfer& transfer, int64_t tolerance_ps,
                                       const ParticipantNamer& name);

struct InstanceSkew {
  int64_t start_ps = 0;
  int64_t end_ps = 0;
};
// Saturates at INT64_MAX when a difference does not fit.
InstanceSkew SkewOf(const MatchedInstance& instance);

// Nearest-rank percentiles of `values` (sorted in place).
SkewStats Summarise(std::vector<int64_t>& values);

}  // namespace chronolink::trace
