// The HSA runtime (libhsa-runtime64), loaded with dlopen on first use: the
// system clock and the dispatch times of an application's own HSA
// dispatches. Headers from libhsa-runtime-dev at build time; nothing is
// linked, and a collector that never times an HSA dispatch never loads it.
//
// HsaDispatchClock turns a dispatch's system ticks into CLOCK_BOOTTIME ns.
// HSA says only "the HSA system clock" (hsa_ext_amd.h); ROCr's is the
// amdkfd system counter / os::ReadSystemClock, CLOCK_BOOTTIME
// (docs/gpu-clocks.md). The first use checks that here: the runtime's
// HSA_SYSTEM_INFO_TIMESTAMP, scaled by its frequency, must fall between two
// CLOCK_BOOTTIME reads around it; a runtime whose clock is another is
// refused with what it read, never converted on a wrong assumption.
//
// Environment: CHRONOLINK_HSA_LIBRARY names the library path to use.
// Not thread-safe: the ROCm backend calls it under its lock.
#pragma once

// hsa.h (ROCm 5.2, Debian 12) finds the byte order on x86 only and stops
// with #error on any other CPU, arm64 included: say it for every
// little-endian one.
#if !defined(LITTLEENDIAN_CPU) && !defined(BIGENDIAN_CPU) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LITTLEENDIAN_CPU
#endif
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include <cstdint>
#include <functional>
#include <string>

#include "collector/device/dynamic_library.h"

namespace chronolink::collector {

struct HsaApi {
  hsa_status_t (*SystemGetInfo)(hsa_system_info_t, void*) = nullptr;
  hsa_status_t (*GetDispatchTime)(hsa_agent_t, hsa_signal_t, hsa_amd_profiling_dispatch_time_t*) = nullptr;
  hsa_status_t (*StatusString)(hsa_status_t, const char**) = nullptr;

  bool Load(std::string* why);
  DynamicLibrary library;
};

// "HSA_STATUS_ERROR_INVALID_SIGNAL (4098): ..." as the runtime words it.
std::string HsaStatusText(const HsaApi& api, hsa_status_t s);

// Reads CLOCK_BOOTTIME in ns (injectable for tests).
using BootClockReader = std::function<int64_t()>;
int64_t ReadBootTimeNs();

class HsaDispatchClock {
 public:
  HsaDispatchClock(const HsaApi& api, BootClockReader boot = ReadBootTimeNs) : api_(api), boot_(std::move(boot)) {}

  // The dispatch's start and end (CLOCK_BOOTTIME ns) from its completion
  // signal; false with *why (the runtime's status, or the clock check).
  bool DispatchTime(uint64_t agent_handle, uint64_t signal_handle, int64_t* start_boot_ns, int64_t* end_boot_ns,
                    std::string* why);

 private:
  // The frequency and the BOOTTIME check, once.
  bool Check(std::string* why);
  bool SystemNs(uint64_t ticks, int64_t* ns, std::string* why) const;  // at frequency_hz_

  const HsaApi& api_;
  BootClockReader boot_;
  bool checked_ = false;
  uint64_t frequency_hz_ = 0;
  std::string check_failure_;
};

}  // namespace chronolink::collector
