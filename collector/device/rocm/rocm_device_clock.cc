// The amdkfd clock-counter read, bracketed and unwrapped.
#include "collector/device/rocm/rocm_device_clock.h"

#include <time.h>

#include <cmath>
#include <cstdlib>
#include <thread>

#include "collector/device/rocm/kfd_clock_read.h"

namespace chronolink::collector {

namespace {

constexpr int64_t kNsPerSec = 1'000'000'000;
constexpr uint64_t kRateRoundingHz = 1000;

int64_t RawNow() { return ReadClockNs(CLOCK_MONOTONIC_RAW); }

}  // namespace

uint64_t ChooseCounterRate(uint64_t hip_nominal_hz, uint64_t measured_hz, int64_t max_disagreement_ppm,
                           std::string* note) {
  const uint64_t measured_rounded = (measured_hz + kRateRoundingHz / 2) / kRateRoundingHz * kRateRoundingHz;
  if (hip_nominal_hz == 0) {
    *note = "rate measured at open (HIP reports none)";
    return measured_rounded;
  }
  const double disagreement_ppm =
      std::abs(static_cast<double>(measured_hz) / static_cast<double>(hip_nominal_hz) - 1.0) * 1e6;
  if (disagreement_ppm <= static_cast<double>(max_disagreement_ppm)) {
    *note = "nominal rate from HIP, checked at open";
    return hip_nominal_hz;
  }
  *note = "rate measured at open (HIP says " + std::to_string(hip_nominal_hz) + " Hz, " +
          std::to_string(static_cast<int64_t>(disagreement_ppm)) + " ppm away)";
  return measured_rounded;
}

RocmDeviceClock::RocmDeviceClock(const HsakmtApi& api, uint32_t node_id, uint64_t counter_hz)
    : api_(api), node_id_(node_id), counter_hz_(counter_hz), counter_(counter_hz, kKfdCounterBits) {}

bool RocmDeviceClock::CheckRead(HSAKMT_STATUS s, const HsaClockCounters& c, std::string* why) const {
  if (s != HSAKMT_STATUS_SUCCESS) {
    *why = "hsaKmtGetClockCounters(node " + std::to_string(node_id_) + "): " + HsakmtStatusText(s);
    return false;
  }
  if (!KfdGpuCounterValid(c.GPUClockCounter)) {
    *why = "amdkfd returned GPU counter " + std::to_string(c.GPUClockCounter) + " for node " +
           std::to_string(node_id_) + " (no GPU behind it, or a reset in progress)";
    return false;
  }
  return true;
}

bool RocmDeviceClock::ReadSnapshot(const NodeClock& host, SnapshotReading* out, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  KfdClockRead r;
  HsaClockCounters c{};
  r.host_before_ns = host.Now();
  r.raw_before_ns = RawNow();
  HSAKMT_STATUS s = api_.GetClockCounters(node_id_, &c);
  r.raw_after_ns = RawNow();
  r.host_after_ns = host.Now();
  r.raw_after2_ns = RawNow();
  if (!CheckRead(s, c, why)) return false;
  r.gpu_counter = c.GPUClockCounter;
  r.kernel_raw_ns = static_cast<int64_t>(c.CPUClockCounter);
  KfdBracket bracket;
  if (!BracketFromKfdRead(r, &bracket, why)) return false;
  int64_t device_ns = 0;
  if (!counter_.ExtendRead(r.gpu_counter, &device_ns, why)) return false;
  if (bracket.tightened) tightened_.fetch_add(1, std::memory_order_relaxed);
  KeepBootPair(c, device_ns, r.raw_after_ns - r.raw_before_ns);
  *out = SnapshotReading{bracket.host_before_ns, device_ns, bracket.host_after_ns};
  return true;
}

bool RocmDeviceClock::ReadDeviceNs(int64_t* device_ns, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  HsaClockCounters c{};
  const int64_t raw_before = RawNow();
  if (!CheckRead(api_.GetClockCounters(node_id_, &c), c, why)) return false;
  const int64_t raw_after = RawNow();
  if (!counter_.ExtendRead(c.GPUClockCounter, device_ns, why)) return false;
  KeepBootPair(c, *device_ns, raw_after - raw_before);
  return true;
}

void RocmDeviceClock::KeepBootPair(const HsaClockCounters& c, int64_t device_ns, int64_t error_ns) {
  const auto boot = TicksToNs(c.SystemClockCounter, c.SystemClockFrequencyHz);
  if (!boot || error_ns < 0) return;
  boot_map_.Add({*boot, device_ns, error_ns});  // a pair out of order is skipped
}

bool RocmDeviceClock::BootToDevice(int64_t boot_ns, int64_t* device_ns, int64_t* error_ns, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  return boot_map_.ToDevice(boot_ns, device_ns, error_ns, why);
}

bool MeasureKfdCounterRate(const HsakmtApi& api, uint32_t node_id, int64_t gap_ns, uint64_t* hz,
                           std::string* why) {
  HsaClockCounters a{}, b{};
  HSAKMT_STATUS s = api.GetClockCounters(node_id, &a);
  if (s == HSAKMT_STATUS_SUCCESS) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(gap_ns));
    s = api.GetClockCounters(node_id, &b);
  }
  if (s != HSAKMT_STATUS_SUCCESS) {
    *why = "hsaKmtGetClockCounters(node " + std::to_string(node_id) + "): " + HsakmtStatusText(s);
    return false;
  }
  // Both counters come from the same ioctl, microseconds apart: the ratio
  // over tens of ms is good to ~100 ppm, plenty to check a nominal rate.
  const int64_t cpu_span = static_cast<int64_t>(b.CPUClockCounter - a.CPUClockCounter);
  const uint64_t gpu_span = b.GPUClockCounter - a.GPUClockCounter;
  if (!KfdGpuCounterValid(a.GPUClockCounter) || !KfdGpuCounterValid(b.GPUClockCounter) || cpu_span <= 0 ||
      gpu_span == 0 || gpu_span > (uint64_t{1} << 40)) {
    *why = "the GPU counter of node " + std::to_string(node_id) + " did not advance sanely over " +
           std::to_string(gap_ns / 1'000'000) + " ms (" + std::to_string(a.GPUClockCounter) + " -> " +
           std::to_string(b.GPUClockCounter) + ")";
    return false;
  }
  *hz = static_cast<uint64_t>(static_cast<double>(gpu_span) * kNsPerSec / static_cast<double>(cpu_span));
  return true;
}

}  // namespace chronolink::collector
