// libchronolink_discipline_shim.so: TEST-ONLY. LD_PRELOADed into a real clock
// daemon (chronyd) on a test bed node, it makes the daemon read and steer
// that node's clock state file (clock/clock_state_file.h; docs/testbed.md
// "Clocks as deployed") instead of the kernel clock, which every namespace
// of the test bed shares and which nothing may touch. So a real daemon
// disciplines the node's clock, and the agent of the node, which reads the
// same file, stamps on that disciplined clock with exact truth.
//
// What chronyd 4.3 calls (nm -D /usr/sbin/chronyd), and what the shim does:
//   clock_gettime, gettimeofday, time: the node's clocks at the real instant
//     (REALTIME = oscillator + correction, MONOTONIC the same without steps,
//     MONOTONIC_RAW the oscillator, BOOTTIME MONOTONIC plus the kernel's
//     suspended time; any other clock id is the kernel's);
//   adjtimex / ntp_adjtime / clock_adjtime(CLOCK_REALTIME): the kernel's
//     NTP interface (kernel/time/ntp.c), as chronyd's Linux driver uses it
//     (sys_linux.c, sys_timex.c) and as ntpd and timesyncd do:
//     - ADJ_FREQUENCY (scaled ppm, +/-500 ppm) and ADJ_TICK (9000..11000 us
//       per USER_HZ tick) change the correction's rate from the real
//       instant of the call;
//     - ADJ_OFFSET with STA_PLL drives the kernel's PLL (kernel_pll.h),
//       whose rate changes at every second of the node clock: those knots
//       are written ahead, and withdrawn when a later call changes them;
//     - ADJ_SETOFFSET steps the clock;
//     - ADJ_STATUS, ADJ_MAXERROR, ADJ_ESTERROR and ADJ_TIMECONST are kept
//       and read back;
//     - ADJ_OFFSET_SINGLESHOT (the old adjtime() slew) only cancels one,
//       which is all chronyd does with it.
//     The kernel scales the clocksource's conversion by the second's
//     length; the shim adds the tick, frequency and PLL rates to the
//     oscillator's. The two differ by their product (below 1e-9 for 100 ppm
//     and 10 ppm): that is a difference of model, not of truth, and the
//     truth is this file.
//   settimeofday / clock_settime(CLOCK_REALTIME): a step to the value given;
//   recvmsg / recvmmsg: the kernel's receive and transmit (error queue)
//     software timestamps in SCM_TIMESTAMP, SCM_TIMESTAMPNS and
//     SCM_TIMESTAMPING (old and _NEW) become the node's REALTIME.
// Real clocks are read with the system call itself (this library never
// depends on libc's vDSO pointer being ready); other real functions are
// found with dlsym(RTLD_NEXT).
//
// CHRONOLINK_CLOCK_STATE names the node's state file; without it, or with a
// file that does not open, the library prints one line and _exit(2)s: a
// daemon must never discipline the shared kernel clock by accident.
//
// CHRONOLINK_CLOCK_STATE_WALL_ONLY=1 is for a program that only stamps on
// the node's clock (the demo's PyTorch ranks): CLOCK_REALTIME (and
// gettimeofday, time) read the node's REALTIME; every other clock is the
// kernel's, since such a program computes absolute MONOTONIC deadlines
// (Python's time.sleep, condition variables) that the kernel then waits
// for; and adjtimex and the setters fail with EPERM, the file opened read
// only.
#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "clock/clock_state_file.h"
#include "clock/kernel_pll.h"

