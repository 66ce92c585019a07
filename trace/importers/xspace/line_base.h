// Decides what an XSpace's line timestamps are relative to. Producers write
// either absolute epoch ns or ns since the session start (JAX/TensorFlow
// normalise to the `Task Environment` plane's `profile_start_time`), and the
// file does not say which. The rule (docs/xspace.md, "Relative or absolute"):
//
//  * A non-empty line (one with events) looks absolute when its timestamp_ns
//    is >= kAbsoluteLineThresholdNs (1e17 ns, i.e. after 1973), or when a
//    start time S >= 1 day exists and |timestamp_ns - S| <= 1 day (a clock
//    other than the epoch, e.g. a test clock, stamped in absolute terms).
//  * Otherwise it looks relative.
//  * All non-empty lines absolute -> base 0. All relative -> base S when S
//    exists, else base unknown (line_base_known = false). No non-empty
//    line -> base S when it exists, else 0. Mixed -> an error naming one
//    line of each kind: one base per host cannot describe it.
//
// `profile_start_time` is read as uint64 (or a non-negative int64); one
// above INT64_MAX is an error.
//
// Pure function of the message; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "proto/xplane.pb.h"

namespace chronolink::trace {

inline constexpr int64_t kAbsoluteLineThresholdNs = 100'000'000'000'000'000;  // 1e17
inline constexpr int64_t kOneDayNs = 86'400'000'000'000;

struct LineBase {
  int64_t base_ns = 0;
  bool known = true;
  bool relative = false;  // line timestamps are offsets from base_ns (or from an unknown base)
};

// Returns false with `*error` when the lines contradict each other or the
// start time does not fit int64.
bool DetectLineBase(const xspace::XSpace& space, LineBase* out, std::string* error);

// The same rule over what it reads: the start time as stored, and the
// timestamp_ns of every non-empty line in file order (the wire-level span
// scan feeds it without a model). On a contradiction `*first_absolute` and
// `*first_relative` index the first line of each kind.
enum class LineBaseVerdict { kOk, kMixed, kStartTooLarge };
LineBaseVerdict DecideLineBase(std::optional<uint64_t> start, std::span<const int64_t> nonempty_line_ts,
                               LineBase* out, size_t* first_absolute, size_t* first_relative);

}  // namespace chronolink::trace
