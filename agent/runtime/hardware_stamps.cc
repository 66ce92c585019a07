#include "agent/runtime/hardware_stamps.h"

#include <spdlog/spdlog.h>

#include "agent/capture/hw_timestamping.h"
#include "clock/clock_reader.h"

namespace chronolink {

namespace {
constexpr int64_t kSampleEveryNs = 100'000'000;
constexpr int64_t kMaxErrorNs = 2'000;  // as for eBPF stamps: a loose stamp is worse than none
}  // namespace

void HardwareStamps::Start(const std::vector<std::string>& devices) {
  for (const std::string& dev : devices) {
    HwTimestampingStatus st = DetectHwTimestamping(dev);
    if (st.supported) st = EnableHwTimestamping(dev);
    summaries_.push_back(st.summary);
    spdlog::info("{}", st.summary);
    if (!st.enabled || st.phc_index < 0 || phc_.is_open()) continue;
    std::string error;
    if (!phc_.Open(std::to_string(st.phc_index), &error)) {
      spdlog::warn("{}: hardware stamps on, but its clock is unusable: {}", dev, error);
      continue;
    }
    Sample(ReadClockNs(CLOCK_MONOTONIC));
  }
}

void HardwareStamps::Sample(int64_t now_mono_ns) {
  if (!phc_.is_open() || now_mono_ns < next_sample_mono_ns_) return;
  next_sample_mono_ns_ = now_mono_ns + kSampleEveryNs;
  PhcOffset offset;
  std::string error;
  if (phc_.Measure(&offset, &error)) {
    mapping_.Add(offset);
  } else {
    spdlog::warn("PHC measurement failed: {}", error);
  }
}

std::optional<int64_t> HardwareStamps::ToRealtime(int64_t phc_ns) {
  const ConvertedStamp c = mapping_.HwToRealtime(phc_ns);
  if (!c.ok || c.error_ns > kMaxErrorNs) {
    ++refused_;
    return std::nullopt;
  }
  ++converted_;
  return c.realtime_ns;
}

nlohmann::ordered_json HardwareStamps::Stats() const {
  nlohmann::ordered_json j;
  j["devices"] = summaries_;
  j["active"] = active();
  j["converted"] = converted_;
  j["refused"] = refused_;
  return j;
}

}  // namespace chronolink
