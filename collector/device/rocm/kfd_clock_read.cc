// The host bracket of an amdkfd clock-counter read (kfd_clock_read.h).
#include "collector/device/rocm/kfd_clock_read.h"

namespace chronolink::collector {

namespace {

constexpr int64_t kPpmDenominator = 1'000'000;

// Ceil of span * ppm / 1e6 for span >= 0.
int64_t RateAllowance(int64_t span_ns, int64_t ppm) {
  return (span_ns * ppm + kPpmDenominator - 1) / kPpmDenominator;
}

}  // namespace

bool KfdGpuCounterValid(uint64_t counter) { return counter != 0 && counter != ~uint64_t{0}; }

bool BracketFromKfdRead(const KfdClockRead& r, KfdBracket* out, std::string* why) {
  if (r.host_after_ns < r.host_before_ns) {
    *why = "host clock went backwards across the clock-counter read";
    return false;
  }
  if (r.raw_after_ns < r.raw_before_ns || r.raw_after2_ns < r.raw_after_ns) {
    *why = "CLOCK_MONOTONIC_RAW reads out of order around the clock-counter read";
    return false;
  }
  out->host_before_ns = r.host_before_ns;
  out->host_after_ns = r.host_after_ns;
  out->tightened = false;
  if (r.kernel_raw_ns < r.raw_before_ns || r.kernel_raw_ns > r.raw_after_ns) return true;

  // host - raw at the triplet: the host read lies between the two raw reads.
  const int64_t triplet_width = r.raw_after2_ns - r.raw_after_ns;
  const int64_t raw_mid = r.raw_after_ns + triplet_width / 2;
  const int64_t offset = r.host_after_ns - raw_mid;
  const int64_t offset_error = (triplet_width + 1) / 2 + 1;  // + 1 ns read granularity
  const int64_t drift = RateAllowance(r.raw_after2_ns - r.kernel_raw_ns, kHostVsRawMaxPpm);
  const int64_t upper = r.kernel_raw_ns + offset + offset_error + drift;
  if (upper >= r.host_before_ns && upper < r.host_after_ns) {
    out->host_after_ns = upper;
    out->tightened = true;
  }
  return true;
}

}  // namespace chronolink::collector
