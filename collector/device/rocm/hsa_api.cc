// dlopen of the HSA runtime, and dispatch times onto CLOCK_BOOTTIME.
#include "collector/device/rocm/hsa_api.h"

#include <time.h>

#include "collector/device/rocm/boot_device_map.h"

namespace chronolink::collector {
namespace {

LibrarySpec HsaSpec() {
  return {"libhsa-runtime64 (the HSA runtime)",
          "CHRONOLINK_HSA_LIBRARY",
          {"libhsa-runtime64.so.1", "libhsa-runtime64.so", "/opt/rocm/lib/libhsa-runtime64.so.1"},
          "apt-get install libhsa-runtime64-1"};
}

// How far the runtime's system clock may sit outside the BOOTTIME reads
// around it and still be BOOTTIME: its tick scaling rounds, and ROCr may
// read it through its own interpolation.
constexpr int64_t kClockCheckSlackNs = 100'000;

}  // namespace

bool HsaApi::Load(std::string* why) {
  if (!library.loaded() && !library.Open(HsaSpec(), why)) return false;
  return library.Resolve({{"hsa_system_get_info", SlotOf(&SystemGetInfo)},
                          {"hsa_amd_profiling_get_dispatch_time", SlotOf(&GetDispatchTime)},
                          {"hsa_status_string", SlotOf(&StatusString)}},
                         why);
}

std::string HsaStatusText(const HsaApi& api, hsa_status_t s) {
  const char* text = nullptr;
  std::string out = "status " + std::to_string(static_cast<int>(s));
  if (api.StatusString != nullptr && api.StatusString(s, &text) == HSA_STATUS_SUCCESS && text != nullptr) {
    out += ": " + std::string(text);
  }
  return out;
}

int64_t ReadBootTimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool HsaDispatchClock::SystemNs(uint64_t ticks, int64_t* ns, std::string* why) const {
  const auto scaled = TicksToNs(ticks, frequency_hz_);
  if (!scaled) {
    *why = "HSA system time " + std::to_string(ticks) + " ticks does not fit int64 ns";
    return false;
  }
  *ns = *scaled;
  return true;
}

bool HsaDispatchClock::Check(std::string* why) {
  if (checked_) {
    if (!check_failure_.empty()) *why = check_failure_;
    return check_failure_.empty();
  }
  checked_ = true;
  hsa_status_t s = api_.SystemGetInfo(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &frequency_hz_);
  if (s != HSA_STATUS_SUCCESS || frequency_hz_ == 0) {
    check_failure_ = "hsa_system_get_info(TIMESTAMP_FREQUENCY): " +
                     (s != HSA_STATUS_SUCCESS ? HsaStatusText(api_, s) : std::string("0 Hz"));
  } else {
    uint64_t ticks = 0;
    const int64_t before = boot_();
    s = api_.SystemGetInfo(HSA_SYSTEM_INFO_TIMESTAMP, &ticks);
    const int64_t after = boot_();
    int64_t now = 0;
    std::string scale_why;
    if (s != HSA_STATUS_SUCCESS) {
      check_failure_ = "hsa_system_get_info(TIMESTAMP): " + HsaStatusText(api_, s);
    } else if (!SystemNs(ticks, &now, &scale_why)) {
      check_failure_ = scale_why;
    } else if (now < before - kClockCheckSlackNs || now > after + kClockCheckSlackNs) {
      check_failure_ = "the HSA system clock is not CLOCK_BOOTTIME here (it read " + std::to_string(now) +
                       " ns between BOOTTIME reads " + std::to_string(before) + " and " + std::to_string(after) +
                       "): dispatch times are not converted";
    }
  }
  if (!check_failure_.empty()) *why = check_failure_;
  return check_failure_.empty();
}

bool HsaDispatchClock::DispatchTime(uint64_t agent_handle, uint64_t signal_handle, int64_t* start_boot_ns,
                                    int64_t* end_boot_ns, std::string* why) {
  if (!Check(why)) return false;
  hsa_amd_profiling_dispatch_time_t t{};
  const hsa_status_t s = api_.GetDispatchTime(hsa_agent_t{agent_handle}, hsa_signal_t{signal_handle}, &t);
  if (s != HSA_STATUS_SUCCESS) {
    *why = "hsa_amd_profiling_get_dispatch_time: " + HsaStatusText(api_, s) +
           " (was profiling enabled on the queue, and has the signal completed?)";
    return false;
  }
  if (t.end < t.start) {
    *why = "hsa_amd_profiling_get_dispatch_time: end " + std::to_string(t.end) + " before start " +
           std::to_string(t.start);
    return false;
  }
  return SystemNs(t.start, start_boot_ns, why) && SystemNs(t.end, end_boot_ns, why);
}

}  // namespace chronolink::collector
