#include "clock/phc_mapping.h"

#include <fcntl.h>
#include <linux/ptp_clock.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "clock/clock_bracket.h"

namespace chronolink {

namespace {

constexpr int64_t kNsPerSec = 1'000'000'000;

std::string ErrnoText(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

// The ioctl is not there, or the driver does not implement it.
bool IsUnsupported(int err) {
  return err == EOPNOTSUPP || err == ENOTTY || err == ENOSYS || err == EINVAL;
}

std::string ListPtpDevices() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ptp", 0) == 0) names.push_back("/dev/" + name);
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return "this machine has no PTP hardware clock: no /dev/ptp*";
  std::string out = "PTP clocks here:";
  for (const auto& n : names) out += " " + n;
  return out;
}

bool IsDigits(const std::string& s) {
  return !s.empty() && s.size() < 10 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool ToNs(const ptp_clock_time& t, int64_t* ns) {
  return PtpClockTimeToNs(t.sec, t.nsec, ns);
}

clockid_t FdToClockId(int fd) { return static_cast<clockid_t>((~static_cast<unsigned>(fd) << 3) | 3); }

}  // namespace

std::string_view PhcMethodName(PhcMethod m) {
  switch (m) {
    case PhcMethod::kNone: return "none";
    case PhcMethod::kPrecise: return "PTP_SYS_OFFSET_PRECISE";
    case PhcMethod::kExtended: return "PTP_SYS_OFFSET_EXTENDED";
    case PhcMethod::kBasic: return "PTP_SYS_OFFSET";
  }
  return "?";
}

bool PtpClockTimeToNs(int64_t sec, uint32_t nsec, int64_t* ns) {
  if (sec < 0 || nsec >= kNsPerSec) return false;
  if (sec > (std::numeric_limits<int64_t>::max() - kNsPerSec) / kNsPerSec) return false;
  *ns = sec * kNsPerSec + nsec;
  return true;
}

bool PhcOffsetFromPrecise(int64_t device_ns, int64_t sys_realtime_ns, PhcOffset* out,
                          std::string* error) {
  if (device_ns < 0 || sys_realtime_ns <= 0) {
    *error = "PTP_SYS_OFFSET_PRECISE returned a zero or negative time";
    return false;
  }
  *out = PhcOffset{};
  out->phc_ns = device_ns;
  out->sys_ns = sys_realtime_ns;
  out->offset_ns = device_ns - sys_realtime_ns;
  out->error_ns = kPhcPreciseErrorNs;
  out->bracket_ns = 0;
  out->samples = 1;
  out->method = PhcMethod::kPrecise;
  return true;
}

bool PhcOffsetFromTriplets(std::span<const PhcTriplet> triplets, PhcMethod method, PhcOffset* out,
                           std::string* error) {
  PhcOffset best;
  best.method = method;
  best.samples = static_cast<int>(triplets.size());
  TightestBracket tightest;
  for (const PhcTriplet& t : triplets) {
    const bool plausible = t.sys_before_ns > 0 && t.sys_after_ns > 0 && t.phc_ns >= 0 &&
                           t.sys_after_ns - t.sys_before_ns <= kPhcMaxBracketNs;
    if (!plausible || !tightest.Offer({t.sys_before_ns, t.phc_ns, t.sys_after_ns})) ++best.rejected;
  }
  if (!tightest.found()) {
    *error = std::string(PhcMethodName(method)) + ": no valid sample among " +
             std::to_string(triplets.size()) +
             " (zero times, negative or over-wide brackets)";
    return false;
  }
  const BracketOffset o = tightest.OffsetAtMidpoint(kPhcReadGranularityNs);
  best.sys_ns = o.ref_ns;
  best.phc_ns = o.ref_ns + o.offset_ns;
  best.offset_ns = o.offset_ns;
  best.bracket_ns = o.bracket_ns;
  best.error_ns = o.error_ns;
  *out = best;
  return true;
}

bool PhcOffsetFromInterleaved(std::span<const int64_t> ts, PhcOffset* out, std::string* error) {
  if (ts.size() < 3 || ts.size() % 2 == 0) {
    *error = "PTP_SYS_OFFSET: need 2n + 1 interleaved times, got " + std::to_string(ts.size());
    return false;
  }
  std::vector<PhcTriplet> triplets;
  for (size_t i = 0; i + 2 < ts.size(); i += 2) triplets.push_back({ts[i], ts[i + 1], ts[i + 2]});
  return PhcOffsetFromTriplets(triplets, PhcMethod::kBasic, out, error);
}

ConvertedStamp HwToRealtime(int64_t phc_ns, const PhcOffset& offset, int64_t max_drift_ppb) {
  ConvertedStamp out;
  if (offset.method == PhcMethod::kNone || offset.error_ns < 0 || max_drift_ppb < 0) return out;
  const int64_t distance = phc_ns >= offset.phc_ns ? phc_ns - offset.phc_ns : offset.phc_ns - phc_ns;
  const __int128 drift = static_cast<__int128>(distance) * max_drift_ppb;
  const __int128 drift_ns = (drift + kNsPerSec - 1) / kNsPerSec;
  if (drift_ns > std::numeric_limits<int64_t>::max() / 2) return out;
  out.realtime_ns = phc_ns - offset.offset_ns;
  out.error_ns = offset.error_ns + static_cast<int64_t>(drift_ns);
  out.ok = true;
  return out;
}

// ---------------------------------------------------------------------------
// PhcMapping

ClockOffsetTrackOptions PhcMapping::DefaultOptions() {
  ClockOffsetTrackOptions o;
  o.history = 64;
  // ptp4l steers the PHC and phc2sys/chrony steer REALTIME by a few ppm at
  // most between measurements; an unsteered PHC drifts at a near-constant rate.
  o.max_rate_change_ppb = 10'000;
  o.max_slew_ppb = 200'000;  // +-100 ppm crystal against a +-100 ppm system clock
  o.max_extrapolation_ns = 2'000'000'000;
  return o;
}

bool PhcMapping::Add(const PhcOffset& offset) {
  if (offset.method == PhcMethod::kNone) return false;
  ClockOffsetSample s;
  s.ref_ns = offset.phc_ns;
  s.offset_ns = -offset.offset_ns;  // REALTIME - PHC
  s.error_ns = offset.error_ns;
  s.bracket_ns = offset.bracket_ns;
  return track_.Add(s);
}

// ---------------------------------------------------------------------------
// PhcClock

int OpenPtpDeviceReadOnly(const std::string& path, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0) return fd;
  const int err = errno;
  *error = ErrnoText("open " + path, err);
  if (err == ENOENT) {
    *error += " (" + ListPtpDevices() + ")";
  } else if (err == EACCES || err == EPERM) {
    *error += " (needs read access to the PTP device: run as root or grant its group)";
  }
  return -1;
}

PhcClock::~PhcClock() { Close(); }

void PhcClock::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  path_.clear();
  cross_timestamping_ = false;
  precise_unsupported_ = extended_unsupported_ = basic_unsupported_ = false;
  method_ = PhcMethod::kNone;
}

