// A GPU's raw counter -> ClockDomain::kGpuDevice: unwrapped across the
// counter's width and scaled to ns at its nominal rate, in integers (128-bit
// products, no double). Backends feed every raw value they read or receive
// through one DeviceCounter per device.
#pragma once

#include <cstdint>
#include <string>

namespace chronolink::collector {

class DeviceCounter {
 public:
  // hz > 0; bits in 8..64.
  DeviceCounter(uint64_t hz, int bits);

  // A fresh read of the counter (snapshot): must be at or after the newest
  // read, modulo wrap. A value that lies behind it (by less than half the
  // wrap range) is the counter going backwards: false with *why, and the
  // state is unchanged.
  bool ExtendRead(uint64_t raw, int64_t* device_ns, std::string* why);

  // A raw value from an activity record, which may lie before or after the
  // newest read: placed at the unwrapped value nearest to the newest read.
  // False before any read, or when it would overflow.
  bool ExtendNear(uint64_t raw, int64_t* device_ns, std::string* why) const;

  uint64_t hz() const { return hz_; }
  int bits() const { return bits_; }
  uint64_t wraps() const { return wraps_; }

 private:
  uint64_t hz_;
  int bits_;
  bool have_read_ = false;
  uint64_t last_raw_ = 0;
  __int128 last_ticks_ = 0;  // unwrapped
  uint64_t wraps_ = 0;
};

}  // namespace chronolink::collector
