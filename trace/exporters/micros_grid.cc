#include "trace/exporters/micros_grid.h"

namespace chronolink::trace {
namespace {

using i128 = __int128;

constexpr i128 kPsPerMicro = 1'000'000;

i128 FloorDiv(i128 a, i128 b) {
  i128 q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

i128 Abs(i128 v) { return v < 0 ? -v : v; }

}  // namespace

std::optional<int64_t> GridTicks(i128 ps, int exponent) {
  // ticks = ps · 2^e / 10^6, rounded half up: floor((2·ps·2^e + 10^6) / (2·10^6)).
  constexpr i128 kLimit = i128{1} << 100;  // far past any int64 ns instant: no overflow below
  if (Abs(ps) >= kLimit || exponent > kFinestGridExponent || exponent < kCoarsestGridExponent) return std::nullopt;
  const i128 num = exponent >= 0 ? ps * (i128{1} << exponent) : ps;
  const i128 den = exponent >= 0 ? kPsPerMicro : kPsPerMicro * (i128{1} << -exponent);
  const i128 ticks = FloorDiv(2 * num + den, 2 * den);
  if (Abs(ticks) >= kExactDoubleTicks) return std::nullopt;
  return static_cast<int64_t>(ticks);
}

int GridExponentFor(i128 max_abs_ps) {
  int exponent = kFinestGridExponent;
  while (!GridTicks(Abs(max_abs_ps), exponent) && exponent > kCoarsestGridExponent) --exponent;
  return exponent;
}

void AppendGridMicros(int64_t ticks, int exponent, std::string* out) {
  uint64_t mag = ticks < 0 ? 0 - static_cast<uint64_t>(ticks) : static_cast<uint64_t>(ticks);
  if (ticks < 0) out->push_back('-');
  if (exponent <= 0) {  // a coarse grid: whole microseconds (below 2^63: see the header)
    out->append(std::to_string(mag << -exponent));
    return;
  }
  const uint64_t mask = (uint64_t{1} << exponent) - 1;
  out->append(std::to_string(mag >> exponent));
  uint64_t frac = mag & mask;
  if (frac == 0) return;
  // frac / 2^e = frac · 5^e / 10^e: e decimal digits, exactly.
  uint64_t five_e = 1;
  for (int i = 0; i < exponent; ++i) five_e *= 5;
  unsigned __int128 digits = static_cast<unsigned __int128>(frac) * five_e;
  char buf[32];
  for (int i = exponent - 1; i >= 0; --i) {
    buf[i] = static_cast<char>('0' + static_cast<int>(digits % 10));
    digits /= 10;
  }
  int len = exponent;
  while (buf[len - 1] == '0') --len;
  out->push_back('.');
  out->append(buf, static_cast<size_t>(len));
}

}  // namespace chronolink::trace
