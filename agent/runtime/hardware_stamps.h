// NIC hardware timestamps: at start, for each device towards the peers,
// detect hardware timestamping and switch it on (SIOCSHWTSTAMP) where the
// driver offers it; open the device's PHC and map PHC time to the node
// clock (PTP_SYS_OFFSET_PRECISE, then EXTENDED, then basic), re-measured
// while running. Where there is none (veth, most VMs) it says so once per
// device and stays out of the way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/config/agent_config.h"
#include "clock/phc_mapping.h"

namespace chronolink {

class HardwareStamps {
 public:
  // Never fails the agent: absent hardware is reported, not fatal.
  void Start(const std::vector<std::string>& devices);
  // True when the socket should ask for RAW_HARDWARE stamps.
  bool active() const { return phc_.is_open(); }
  // Re-measures the PHC offset (rate-limited to every 100 ms).
  void Sample(int64_t now_mono_ns);
  // PHC time -> CLOCK_REALTIME, or nothing when the conversion is unsafe.
  std::optional<int64_t> ToRealtime(int64_t phc_ns);

  nlohmann::ordered_json Stats() const;

 private:
  std::vector<std::string> summaries_;
  PhcClock phc_;
  PhcMapping mapping_;
  int64_t next_sample_mono_ns_ = 0;
  uint64_t converted_ = 0;
  uint64_t refused_ = 0;
};

}  // namespace chronolink