bool PhcClock::Open(const std::string& dev_or_index, std::string* error) {
  Close();
  std::string path;
  if (IsDigits(dev_or_index)) {
    path = "/dev/ptp" + dev_or_index;
  } else if (dev_or_index.rfind("ptp", 0) == 0 && IsDigits(dev_or_index.substr(3))) {
    path = "/dev/" + dev_or_index;
  } else if (!dev_or_index.empty() && dev_or_index[0] == '/') {
    path = dev_or_index;
  } else {
    *error = "'" + dev_or_index +
             "' is not a PTP clock: expected /dev/ptpN, ptpN or an index N";
    return false;
  }

  const int fd = OpenPtpDeviceReadOnly(path, error);
  if (fd < 0) return false;
  ptp_clock_caps caps{};
  if (::ioctl(fd, PTP_CLOCK_GETCAPS, &caps) != 0) {
    *error = path + " is not a PTP hardware clock (" +
             ErrnoText("PTP_CLOCK_GETCAPS", errno) + ")";
    ::close(fd);
    return false;
  }
  fd_ = fd;
  path_ = path;
  cross_timestamping_ = caps.cross_timestamping != 0;
  precise_unsupported_ = !cross_timestamping_;
  return true;
}

bool PhcClock::TryPrecise(PhcOffset* out, std::string* error, bool* unsupported) {
  ptp_sys_offset_precise req{};
  if (::ioctl(fd_, PTP_SYS_OFFSET_PRECISE, &req) != 0) {
    const int err = errno;
    *unsupported = IsUnsupported(err);
    *error = ErrnoText(std::string(PhcMethodName(PhcMethod::kPrecise)) + " on " + path_, err);
    return false;
  }
  int64_t device = 0;
  int64_t sys = 0;
  if (!ToNs(req.device, &device) || !ToNs(req.sys_realtime, &sys)) {
    *error = "PTP_SYS_OFFSET_PRECISE on " + path_ + " returned a malformed time";
    return false;
  }
  return PhcOffsetFromPrecise(device, sys, out, error);
}

