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
//     NTP interface as chronyd's Linux driver uses it (sys_linux.c,
//     sys_timex.c): ADJ_FREQUENCY (scaled ppm, +/-500 ppm) and ADJ_TICK
//     (9000..11000 us per 10 ms... of USER_HZ 100) change the correction's
//     rate from the real instant of the call, ADJ_SETOFFSET steps the
//     clock; ADJ_STATUS, ADJ_MAXERROR, ADJ_ESTERROR, ADJ_TIMECONST are kept
//     and read back; ADJ_OFFSET_SINGLESHOT (the old adjtime() slew) only
//     to cancel one, which is what chronyd does with it. The kernel multiplies the tick and frequency into the
//     clocksource's rate; the shim adds them to the oscillator's
//     (rate = raw + (tick - 10000)·1e-4 + freq·2^-16·1e-6), which differs
//     by their product (below 1e-9 for 100 ppm and 10 ppm): the model, not
//     the truth, is what differs, and the truth is this file. ADJ_OFFSET
//     (the kernel PLL, for ntpd and timesyncd) is refused with EINVAL here.
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

namespace {

using chronolink::ClockStateReader;
using chronolink::ClockStateWriter;
using chronolink::FineNs;
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

// The kernel's NTP variables as adjtimex reports them.
struct KernelNtpState {
  long freq = 0;  // scaled ppm (2^-16 ppm)
  long tick = 10000;
  int status = STA_UNSYNC;
  long maxerror = kNtpPhaseLimitUs;
  long esterror = kNtpPhaseLimitUs;
  long constant = 2;
};

class DisciplinedNodeClock {
 public:
  DisciplinedNodeClock() {
    const char* path = std::getenv("CHRONOLINK_CLOCK_STATE");
    if (!path || !*path) Refuse("CHRONOLINK_CLOCK_STATE is not set");
    std::string error;
    if (!reader_.Open(path, &error) || !writer_.Open(path, &error)) Refuse(error);
  }

  int64_t Read(clockid_t id) {
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
    const unsigned modes = tx->modes;
    if ((modes & ADJ_OFFSET_SINGLESHOT) == ADJ_OFFSET_SINGLESHOT) {
      // The old adjtime() slew: chronyd only cancels one left pending
      // (offset 0) and reads it back; a real slew is not emulated.
      if (modes != ADJ_OFFSET_SS_READ && tx->offset != 0) {
        errno = EINVAL;
        return -1;
      }
      Report(tx);
      return (state_.status & STA_UNSYNC) ? TIME_ERROR : TIME_OK;
    }
    if ((modes & ADJ_OFFSET) && tx->offset != 0) {  // the kernel PLL (ntpd, timesyncd): not emulated yet
      errno = EINVAL;                                 // (chronyd sets offset 0 to reset it)
      return -1;
    }
    if (modes & ADJ_SETOFFSET) {
      // Validated as the kernel does (timekeeping_validate_timex).
      const bool nano = (modes & ADJ_NANO) || (!(modes & ADJ_MICRO) && (state_.status & STA_NANO));
      if (tx->time.tv_usec < 0 || tx->time.tv_usec >= (nano ? kNsPerSec : 1'000'000)) {
        errno = EINVAL;
        return -1;
      }
      const int64_t sub = nano ? tx->time.tv_usec : tx->time.tv_usec * 1000;
      if (!Step(now, static_cast<int64_t>(tx->time.tv_sec) * kNsPerSec + sub)) return -1;
    }
    bool rate_changed = false;
    if (modes & ADJ_FREQUENCY) {
      if (tx->freq > 500L * 65536 || tx->freq < -500L * 65536) {
        errno = EINVAL;
        return -1;
      }
      rate_changed = rate_changed || state_.freq != tx->freq;
      state_.freq = tx->freq;
    }
    if (modes & ADJ_TICK) {
      if (tx->tick < 9000 || tx->tick > 11000) {
        errno = EINVAL;
        return -1;
      }
      rate_changed = rate_changed || state_.tick != tx->tick;
      state_.tick = tx->tick;
    }
    if (modes & ADJ_STATUS) state_.status = (state_.status & STA_RONLY) | (tx->status & ~STA_RONLY);
    if (modes & ADJ_NANO) state_.status |= STA_NANO;
    if (modes & ADJ_MICRO) state_.status &= ~STA_NANO;
    if (modes & ADJ_MAXERROR) state_.maxerror = tx->maxerror;
    if (modes & ADJ_ESTERROR) state_.esterror = tx->esterror;
    if (modes & ADJ_TIMECONST) state_.constant = tx->constant;
    if (rate_changed && !ChangeRate(now)) return -1;
    Report(tx);
    return (state_.status & STA_UNSYNC) ? TIME_ERROR : TIME_OK;
  }

