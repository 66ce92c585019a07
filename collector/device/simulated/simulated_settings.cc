// Parsing and validating the simulated backend's "key=value" settings (see
// the header): one table of keys with ranges, then per-device resolution
// (per-device value, else the all-devices value, else a seeded default).
#include "collector/device/simulated/simulated_settings.h"

#include <array>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <map>
#include <numbers>
#include <random>
#include <sstream>
#include <string_view>

namespace chronolink::collector {
namespace {

struct KeySpec {
  std::string_view name;
  bool per_device;
  bool integer;
  double min;
  double max;
  std::string_view help;  // what it is and its default
};

constexpr std::array<KeySpec, 17> kKeys = {{
    {"devices", false, true, 0, 64, "number of simulated GPUs (default 2)"},
    {"seed", false, true, 0, 1.8446744073709552e19, "seed of every draw (default 1)"},
    {"kernel_interval_us", false, true, 10, 1e6, "one launch per device every this many us (default 1000)"},
    {"kernel_us", false, true, 1, 1e5, "kernel duration in us (default 50; copies take half)"},
    {"streams", false, true, 1, 64, "streams per device, launches go round them (default 2)"},
    {"rate_hz", true, true, 1e3, 1e10,
     "nominal counter rate (default by ordinal: 100 MHz, 25 MHz, 1 GHz, 27 MHz)"},
    {"rate_error_ppm", true, false, -1000, 1000, "constant rate error (default: seeded in [-30, 30])"},
    {"drift_ppm_per_s", true, false, 0, 10,
     "peak wander of the rate error, ppm/s (default: seeded in [0.001, 0.01])"},
    {"wander_period_s", true, false, 1, 1e6, "period of that wander (default: seeded in [60, 300])"},
    {"bits", true, true, 8, 64, "counter width; must wrap no faster than once a second (default 48)"},
    {"wrap_in_s", true, false, 0, 1e6,
     "start the counter so it wraps this long after open (default: seeded start)"},
    {"jitter_ns", true, true, 0, 1e7, "random extra read time, split around the sample (default 500)"},
    {"latency_ns", true, true, 0, 1e7, "fixed read time, split around the sample (default 300)"},
    {"slow_read_prob", true, false, 0, 1, "probability of a slow read (default 0.01)"},
    {"slow_read_ns", true, true, 0, 1e9, "extra time of a slow read (default 200000)"},
    {"backwards_at_s", true, false, 0, 1e6,
     "step the counter backwards this long after open (default 0: never)"},
    {"backwards_by_us", true, false, 0.001, 1e9, "size of that step (default 1000)"},
}};

constexpr std::array<uint64_t, 4> kDefaultRatesHz = {100'000'000, 25'000'000, 1'000'000'000, 27'000'000};

const KeySpec* FindKey(std::string_view name) {
  for (const KeySpec& k : kKeys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// Values as given; integers keep all 64 bits (seed).
struct Given {
  double number = 0;
  uint64_t integer = 0;
};
using GivenMap = std::map<std::string_view, Given>;

struct ParsedSetting {
  const KeySpec* key = nullptr;
  int ordinal = -1;  // -1: all devices
  Given value;
};

bool ParseValue(const KeySpec& key, std::string_view text, Given* out) {
  const char* end = text.data() + text.size();
  if (key.integer) {
    auto [p, ec] = std::from_chars(text.data(), end, out->integer);
    if (ec != std::errc() || p != end) return false;
    out->number = static_cast<double>(out->integer);
  } else {
    auto [p, ec] = std::from_chars(text.data(), end, out->number);
    if (ec != std::errc() || p != end || !std::isfinite(out->number)) return false;
  }
  return out->number >= key.min && out->number <= key.max;
}

bool ParseOne(std::string_view setting, ParsedSetting* out, std::string* error) {
  const std::string quoted = "simulated setting '" + std::string(setting) + "': ";
  const size_t eq = setting.find('=');
  if (eq == std::string_view::npos) {
    *error = quoted + "not key=value";
    return false;
  }
  std::string_view name = setting.substr(0, eq);
  const std::string_view text = setting.substr(eq + 1);
  const size_t dot = name.find('.');
  if (dot != std::string_view::npos) {
    const std::string_view ordinal = name.substr(dot + 1);
    auto [p, ec] = std::from_chars(ordinal.data(), ordinal.data() + ordinal.size(), out->ordinal);
    if (ec != std::errc() || p != ordinal.data() + ordinal.size() || out->ordinal < 0) {
      *error = quoted + "'" + std::string(ordinal) + "' is not a device ordinal";
      return false;
    }
    name = name.substr(0, dot);
  }
  out->key = FindKey(name);
  if (out->key == nullptr) {
    std::string keys;
    for (const KeySpec& k : kKeys) keys += (keys.empty() ? "" : ", ") + std::string(k.name);
    *error =
        quoted + "unknown key '" + std::string(name) + "' (keys: " + keys + "; per device as key.<ordinal>)";
    return false;
  }
  if (out->ordinal >= 0 && !out->key->per_device) {
    *error = quoted + std::string(name) + " is for all devices, not per device";
    return false;
  }
  if (!ParseValue(*out->key, text, &out->value)) {
    std::ostringstream range;
    range << std::setprecision(12) << quoted << "not " << (out->key->integer ? "an integer" : "a number")
          << " in [" << out->key->min << ", " << out->key->max << "]";
    *error = range.str();
    return false;
  }
  return true;
}

// The value for one device: its own, else the all-devices one, else `fallback`.
double Pick(const GivenMap& own, const GivenMap& all, std::string_view key, double fallback) {
  if (auto it = own.find(key); it != own.end()) return it->second.number;
  if (auto it = all.find(key); it != all.end()) return it->second.number;
  return fallback;
}

SimulatedDeviceSpec ResolveDevice(uint32_t ordinal, uint64_t seed, const GivenMap& own, const GivenMap& all) {
  // A fixed sequence of draws per device, so adding a key never shifts the others.
  std::mt19937_64 rng(seed ^ (0x9E3779B97F4A7C15ULL * (ordinal + 1)));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double error_draw = unit(rng);
  const double drift_draw = unit(rng);
  const double period_draw = unit(rng);
  const double phase_draw = unit(rng);
  SimulatedDeviceSpec spec;
  spec.origin_ticks_draw = rng();
  SimulatedClockParams& c = spec.clock;
  c.rate_hz = static_cast<uint64_t>(
      Pick(own, all, "rate_hz", static_cast<double>(kDefaultRatesHz[ordinal % kDefaultRatesHz.size()])));
  c.rate_error_ppm = Pick(own, all, "rate_error_ppm", -30.0 + 60.0 * error_draw);
  c.drift_ppm_per_s = Pick(own, all, "drift_ppm_per_s", 0.001 + 0.009 * drift_draw);
  c.wander_period_s = Pick(own, all, "wander_period_s", 60.0 + 240.0 * period_draw);
  c.wander_phase_rad = 2.0 * std::numbers::pi * phase_draw;
  c.bits = static_cast<int>(Pick(own, all, "bits", 48));
  c.jitter_ns = static_cast<int64_t>(Pick(own, all, "jitter_ns", 500));
  c.latency_ns = static_cast<int64_t>(Pick(own, all, "latency_ns", 300));
  c.slow_read_prob = Pick(own, all, "slow_read_prob", 0.01);
  c.slow_read_ns = static_cast<int64_t>(Pick(own, all, "slow_read_ns", 200'000));
  spec.wrap_in_s = Pick(own, all, "wrap_in_s", 0.0);
  spec.backwards_at_s = Pick(own, all, "backwards_at_s", 0.0);
  const double backwards_by_us = Pick(own, all, "backwards_by_us", 1000.0);
  c.backwards_by_ticks =
      static_cast<uint64_t>(std::llround(backwards_by_us * 1e-6 * static_cast<double>(c.rate_hz)));
  return spec;
}

// Cross-key checks of one device: the wrap period and what must fit in it.
bool CheckDevice(uint32_t ordinal, const SimulatedDeviceSpec& spec, std::string* error) {
  const SimulatedClockParams& c = spec.clock;
  const double wrap_s = std::ldexp(1.0, c.bits) / static_cast<double>(c.rate_hz);
  std::ostringstream why;
  why << "simulated device " << ordinal << ": ";
  if (wrap_s < 1.0) {
    why << "bits=" << c.bits << " at rate_hz=" << c.rate_hz << " wraps every " << wrap_s
        << " s; choose bits/rate_hz that wrap no faster than once a second";
  } else if (spec.wrap_in_s > 0 && c.bits == 64) {
    why << "wrap_in_s needs bits below 64 (a 64-bit counter does not wrap in a run)";
  } else if (spec.wrap_in_s >= wrap_s) {
    why << "wrap_in_s=" << spec.wrap_in_s << " is not below the wrap period " << wrap_s << " s";
  } else if (spec.backwards_at_s > 0 && c.backwards_by_ticks == 0) {
    why << "backwards_by_us is below one counter tick at rate_hz=" << c.rate_hz;
  } else if (static_cast<double>(c.backwards_by_ticks) >= wrap_s * 0.5 * static_cast<double>(c.rate_hz)) {
    why << "backwards_by_us is not below half the wrap period (" << wrap_s * 0.5 << " s)";
  } else {
    return true;
  }
  *error = why.str();
  return false;
}

void ApplyGlobals(const GivenMap& all, SimulatedSettings* out) {
  if (auto it = all.find("devices"); it != all.end())
    out->devices = static_cast<uint32_t>(it->second.integer);
  if (auto it = all.find("seed"); it != all.end()) out->seed = it->second.integer;
  if (auto it = all.find("kernel_interval_us"); it != all.end()) {
    out->workload.kernel_interval_ns = static_cast<int64_t>(it->second.integer) * 1000;
  }
  if (auto it = all.find("kernel_us"); it != all.end()) {
    out->workload.kernel_ns = static_cast<int64_t>(it->second.integer) * 1000;
  }
  if (auto it = all.find("streams"); it != all.end())
    out->workload.streams = static_cast<uint32_t>(it->second.integer);
}

}  // namespace

bool ParseSimulatedSettings(std::span<const std::string> settings, SimulatedSettings* out,
                            std::string* error) {
  GivenMap all;
  std::map<int, GivenMap> per_device;
  for (const std::string& setting : settings) {
    ParsedSetting parsed;
    if (!ParseOne(setting, &parsed, error)) return false;
    // A later setting of the same key wins, as later option sources do.
    (parsed.ordinal < 0 ? all : per_device[parsed.ordinal])[parsed.key->name] = parsed.value;
  }
  *out = SimulatedSettings{};
  ApplyGlobals(all, out);
  if (!per_device.empty() && per_device.rbegin()->first >= static_cast<int>(out->devices)) {
    *error = "simulated setting for device " + std::to_string(per_device.rbegin()->first) +
             ": no such device (devices=" + std::to_string(out->devices) + ")";
    return false;
  }
  for (uint32_t i = 0; i < out->devices; ++i) {
    out->device.push_back(ResolveDevice(i, out->seed, per_device[static_cast<int>(i)], all));
    if (!CheckDevice(i, out->device.back(), error)) return false;
  }
  return true;
}

SimulatedClockParams ClockParamsFromOpen(const SimulatedDeviceSpec& spec, int64_t open_true_ns) {
  SimulatedClockParams c = spec.clock;
  c.origin_true_ns = open_true_ns;
  const uint64_t mask = c.bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << c.bits) - 1;
  if (spec.wrap_in_s > 0) {
    // Nominal ticks until the wrap; the rate error moves it by ppm of that.
    const auto ticks_to_wrap = static_cast<uint64_t>(spec.wrap_in_s * static_cast<double>(c.rate_hz));
    c.origin_ticks = (mask - ticks_to_wrap + 1) & mask;
  } else {
    // Below half the range (and 2^62), so the unwrapped count stays well inside int64.
    c.origin_ticks = spec.origin_ticks_draw & (mask >> 1) & ((uint64_t{1} << 62) - 1);
  }
  if (spec.backwards_at_s > 0) {
    c.backwards_at_true_ns = open_true_ns + std::llround(spec.backwards_at_s * 1e9);
  } else {
    c.backwards_by_ticks = 0;
  }
  return c;
}

std::string SimulatedSettingsHelp() {
  std::ostringstream help;
  help << std::setprecision(12);
  for (const KeySpec& k : kKeys) {
    help << "  " << k.name << (k.per_device ? "[.<ordinal>]" : "") << "  [" << k.min << ", " << k.max << "]  "
         << k.help << "\n";
  }
  return help.str();
}

}  // namespace chronolink::collector