bool PhcClock::TryExtended(PhcOffset* out, std::string* error, bool* unsupported) {
  ptp_sys_offset_extended req{};  // rsv[0] = 0: system clock CLOCK_REALTIME
  req.n_samples = static_cast<unsigned>(std::clamp(samples_, 1, PTP_MAX_SAMPLES));
  if (::ioctl(fd_, PTP_SYS_OFFSET_EXTENDED, &req) != 0) {
    const int err = errno;
    *unsupported = IsUnsupported(err);
    *error = ErrnoText(std::string(PhcMethodName(PhcMethod::kExtended)) + " on " + path_, err);
    return false;
  }
  std::vector<PhcTriplet> triplets(req.n_samples);
  for (unsigned i = 0; i < req.n_samples; ++i) {
    PhcTriplet& t = triplets[i];
    if (!ToNs(req.ts[i][0], &t.sys_before_ns) || !ToNs(req.ts[i][1], &t.phc_ns) ||
        !ToNs(req.ts[i][2], &t.sys_after_ns)) {
      t = PhcTriplet{};  // rejected by the maths
    }
  }
  return PhcOffsetFromTriplets(triplets, PhcMethod::kExtended, out, error);
}

bool PhcClock::TryBasic(PhcOffset* out, std::string* error, bool* unsupported) {
  ptp_sys_offset req{};
  req.n_samples = static_cast<unsigned>(std::clamp(samples_, 1, PTP_MAX_SAMPLES));
  if (::ioctl(fd_, PTP_SYS_OFFSET, &req) != 0) {
    const int err = errno;
    *unsupported = IsUnsupported(err);
    *error = ErrnoText(std::string(PhcMethodName(PhcMethod::kBasic)) + " on " + path_, err);
    return false;
  }
  std::vector<int64_t> ts(2 * req.n_samples + 1);
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!ToNs(req.ts[i], &ts[i])) ts[i] = 0;  // rejected by the maths
  }
  return PhcOffsetFromInterleaved(ts, out, error);
}

bool PhcClock::Measure(PhcOffset* out, std::string* error) {
  if (fd_ < 0) {
    *error = "PHC not open";
    return false;
  }
  std::string errors;
  auto attempt = [&](bool PhcClock::*unsupported_flag,
                     bool (PhcClock::*fn)(PhcOffset*, std::string*, bool*), PhcMethod m) {
    if (this->*unsupported_flag) return false;
    std::string e;
    bool unsupported = false;
    if ((this->*fn)(out, &e, &unsupported)) {
      method_ = m;
      return true;
    }
    if (unsupported) this->*unsupported_flag = true;
    if (!errors.empty()) errors += "; ";
    errors += e;
    return false;
  };
  if (attempt(&PhcClock::precise_unsupported_, &PhcClock::TryPrecise, PhcMethod::kPrecise) ||
      attempt(&PhcClock::extended_unsupported_, &PhcClock::TryExtended, PhcMethod::kExtended) ||
      attempt(&PhcClock::basic_unsupported_, &PhcClock::TryBasic, PhcMethod::kBasic)) {
    return true;
  }
  *error = errors.empty() ? path_ + ": no offset method works on this device" : errors;
  return false;
}

bool PhcClock::ReadTime(int64_t* ns, std::string* error) const {
  if (fd_ < 0) {
    *error = "PHC not open";
    return false;
  }
  timespec ts{};
  if (clock_gettime(FdToClockId(fd_), &ts) != 0) {
    *error = ErrnoText("clock_gettime(" + path_ + ")", errno);
    return false;
  }
  *ns = static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
  return true;
}

}  // namespace chronolink