  int SetRealtime(int64_t ns) {
    std::lock_guard lock(mutex_);
    const int64_t now = RealNs(CLOCK_REALTIME);
    Refresh();
    return Step(now, ns - reader_.RealtimeAt(now)) ? 0 : -1;
  }

 private:
  void Refresh() {
    std::string error;
    if (!reader_.Refresh(&error)) std::fprintf(stderr, "chronolink discipline shim: %s\n", error.c_str());
  }

  // The correction's rate: the tick's and the frequency's, fine units per ns.
  int64_t Slope() const {
    const FineNs tick_part = static_cast<FineNs>(state_.tick - 10000) * (kFinePerNs / 10000);
    // freq·2^-16 ppm = freq·1e9/65536 fine units per ns, rounded to nearest.
    const FineNs scaled = static_cast<FineNs>(state_.freq) * 1'000'000'000;
    const FineNs freq_part = (scaled >= 0 ? scaled + 32768 : scaled - 32768) / 65536;
    return static_cast<int64_t>(tick_part + freq_part);
  }

  // A knot strictly after the last one (two changes in one ns go 1 ns apart).
  int64_t KnotInstant(int64_t now) const {
    const auto& knots = reader_.correction().knots();
    return knots.empty() || now > knots.back().t_ns ? now : knots.back().t_ns + 1;
  }

  bool ChangeRate(int64_t now) {
    std::string error;
    if (writer_.ChangeAt(KnotInstant(now), Slope(), 0, &error)) return true;
    std::fprintf(stderr, "chronolink discipline shim: %s\n", error.c_str());
    errno = ENOSPC;
    return false;
  }

  // A step clears the kernel's NTP error state (ntp_clear(): chronyd's
  // probe for ADJ_SETOFFSET looks for maxerror reset to its maximum).
  bool Step(int64_t now, int64_t step_ns) {
    std::string error;
    if (step_ns == 0) {  // nothing moves, but the error state clears as the kernel's does
      state_.maxerror = state_.esterror = kNtpPhaseLimitUs;
      state_.status |= STA_UNSYNC;
      return true;
    }
    if (writer_.ChangeAt(KnotInstant(now), Slope(), static_cast<FineNs>(step_ns) * kFinePerNs, &error)) {
      state_.maxerror = state_.esterror = kNtpPhaseLimitUs;
      state_.status |= STA_UNSYNC;
      Refresh();
      return true;
    }
    std::fprintf(stderr, "chronolink discipline shim: %s\n", error.c_str());
    errno = ENOSPC;
    return false;
  }

  void Report(timex* tx) {
    const int64_t now = reader_.RealtimeAt(RealNs(CLOCK_REALTIME));
    const timespec ts = ToTimespec(now);
    tx->offset = 0;
    tx->freq = state_.freq;
    tx->maxerror = state_.maxerror;
    tx->esterror = state_.esterror;
    tx->status = state_.status;
    tx->constant = state_.constant;
    tx->precision = 1;
    tx->tolerance = 500L * 65536;
    tx->time.tv_sec = ts.tv_sec;
    tx->time.tv_usec = (state_.status & STA_NANO) ? ts.tv_nsec : ts.tv_nsec / 1000;
    tx->tick = state_.tick;
  }

  std::mutex mutex_;
  ClockStateReader reader_;
  ClockStateWriter writer_;
  KernelNtpState state_;
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

__attribute__((visibility("default"))) int adjtimex(timex* tx) { return Clock().Adjtimex(tx); }
__attribute__((visibility("default"))) int ntp_adjtime(timex* tx) { return Clock().Adjtimex(tx); }
__attribute__((visibility("default"))) int clock_adjtime(clockid_t id, timex* tx) {
  if (id != CLOCK_REALTIME) {
    errno = EINVAL;  // a PHC: the test bed has none
    return -1;
  }
  return Clock().Adjtimex(tx);
}

__attribute__((visibility("default"))) int settimeofday(const timeval* tv, const struct timezone* /*tz*/) {
  if (tv == nullptr) return 0;
  return Clock().SetRealtime(static_cast<int64_t>(tv->tv_sec) * kNsPerSec + tv->tv_usec * 1000);
}

__attribute__((visibility("default"))) int clock_settime(clockid_t id, const timespec* ts) {
  if (id != CLOCK_REALTIME) {
    errno = EINVAL;
    return -1;
  }
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
