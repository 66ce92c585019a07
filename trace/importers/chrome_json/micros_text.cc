#include "trace/importers/chrome_json/micros_text.h"

#include <cstdlib>
#include <limits>
#include <string>

namespace chronolink::trace {
namespace {

using u128 = unsigned __int128;
using i128 = __int128;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The pieces of a JSON number: its digits without the point (leading
// zeros dropped), and the power of ten they are scaled by.
struct Decimal {
  bool negative = false;
  std::string digits;  // significant digits, no leading zeros ("" for zero)
  int64_t exponent = 0;  // value = digits * 10^exponent
};

bool SplitNumber(std::string_view s, Decimal* d) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') {
    d->negative = true;
    ++i;
  }
  auto take_digits = [&](int64_t* count) {
    const size_t start = i;
    while (i < s.size() && IsDigit(s[i])) {
      if (!d->digits.empty() || s[i] != '0') d->digits.push_back(s[i]);
      ++i;
    }
    *count = static_cast<int64_t>(i - start);
    return i > start;
  };
  int64_t int_digits = 0;
  if (!take_digits(&int_digits)) return false;
  int64_t frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!take_digits(&frac_digits)) return false;
  }
  int64_t exp = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) exp_negative = s[i++] == '-';
    if (i >= s.size() || !IsDigit(s[i])) return false;
    for (; i < s.size() && IsDigit(s[i]); ++i) {
      // Beyond 10^6 the value is 0 or overflows whatever the digits are.
      if (exp < 1'000'000) exp = exp * 10 + (s[i] - '0');
    }
    if (exp_negative) exp = -exp;
  }
  if (i != s.size()) return false;
  d->exponent = exp - frac_digits;
  return true;
}

// Magnitude in picoseconds, rounded half away from zero; false when it
// cannot fit int64 nanoseconds.
bool MagnitudePs(const Decimal& d, u128* ps) {
  *ps = 0;
  if (d.digits.empty()) return true;
  const int64_t shift = d.exponent + 6;  // µs -> ps
  const int64_t len = static_cast<int64_t>(d.digits.size());
  const int64_t keep = shift >= 0 ? len : len + shift;  // digits above a picosecond
  // int64 ns is 19 digits, plus 3 for ps: anything longer overflows.
  if (keep + (shift > 0 ? shift : 0) > 23) return false;
  for (int64_t k = 0; k < keep; ++k) *ps = *ps * 10 + static_cast<unsigned>(d.digits[k] - '0');
  for (int64_t k = 0; k < shift; ++k) *ps *= 10;
  if (keep >= 0 && keep < len && d.digits[keep] >= '5') *ps += 1;
  return true;
}

bool FromSignedPs(i128 total, NsPs* out) {
  i128 ns = total / 1000;
  i128 rem = total % 1000;
  if (rem < 0) {
    rem += 1000;
    ns -= 1;
  }
  if (ns > std::numeric_limits<int64_t>::max() || ns < std::numeric_limits<int64_t>::min()) {
    return false;
  }
  out->ns = static_cast<int64_t>(ns);
  out->ps = static_cast<int32_t>(rem);
  return true;
}

}  // namespace

MicrosParse ParseMicrosText(std::string_view text, NsPs* out) {
  Decimal d;
  if (!SplitNumber(text, &d)) return MicrosParse::kNotANumber;
  u128 mag = 0;
  if (!MagnitudePs(d, &mag)) return MicrosParse::kOverflow;
  const i128 total = d.negative ? -static_cast<i128>(mag) : static_cast<i128>(mag);
  return FromSignedPs(total, out) ? MicrosParse::kOk : MicrosParse::kOverflow;
}

bool MicrosIntToNs(int64_t micros, NsPs* out) {
  out->ps = 0;
  return !__builtin_mul_overflow(micros, int64_t{1000}, &out->ns);
}

bool MicrosUintToNs(uint64_t micros, NsPs* out) {
  if (micros > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  return MicrosIntToNs(static_cast<int64_t>(micros), out);
}

}  // namespace chronolink::trace
