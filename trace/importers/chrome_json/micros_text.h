// Chrome trace `ts` / `dur` values are microseconds written as JSON numbers
// with fractional digits ("1699999999999999.123"). A double holds 15-16
// significant digits, so an epoch value read through a double loses its
// sub-microsecond part; these functions convert the number's own text to
// integer nanoseconds plus a picosecond remainder with no floating point
// anywhere. (Writing is trace/exporters/micros_grid.h: times on a binary
// grid that a reader's doubles hold exactly.)
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace chronolink::trace {

// A signed duration or instant in ns + ps, ps in [0, 1000): the value is
// ns * 1000 + ps picoseconds (so -1.5 ns is {-2, 500}).
struct NsPs {
  int64_t ns = 0;
  int32_t ps = 0;
  friend bool operator==(const NsPs&, const NsPs&) = default;
};

enum class MicrosParse {
  kOk,
  kNotANumber,  // not JSON number syntax
  kOverflow,    // does not fit int64 nanoseconds
};

// Parses a JSON number's text (optional '-', digits, optional fraction,
// optional exponent) as microseconds. Digits below a picosecond are rounded
// to the nearest picosecond (halves away from zero).
MicrosParse ParseMicrosText(std::string_view text, NsPs* out);

// Whole microseconds (a JSON integer) to ns; false on overflow.
bool MicrosIntToNs(int64_t micros, NsPs* out);
bool MicrosUintToNs(uint64_t micros, NsPs* out);

}  // namespace chronolink::trace
