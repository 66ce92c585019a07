// The simulated backend's settings: BackendOptions::settings "key=value"
// strings -> per-device clock models and a workload. A model key may be
// given for all devices ("rate_error_ppm=5") or for one ("rate_error_ppm.1=-20",
// which wins); what is not given is drawn from the seed and the ordinal, so
// devices differ by default and a seed replays the same devices. Unknown
// keys, bad numbers, values out of range and ordinals past `devices` are
// errors, each named. Pure: the origin (true time at Open) comes later.
//
// Keys (ranges in SimulatedSettingsHelp()):
//   all devices: devices, seed, kernel_interval_us, kernel_us, streams
//   per device:  rate_hz, rate_error_ppm, drift_ppm_per_s, wander_period_s,
//                bits, wrap_in_s, jitter_ns, latency_ns, slow_read_prob,
//                slow_read_ns, backwards_at_s, backwards_by_us
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "collector/device/simulated/simulated_clock.h"

namespace chronolink::collector {

// One device's model, before the origin is known.
struct SimulatedDeviceSpec {
  SimulatedClockParams clock;      // origin_true_ns and backwards_at_true_ns not yet set
  double wrap_in_s = 0.0;          // > 0: origin_ticks chosen so the counter wraps this long after Open
  double backwards_at_s = 0.0;     // > 0: the backwards step this long after Open
  uint64_t origin_ticks_draw = 0;  // seeded start value when wrap_in_s is 0
};

struct SimulatedWorkloadSpec {
  int64_t kernel_interval_ns = 1'000'000;  // one launch per device per interval
  int64_t kernel_ns = 50'000;              // a kernel's nominal duration
  uint32_t streams = 2;
};

struct SimulatedSettings {
  uint32_t devices = 2;
  uint64_t seed = 1;
  std::vector<SimulatedDeviceSpec> device;  // devices entries
  SimulatedWorkloadSpec workload;
};

bool ParseSimulatedSettings(std::span<const std::string> settings, SimulatedSettings* out,
                            std::string* error);

// The device's clock with its origin at real CLOCK_REALTIME `open_true_ns`.
SimulatedClockParams ClockParamsFromOpen(const SimulatedDeviceSpec& spec, int64_t open_true_ns);

// One line per key with its range and default, for --help and errors.
std::string SimulatedSettingsHelp();

}  // namespace chronolink::collector
