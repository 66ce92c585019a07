// Chrome trace times that a reader which parses doubles reads exactly.
//
// Every viewer of the Chrome trace-event format (chrome://tracing,
// Perfetto's JSON importer, speedscope, pandas) parses `ts` and `dur` as
// doubles. Written as decimal microseconds (1234.567), a value is rounded
// to the nearest double, and `ts + dur` of a parent and a child that end
// at the same instant can differ in the last bit: the child then ends
// after its parent, and the viewer breaks the nesting. So times are written
// on a binary grid instead: multiples of 2^-e µs (e = 10 by default, about
// 0.98 ns), written exactly in decimal (2^-10 = 0.0009765625). Below 2^53
// grid ticks every such value is a double exactly, and so is the sum of two
// of them: a reader's `ts + dur` is the exact end, and equal instants stay
// equal. An instant is rounded to the nearest tick (halves up), which keeps
// order: what starts or ends no later than another still does.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace chronolink::trace {

// The finest grid: 2^-10 µs. Its 2^53 ticks reach ±101.8 days.
inline constexpr int kFinestGridExponent = 10;
// The coarsest: 2^10 µs ticks, far past any int64-ns instant's need (2^53
// ticks of 2^-1 µs already reach past int64 ns), and ticks · 2^10 < 2^63.
inline constexpr int kCoarsestGridExponent = -10;
// A double holds every integer up to 2^53 exactly.
inline constexpr int64_t kExactDoubleTicks = int64_t{1} << 53;

// `ps` picoseconds as a count of 2^-exponent µs ticks, rounded to the
// nearest (halves up); nullopt when its magnitude reaches 2^53 ticks.
std::optional<int64_t> GridTicks(__int128 ps, int exponent);

// The finest grid, exponent at most kFinestGridExponent, on which every
// instant within ±max_abs_ps picoseconds (starts and ends alike) is below
// 2^53 ticks.
int GridExponentFor(__int128 max_abs_ps);

// ticks · 2^-exponent µs as exact decimal text: "-12.5", "3", "0.0009765625".
void AppendGridMicros(int64_t ticks, int exponent, std::string* out);

}  // namespace chronolink::trace
