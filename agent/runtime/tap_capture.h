// The agent's use of the eBPF tap: decides whether it runs (--bpf, the
// build, the privileges), finds the devices, converts each record's
// CLOCK_MONOTONIC stamp to the node clock with its error bound, and feeds
// the probe engine each record with its hook, packet key and MAC (the
// engine decides what a record may stamp: docs/bpf-tap.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/capture/bpf_tap.h"
#include "agent/config/agent_config.h"
#include "clock/fit_clock.h"
#include "clock/kernel_clock_mapping.h"

namespace chronolink {

class ProbeEngine;

class TapCapture {
 public:
  // Records whose conversion to REALTIME is less certain than this are
  // dropped (counted): a loose stamp is worse than the next-best source.
  static constexpr int64_t kMaxConversionErrorNs = 2'000;

  // Starts the tap as the configuration asks. False (with *error) only when
  // --bpf on and the tap cannot run; in auto mode a missing tap is logged
  // once and the agent goes on with SO_TIMESTAMPING.
  bool Start(const AgentConfig& config, std::string* error);
  bool running() const { return tap_.is_open(); }
  // The devices towards the peers (configured or from the routes), found
  // whether or not the tap runs.
  const std::vector<std::string>& devices() const { return devices_; }

  // Measures the clock offsets (rate-limited) and hands every queued record
  // to the engine. Cheap: no system call when the ring is empty.
  void Pump(ProbeEngine& engine, const FitClock& clock);
  void Close() { tap_.Close(); }

  nlohmann::ordered_json Stats() const;

 private:
  BpfTap tap_;
  KernelClockMapping mapping_;
  std::vector<std::string> devices_;
  std::string state_ = "off";
  uint64_t records_ = 0;
  uint64_t unparsable_ = 0;
  uint64_t conversion_failed_ = 0;
  uint64_t conversion_too_loose_ = 0;
  int64_t max_conversion_error_ns_ = 0;
};

}  // namespace chronolink