namespace {

using chronolink::ClockStateReader;
using chronolink::ClockStateWriter;
using chronolink::FineNs;
using chronolink::KernelPll;
using chronolink::kFinePerNs;

constexpr int64_t kNsPerSec = 1'000'000'000;
constexpr long kNtpPhaseLimitUs = 16'000'000;  // the kernel's NTP_PHASE_LIMIT

int64_t RealNs(clockid_t id) {
  timespec ts{};
  ::syscall(SYS_clock_gettime, id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

timespec ToTimespec(int64_t ns) {
  int64_t s = ns / kNsPerSec, r = ns % kNsPerSec;
  if (r < 0) {
    r += kNsPerSec;
    --s;
  }
  return {static_cast<time_t>(s), static_cast<long>(r)};
}

[[noreturn]] void Refuse(const std::string& why) {
  std::fprintf(stderr, "chronolink discipline shim: %s; refusing to run on the shared kernel clock\n", why.c_str());
  std::fflush(stderr);
  ::_exit(2);
}

// The kernel's NTP variables that are not the PLL's, as adjtimex reports them.
struct KernelNtpFields {
  long tick = 10000;
  long maxerror = kNtpPhaseLimitUs;
  long esterror = kNtpPhaseLimitUs;
};

// How far ahead the PLL's per-second knots are written: a daemon that polls
// less often than this leaves the last rate in force after it.
constexpr int kPllHorizonSeconds = 4096;

class DisciplinedNodeClock {
 public:
  DisciplinedNodeClock() {
    const char* path = std::getenv("CHRONOLINK_CLOCK_STATE");
    if (!path || !*path) Refuse("CHRONOLINK_CLOCK_STATE is not set");
    const char* wall_only = std::getenv("CHRONOLINK_CLOCK_STATE_WALL_ONLY");
    wall_only_ = wall_only != nullptr && std::strcmp(wall_only, "1") == 0;
    std::string error;
    if (!reader_.Open(path, &error) || (!wall_only_ && !writer_.Open(path, &error))) Refuse(error);
  }

  // A program that only stamps may not steer the clock.
  bool wall_only() const { return wall_only_; }

  int64_t Read(clockid_t id) {
    if (wall_only_ && id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE) return RealNs(id);
    std::lock_guard lock(mutex_);
    const int64_t t = RealNs(CLOCK_REALTIME);
    Refresh();
    switch (id) {
      case CLOCK_REALTIME:
      case CLOCK_REALTIME_COARSE:
        return reader_.RealtimeAt(t);
      case CLOCK_MONOTONIC:
      case CLOCK_MONOTONIC_COARSE:
        return reader_.MonotonicAt(t);
      case CLOCK_MONOTONIC_RAW:
        return reader_.RawAt(t);
      case CLOCK_BOOTTIME:
        return reader_.MonotonicAt(t) + (RealNs(CLOCK_BOOTTIME) - RealNs(CLOCK_MONOTONIC));
      default:
        return RealNs(id);
    }
  }

  // A kernel REALTIME stamp of a packet, as the node's REALTIME.
  int64_t Stamp(int64_t real_ns) {
    std::lock_guard lock(mutex_);
    Refresh();
    return reader_.RealtimeAt(real_ns);
  }

  int Adjtimex(timex* tx) {
    std::lock_guard lock(mutex_);
    const int64_t now = RealNs(CLOCK_REALTIME);
    Refresh();
    AdvancePll(now);
    const unsigned modes = tx->modes;
    if ((modes & ADJ_OFFSET_SINGLESHOT) == ADJ_OFFSET_SINGLESHOT) {
      // The old adjtime() slew: chronyd only cancels one left pending
      // (offset 0) and reads it back; a real slew is not emulated.
      if (modes != ADJ_OFFSET_SS_READ && tx->offset != 0) {
        errno = EINVAL;
        return -1;
      }
      Report(tx);
      return Result();
    }
    if (modes & ADJ_SETOFFSET) {
      // Validated as the kernel does (timekeeping_validate_timex).
      const bool nano = (modes & ADJ_NANO) || (!(modes & ADJ_MICRO) && (pll_.status() & STA_NANO));
      if (tx->time.tv_usec < 0 || tx->time.tv_usec >= (nano ? kNsPerSec : 1'000'000)) {
        errno = EINVAL;
        return -1;
      }
      const int64_t sub = nano ? tx->time.tv_usec : tx->time.tv_usec * 1000;
      if (!Step(now, static_cast<int64_t>(tx->time.tv_sec) * kNsPerSec + sub)) return -1;
    }
    if ((modes & ADJ_FREQUENCY) && (tx->freq > 500L * 65536 || tx->freq < -500L * 65536)) {
      errno = EINVAL;
      return -1;
    }
    if ((modes & ADJ_TICK) && (tx->tick < 9000 || tx->tick > 11000)) {
      errno = EINVAL;
      return -1;
    }
    // In the order of the kernel's process_adjtimex_modes.
    const int64_t now_s = NodeSecond(now);
    if (modes & ADJ_STATUS) pll_.SetStatus(tx->status, now_s);
    if (modes & ADJ_NANO) pll_.SetNano(true);
    if (modes & ADJ_MICRO) pll_.SetNano(false);
    if (modes & ADJ_FREQUENCY) pll_.SetFrequency(tx->freq);
    if (modes & ADJ_MAXERROR) fields_.maxerror = tx->maxerror;
    if (modes & ADJ_ESTERROR) fields_.esterror = tx->esterror;
    if (modes & ADJ_TIMECONST) pll_.SetTimeConstant(tx->constant);
    if (modes & ADJ_TICK) fields_.tick = tx->tick;
    if (modes & ADJ_OFFSET) pll_.UpdateOffset(tx->offset, now_s);
    if ((modes & (ADJ_FREQUENCY | ADJ_TICK | ADJ_OFFSET | ADJ_STATUS)) && !Schedule(now)) return -1;
    Report(tx);
    return Result();
  }

  int SetRealtime(int64_t ns) {
    std::lock_guard lock(mutex_);
    const int64_t now = RealNs(CLOCK_REALTIME);
    Refresh();
    AdvancePll(now);
    return Step(now, ns - reader_.RealtimeAt(now)) ? 0 : -1;
  }

 private:
  void Refresh() {
    std::string error;
    if (!reader_.Refresh(&error)) std::fprintf(stderr, "chronolink discipline shim: %s\n", error.c_str());
  }

  int Result() const { return (pll_.status() & STA_UNSYNC) ? TIME_ERROR : TIME_OK; }

  int64_t NodeSecond(int64_t real_ns) const {
    const int64_t v = reader_.RealtimeAt(real_ns);
    return v / kNsPerSec - (v % kNsPerSec < 0 ? 1 : 0);
  }

  // The PLL as it stands now: second_overflow for every second of the node
  // clock since the last call (the chunks Schedule() wrote for them).
  void AdvancePll(int64_t now) {
    const int64_t now_s = NodeSecond(now);
    if (!pll_started_) {
      pll_started_ = true;
      second_ = now_s;
      return;
    }
    for (int i = 0; second_ < now_s && i < kPllHorizonSeconds; ++i) {
      ++second_;
      chunk_ = pll_.NextSecondChunk();
    }
    second_ = std::max(second_, now_s);
  }

  // ns/s << 32 as fine units per ns (1e15 / 1e9 / 2^32), rounded.
  static FineNs ScaledToFine(int64_t scaled) {
    const FineNs num = static_cast<FineNs>(scaled) * 1'000'000;
    const FineNs half = FineNs{1} << 31;
    return (num >= 0 ? num + half : num - half) / (FineNs{1} << 32);
  }

  // The correction's rate: the tick's, the frequency's and this second's
  // PLL chunk (ntp_update_frequency and second_overflow), fine units per ns.
  int64_t Slope(int64_t chunk) const {
    const FineNs tick_part = static_cast<FineNs>(fields_.tick - 10000) * (kFinePerNs / 10000);
    return static_cast<int64_t>(tick_part + ScaledToFine(pll_.frequency_scaled()) + ScaledToFine(chunk));
  }

  // A knot strictly after the last one (two changes in one ns go 1 ns apart).
  int64_t KnotInstant(int64_t now) const {
    const auto& knots = reader_.correction().knots();
    return knots.empty() || now > knots.back().t_ns ? now : knots.back().t_ns + 1;
  }

  bool Append(int64_t t, int64_t slope, FineNs step) {
    std::string error;
    if (writer_.ChangeAt(KnotInstant(t), slope, step, &error)) {
      Refresh();
      return true;
    }
    std::fprintf(stderr, "chronolink discipline shim: %s\n", error.c_str());
    errno = ENOSPC;
    return false;
  }

  // The rate from now on, and the PLL's rate at each coming second of the
  // node clock while its phase chunk is not zero (written ahead: nothing
  // calls the shim at those seconds). What was written ahead before is
  // withdrawn first: this call may have changed it.
  bool Schedule(int64_t now) {
    std::string error;
    if (!writer_.WithdrawAfter(now, &error)) return false;
    Refresh();
    if (!Append(now, Slope(chunk_), 0)) return false;
    KernelPll ahead = pll_;
    int64_t previous = chunk_;
    for (int k = 1; k <= kPllHorizonSeconds; ++k) {
      const int64_t chunk = ahead.NextSecondChunk();
      if (chunk == previous) break;  // the rate stays (with no phase to slew, from now on)
      const int64_t at = reader_.TrueInstantOfRealtime((second_ + k) * kNsPerSec);
      if (!Append(at, Slope(chunk), 0)) return false;
      previous = chunk;
    }
    return true;
  }

  // A step clears the kernel's NTP error state (ntp_clear(): chronyd's
  // probe for ADJ_SETOFFSET looks for maxerror reset to its maximum) and
  // the PLL's phase; its seconds start again from the new reading.
  bool Step(int64_t now, int64_t step_ns) {
    fields_.maxerror = fields_.esterror = kNtpPhaseLimitUs;
    pll_.SetStatus(pll_.status() | STA_UNSYNC, NodeSecond(now));
    pll_.ClearPhase();
    chunk_ = 0;
    if (step_ns == 0) return true;  // nothing moves, but the error state clears as the kernel's does
    std::string error;
    if (!writer_.WithdrawAfter(now, &error)) return false;
    Refresh();
    if (!Append(now, Slope(0), static_cast<FineNs>(step_ns) * kFinePerNs)) return false;
    second_ = NodeSecond(now);
    return true;
  }

  void Report(timex* tx) {
    const int64_t now = reader_.RealtimeAt(RealNs(CLOCK_REALTIME));
    const timespec ts = ToTimespec(now);
    tx->offset = pll_.ReportedOffset();
    tx->freq = pll_.frequency_ppm16();
    tx->maxerror = fields_.maxerror;
    tx->esterror = fields_.esterror;
    tx->status = pll_.status();
    tx->constant = pll_.time_constant();
    tx->precision = 1;
    tx->tolerance = 500L * 65536;
    tx->time.tv_sec = ts.tv_sec;
    tx->time.tv_usec = (pll_.status() & STA_NANO) ? ts.tv_nsec : ts.tv_nsec / 1000;
    tx->tick = fields_.tick;
  }

  std::mutex mutex_;
  ClockStateReader reader_;
  ClockStateWriter writer_;
  KernelNtpFields fields_;
  KernelPll pll_;
  bool pll_started_ = false;
  bool wall_only_ = false;
  int64_t second_ = 0;  // the node clock's second the PLL stands at
  int64_t chunk_ = 0;   // that second's phase chunk (ns/s << 32)
};

DisciplinedNodeClock& Clock() {
  static DisciplinedNodeClock clock;  // thread-safe initialisation
  return clock;
}

// The constructor makes the state file's absence fatal at load, not at the
// daemon's first clock read.
__attribute__((constructor)) void LoadShim() { Clock(); }

template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

bool IsTimestampCmsg(const cmsghdr* c) {
  if (c->cmsg_level != SOL_SOCKET) return false;
  switch (c->cmsg_type) {
    case SCM_TIMESTAMP:
    case SCM_TIMESTAMPNS:
    case SCM_TIMESTAMPING:
#ifdef SO_TIMESTAMP_NEW
    case SO_TIMESTAMP_NEW:
    case SO_TIMESTAMPNS_NEW:
    case SO_TIMESTAMPING_NEW:
#endif
      return true;
    default:
      return false;
  }
}

// Software timestamps of one received (or error-queue) message, rewritten.
void RewriteStamps(msghdr* msg) {
  if (msg->msg_control == nullptr) return;
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (!IsTimestampCmsg(c)) continue;
    unsigned char* data = CMSG_DATA(c);
    const size_t len = c->cmsg_len - CMSG_LEN(0);
    auto map_timespec = [](unsigned char* p) {
      timespec ts;
      std::memcpy(&ts, p, sizeof ts);
      if (ts.tv_sec == 0 && ts.tv_nsec == 0) return;  // absent
      const timespec node = ToTimespec(Clock().Stamp(static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec));
      std::memcpy(p, &node, sizeof node);
    };
    if ((c->cmsg_type == SCM_TIMESTAMPING
#ifdef SO_TIMESTAMPING_NEW
         || c->cmsg_type == SO_TIMESTAMPING_NEW
#endif
         ) &&
        len >= sizeof(timespec)) {
      map_timespec(data);  // ts[0], the software stamp; ts[2] (hardware) is the NIC's own clock
    } else if ((c->cmsg_type == SCM_TIMESTAMPNS
#ifdef SO_TIMESTAMPNS_NEW
                || c->cmsg_type == SO_TIMESTAMPNS_NEW
#endif
                ) &&
               len >= sizeof(timespec)) {
      map_timespec(data);
    } else if (len >= sizeof(timeval)) {  // SCM_TIMESTAMP (and _NEW: 64-bit fields, the same on x86-64)
      timeval tv;
      std::memcpy(&tv, data, sizeof tv);
      const int64_t node = Clock().Stamp(static_cast<int64_t>(tv.tv_sec) * kNsPerSec + tv.tv_usec * 1000);
      const timespec ts = ToTimespec(node);
      tv.tv_sec = ts.tv_sec;
      tv.tv_usec = ts.tv_nsec / 1000;
      std::memcpy(data, &tv, sizeof tv);
    }
  }
}

int Refused() {
  errno = EPERM;
  return -1;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int clock_gettime(clockid_t id, timespec* ts) {
  *ts = ToTimespec(Clock().Read(id));
  return 0;
}

__attribute__((visibility("default"))) int gettimeofday(timeval* __restrict tv, void* __restrict /*tz*/) {
  const timespec ts = ToTimespec(Clock().Read(CLOCK_REALTIME));
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

__attribute__((visibility("default"))) time_t time(time_t* out) {
  const time_t now = ToTimespec(Clock().Read(CLOCK_REALTIME)).tv_sec;
  if (out != nullptr) *out = now;
  return now;
}

__attribute__((visibility("default"))) int adjtimex(timex* tx) {
  if (Clock().wall_only()) return Refused();
  return Clock().Adjtimex(tx);
}
__attribute__((visibility("default"))) int ntp_adjtime(timex* tx) { return adjtimex(tx); }
__attribute__((visibility("default"))) int clock_adjtime(clockid_t id, timex* tx) {
  if (id != CLOCK_REALTIME) {
    errno = EINVAL;  // a PHC: the test bed has none
    return -1;
  }
  return adjtimex(tx);
}

__attribute__((visibility("default"))) int settimeofday(const timeval* tv, const struct timezone* /*tz*/) {
  if (Clock().wall_only()) return Refused();
  if (tv == nullptr) return 0;
  return Clock().SetRealtime(static_cast<int64_t>(tv->tv_sec) * kNsPerSec + tv->tv_usec * 1000);
}

__attribute__((visibility("default"))) int clock_settime(clockid_t id, const timespec* ts) {
  if (id != CLOCK_REALTIME) {
    errno = EINVAL;
    return -1;
  }
  if (Clock().wall_only()) return Refused();
  return Clock().SetRealtime(static_cast<int64_t>(ts->tv_sec) * kNsPerSec + ts->tv_nsec);
}

__attribute__((visibility("default"))) ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  static const auto real = Next<ssize_t (*)(int, msghdr*, int)>("recvmsg");
  const ssize_t n = real(fd, msg, flags);
  if (n >= 0) RewriteStamps(msg);
  return n;
}

__attribute__((visibility("default"))) int recvmmsg(int fd, mmsghdr* msgs, unsigned int vlen, int flags,
                                                    timespec* timeout) {
  static const auto real = Next<int (*)(int, mmsghdr*, unsigned int, int, timespec*)>("recvmmsg");
  const int n = real(fd, msgs, vlen, flags, timeout);
  for (int i = 0; i < n; ++i) RewriteStamps(&msgs[i].msg_hdr);
  return n;
}

}  // extern "C"
