// DeviceCounter: a GPU's raw counter ticks -> unwrapped ns (kGpuDevice) at
// the nominal rate. Integer arithmetic only (128-bit), so a counter read
// after days converts as exactly as one read after a second.
#include "collector/clock/device_counter.h"

#include <limits>

namespace chronolink::collector {

namespace {

using Wide = __int128;

constexpr Wide kNsPerSecond = 1'000'000'000;

// 2^bits as a 128-bit value (bits in 1..64).
Wide Modulus(int bits) { return static_cast<Wide>(1) << bits; }

// floor(a / b) for b > 0: negative tick counts (an activity record from
// before the first wrap) must round towards -inf to stay monotonic.
Wide FloorDiv(Wide a, Wide b) {
  Wide q = a / b;
  if ((a % b) != 0 && a < 0) --q;
  return q;
}

bool ConfigValid(uint64_t hz, int bits, std::string* why) {
  if (hz == 0) {
    if (why != nullptr) *why = "device counter: rate is 0 Hz";
    return false;
  }
  if (bits < 8 || bits > 64) {
    if (why != nullptr)
      *why = "device counter: width " + std::to_string(bits) + " bits (need 8..64)";
    return false;
  }
  return true;
}

bool RawFits(uint64_t raw, int bits, std::string* why) {
  if (bits == 64 || static_cast<Wide>(raw) < Modulus(bits)) return true;
  if (why != nullptr) {
    *why = "device counter: raw value " + std::to_string(raw) + " does not fit in " +
           std::to_string(bits) + " bits";
  }
  return false;
}

// Unwrapped ticks -> ns at hz, floored; false when outside int64.
bool TicksToNs(Wide ticks, uint64_t hz, int64_t* ns, std::string* why) {
  // |ticks| < 2^90 keeps ticks * 1e9 (< 2^30) inside 128 bits.
  constexpr Wide kLimit = static_cast<Wide>(1) << 90;
  if (ticks < -kLimit || ticks > kLimit) {
    if (why != nullptr) *why = "device counter: unwrapped tick count out of range";
    return false;
  }
  const Wide value = FloorDiv(ticks * kNsPerSecond, static_cast<Wide>(hz));
  if (value > std::numeric_limits<int64_t>::max() || value < std::numeric_limits<int64_t>::min()) {
    if (why != nullptr) *why = "device counter: time in ns does not fit in 64 bits";
    return false;
  }
  *ns = static_cast<int64_t>(value);
  return true;
}

// raw - last modulo 2^bits, in [0, 2^bits).
Wide ForwardDistance(uint64_t raw, uint64_t last, int bits) {
  const Wide m = Modulus(bits);
  Wide d = static_cast<Wide>(raw) - static_cast<Wide>(last);
  if (d < 0) d += m;
  return d;
}

}  // namespace

DeviceCounter::DeviceCounter(uint64_t hz, int bits) : hz_(hz), bits_(bits) {}

bool DeviceCounter::ExtendRead(uint64_t raw, int64_t* device_ns, std::string* why) {
  if (!ConfigValid(hz_, bits_, why) || !RawFits(raw, bits_, why)) return false;
  if (!have_read_) {
    int64_t ns = 0;
    if (!TicksToNs(static_cast<Wide>(raw), hz_, &ns, why)) return false;
    have_read_ = true;
    last_raw_ = raw;
    last_ticks_ = raw;
    *device_ns = ns;
    return true;
  }
  // Reads come at least every half wrap period (the caller's contract): a
  // forward distance of half the range or more is the counter going back.
  const Wide forward = ForwardDistance(raw, last_raw_, bits_);
  const Wide half = Modulus(bits_) / 2;
  if (forward >= half) {
    if (why != nullptr) {
      *why = "device counter went backwards by " +
             std::to_string(static_cast<uint64_t>(Modulus(bits_) - forward)) + " ticks (raw " +
             std::to_string(raw) + " after " + std::to_string(last_raw_) + ")";
    }
    return false;
  }
  const Wide ticks = last_ticks_ + forward;
  int64_t ns = 0;
  if (!TicksToNs(ticks, hz_, &ns, why)) return false;
  if (raw < last_raw_) ++wraps_;
  last_raw_ = raw;
  last_ticks_ = ticks;
  *device_ns = ns;
  return true;
}

bool DeviceCounter::ExtendNear(uint64_t raw, int64_t* device_ns, std::string* why) const {
  if (!ConfigValid(hz_, bits_, why) || !RawFits(raw, bits_, why)) return false;
  if (!have_read_) {
    if (why != nullptr) *why = "device counter: no read yet to place an activity time against";
    return false;
  }
  // The unwrapped value nearest the newest read: within half the range on
  // either side.
  Wide delta = ForwardDistance(raw, last_raw_, bits_);
  if (delta >= Modulus(bits_) / 2) delta -= Modulus(bits_);
  return TicksToNs(last_ticks_ + delta, hz_, device_ns, why);
}

}  // namespace chronolink::collector
