// PHC (a NIC's PTP hardware clock, /dev/ptpN) to CLOCK_REALTIME. Hardware
// packet stamps (SOF_TIMESTAMPING_RAW_HARDWARE) are in the PHC's time scale;
// the offset PHC - REALTIME is measured with the kernel's cross-timestamp
// ioctls, best first:
//   PTP_SYS_OFFSET_PRECISE   device time latched with a simultaneous system time
//   PTP_SYS_OFFSET_EXTENDED  (sys before, phc, sys after) triplets around the
//                            driver's own register read
//   PTP_SYS_OFFSET           interleaved sys, phc, sys, ..., sys reads
// The maths are pure functions, tested on constructed samples; PhcClock does
// the ioctls. docs/clocks.md explains the error bounds.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "clock/kernel_clock_mapping.h"

namespace chronolink {

enum class PhcMethod : uint8_t {
  kNone = 0,
  kPrecise = 1,   // PTP_SYS_OFFSET_PRECISE
  kExtended = 2,  // PTP_SYS_OFFSET_EXTENDED
  kBasic = 3,     // PTP_SYS_OFFSET
};
std::string_view PhcMethodName(PhcMethod m);

// One measurement of PHC - REALTIME.
struct PhcOffset {
  int64_t phc_ns = 0;      // PHC time of the measurement
  int64_t sys_ns = 0;      // CLOCK_REALTIME at the same instant (bracket midpoint)
  int64_t offset_ns = 0;   // phc_ns - sys_ns
  int64_t error_ns = 0;    // |offset_ns - true offset| <= error_ns
  int64_t bracket_ns = 0;  // width of the chosen bracket; 0 for PRECISE
  int samples = 0;         // samples the kernel returned
  int rejected = 0;        // of which garbage (negative width, zero, too wide)
  PhcMethod method = PhcMethod::kNone;
};

// One EXTENDED sample, or one (sys, phc, sys) window of a basic reading.
struct PhcTriplet {
  int64_t sys_before_ns = 0;
  int64_t phc_ns = 0;
  int64_t sys_after_ns = 0;
};

// The correlation error of a PRECISE cross timestamp is the device's, not
// measurable here: one tick of the slowest common cross-timestamp clock
// (Intel ART at 24 MHz, 41.7 ns), rounded up.
constexpr int64_t kPhcPreciseErrorNs = 50;
// A bracket wider than this is garbage (the reads took 10 ms?).
constexpr int64_t kPhcMaxBracketNs = 10'000'000;
// Read granularity added to every bracket bound.
constexpr int64_t kPhcReadGranularityNs = 1;
// Default frequency difference assumed between a PHC and REALTIME when a
// stamp is converted with one measurement: IEEE 1588 clocks are +-100 ppm.
constexpr int64_t kDefaultPhcDriftPpb = 100'000;

// ptp_clock_time (sec, nsec) -> ns; false for nsec >= 1e9, negative seconds
// or overflow.
bool PtpClockTimeToNs(int64_t sec, uint32_t nsec, int64_t* ns);

// PRECISE: offset = device - sys_realtime, error kPhcPreciseErrorNs.
bool PhcOffsetFromPrecise(int64_t device_ns, int64_t sys_realtime_ns, PhcOffset* out,
                          std::string* error);

// EXTENDED (or any triplets): picks the narrowest valid triplet;
// offset = phc - midpoint(sys), error = ceil(width / 2) + granularity.
// Triplets with a zero/negative time, a negative width or one above
// kPhcMaxBracketNs are rejected and counted. False if none is valid.
bool PhcOffsetFromTriplets(std::span<const PhcTriplet> triplets, PhcMethod method, PhcOffset* out,
                           std::string* error);

// Basic PTP_SYS_OFFSET: ts = sys0, phc0, sys1, phc1, ..., sys_n (2n + 1
// values); window i is (sys_i, phc_i, sys_i+1).
bool PhcOffsetFromInterleaved(std::span<const int64_t> ts, PhcOffset* out, std::string* error);

// A hardware stamp -> REALTIME with one measurement: real = phc - offset;
// error = the measurement's + max_drift_ppb of the distance to it.
ConvertedStamp HwToRealtime(int64_t phc_ns, const PhcOffset& offset,
                            int64_t max_drift_ppb = kDefaultPhcDriftPpb);

// Continuous PHC -> REALTIME mapping: feed it every Measure() and convert
// between measurements (interpolated, steps of the PHC detected), as
// KernelClockMapping does for MONOTONIC.
class PhcMapping {
 public:
  static ClockOffsetTrackOptions DefaultOptions();
  explicit PhcMapping(const ClockOffsetTrackOptions& options = DefaultOptions()) : track_(options) {}

  // True when the measurement starts a new segment (the PHC or REALTIME stepped).
  bool Add(const PhcOffset& offset);
  ConvertedStamp HwToRealtime(int64_t phc_ns) const { return track_.Convert(phc_ns); }
  const ClockOffsetTrack& track() const { return track_; }

 private:
  ClockOffsetTrack track_;
};

// Opens a PTP clock device for reading only: O_RDONLY | O_CLOEXEC |
// O_NONBLOCK. Everything the agent does with a PHC (PTP_CLOCK_GETCAPS,
// PTP_SYS_OFFSET*, clock_gettime) works on a read-only descriptor, while a
// writable one could set or steer the clock (clock_settime/clock_adjtime on
// FD_TO_CLOCKID) with no capability at all, long after the privilege drop.
// The descriptor, or -1 with a message in *error.
int OpenPtpDeviceReadOnly(const std::string& path, std::string* error);

// A PTP hardware clock device, opened read-only (above). No /dev/ptp* (VMs,
// veth): Open fails with a message that says so.
class PhcClock {
 public:
  PhcClock() = default;
  ~PhcClock();
  PhcClock(const PhcClock&) = delete;
  PhcClock& operator=(const PhcClock&) = delete;

  // "/dev/ptp0", "ptp0" or "0" (a phc_index from ETHTOOL_GET_TS_INFO).
  bool Open(const std::string& dev_or_index, std::string* error);
  void Close();
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // Measures PHC - REALTIME, trying PRECISE -> EXTENDED -> basic; a method
  // the device does not implement is not tried again. method() tells which
  // one worked last.
  bool Measure(PhcOffset* out, std::string* error);
  PhcMethod method() const { return method_; }

  // PHC time now through clock_gettime(FD_TO_CLOCKID(fd)).
  bool ReadTime(int64_t* ns, std::string* error) const;

  bool cross_timestamping() const { return cross_timestamping_; }
  void set_samples_per_measure(int n) { samples_ = n; }

 private:
  bool TryPrecise(PhcOffset* out, std::string* error, bool* unsupported);
  bool TryExtended(PhcOffset* out, std::string* error, bool* unsupported);
  bool TryBasic(PhcOffset* out, std::string* error, bool* unsupported);

  int fd_ = -1;
  std::string path_;
  bool cross_timestamping_ = false;
  bool precise_unsupported_ = false;
  bool extended_unsupported_ = false;
  bool basic_unsupported_ = false;
  PhcMethod method_ = PhcMethod::kNone;
  int samples_ = 9;
};

}  // namespace chronolink
