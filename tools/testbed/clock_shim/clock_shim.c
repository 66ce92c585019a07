// libchronolink_clock_shim.so: a TEST-ONLY LD_PRELOAD library that gives an
// unmodified program the same skewed clock the agent's --virtual-* options
// give the agent of its node, so that a real producer (the PyTorch workload
// of tools/testbed/trace_workload.py) stamps its trace on the node's virtual
// clock and the truth of every event is known exactly (docs/testbed.md).
//
// Wall clocks (CLOCK_REALTIME, _COARSE, _ALARM; CLOCK_TAI; gettimeofday,
// time, timespec_get, hence std::chrono::system_clock and Python's
// time.time/time_ns) read
//     v = t + offset_ns + llround(drift_ppm * 1e-6 * (t - t0_ns))
// the expression of VirtualClock::Apply (clock/virtual_clock.cc),
// evaluated in the same order so the int64 result is identical bit for bit.
// TAI is the wall clock plus the kernel's TAI offset, so its drift term is
// taken against t - tai_offset (the same instant as the wall clock's t).
//
// Monotonic clocks (CLOCK_MONOTONIC, _RAW, _COARSE, CLOCK_BOOTTIME, _ALARM,
// hence std::chrono::steady_clock and time.monotonic) get the RATE only:
//     m' = m + llround(drift_ppm * 1e-6 * (m - m_load))
// with m_load the clock's reading when the library initialised. A duration
// measured on any shimmed clock is then the node's duration (scaled by
// 1 + drift), so a producer that takes a REALTIME origin and stamps events
// relative to it on a monotonic clock still lands on the node's virtual
// REALTIME. No offset: an absolute MONOTONIC deadline (time.sleep,
// condition variables) is off by at most drift * time since load (6 ms after
// 60 s at 100 ppm), where an offset would make it wrong by the whole offset.
// Processes load at different instants, so their monotonic clocks differ by
// drift * (difference of load instants): compare monotonic stamps only
// within one process.
//
// What PyTorch 1.13 (Debian python3-torch, built without Kineto) stamps:
// torch.profiler / torch.autograd.profiler.profile record each op's start
// and end with the TSC (getApproximateTime() = __rdtsc(), seen in
// ThreadLocalSubqueue::begin_op in libtorch_cpu.so) and convert TSC to
// wall time when the profile ends (ApproximateClockToUnixTimeConverter:
// pairs of (TSC, std::chrono::system_clock::now()) taken at start and end,
// a linear map between them). The trace start (KinetoThreadLocalState's
// start_time_, exposed as profile.kineto_results.trace_start_us()) is
// getTime() = clock_gettime(CLOCK_REALTIME) in µs, and export_chrome_trace
// writes ts = event start_us - trace_start_us (integer µs). Both ends of
// that arithmetic are therefore on the shimmed REALTIME: the TSC cannot be
// shimmed, but the converter maps it onto whatever system_clock reads, and
// a linear map of a linear skew is exact. The monotonic clocks are not
// involved; they get the rate so that other producers (REALTIME origin +
// MONOTONIC deltas, e.g. Kineto's roctracer path) stay consistent too.
//
// Real clocks are read through libc's own clock_gettime (the vDSO, ~40 ns),
// found once with dlsym(RTLD_NEXT) at initialisation; until then, and in
// the thread that is initialising (dlsym may allocate, and an allocator may
// read a clock), with the raw system call (~1.3 µs on these VMs), which
// cannot recurse into this library. gettimeofday, time and timespec_get are
// built on the same real reads (time() on CLOCK_REALTIME_COARSE, as glibc's). Programs that read the vDSO
// themselves or make the system call directly (Go, static binaries) are not
// affected, nor are ntp_gettime and ftime.
//
// Parameters come from the environment at load, with the agent's meaning:
// CHRONOLINK_SHIM_OFFSET_NS (int64, default 0), CHRONOLINK_SHIM_DRIFT_PPM
// (decimal, default 0, |x| <= 100000 as the agent accepts),
// CHRONOLINK_SHIM_T0_NS (int64 epoch ns, default: REALTIME at load, as the
// agent's --virtual-t0-ns). A value that does not parse or is out of range
// prints one line to stderr and _exit(2)s: a producer must never run
// unskewed by accident. Ranges keep every sum inside int64.
//
// Threading: parameters are set once (pthread_once, from the constructor or
// from the first interposed call, whichever comes first) and only read
// afterwards; every interposed function is then thread-safe.
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum { kNsPerSec = 1000000000 };
// |offset| up to ~31 years, t0 within ±126 years of the epoch, |drift| up
// to 10 %: t + offset + drift term stays far inside int64 for any t a clock reads.
static const int64_t kMaxAbsOffsetNs = INT64_C(1000000000000000000);
static const int64_t kMaxAbsT0Ns = INT64_C(4000000000000000000);
static const double kMaxAbsDriftPpm = 100000.0;

// The monotonic clocks that get the rate, each with its own load anchor.
enum MonotonicBase { kMono, kMonoRaw, kBoot, kMonoBases };

struct ShimParams {
  int64_t offset_ns;
  double drift_ppm;
  int64_t t0_ns;
  int64_t tai_offset_ns;               // CLOCK_TAI - CLOCK_REALTIME, whole seconds
  int64_t mono_anchor_ns[kMonoBases];  // each clock's reading at load
};

typedef int (*ClockGettimeFn)(clockid_t, struct timespec*);

static struct ShimParams g_params;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static ClockGettimeFn g_libc_clock_gettime;  // set once inside Init, read-only after
static __thread int t_initialising;          // this thread is inside Init

// The real clock: libc's (vDSO) once known, else the system call.
static int RealClockGettime(clockid_t id, struct timespec* ts) {
  if (g_libc_clock_gettime != NULL) return g_libc_clock_gettime(id, ts);
  return (int)syscall(SYS_clock_gettime, id, ts);  // sets errno on failure
}

static int64_t RawClockNs(clockid_t id) {
  struct timespec ts;
  if (RealClockGettime(id, &ts) != 0) return 0;
  return (int64_t)ts.tv_sec * kNsPerSec + ts.tv_nsec;
}

static _Noreturn void Refuse(const char* name, const char* value, const char* why) {
  // One line, then _exit: exit() would run other libraries' atexit handlers,
  // which may call back into this half-initialised library.
  fprintf(stderr,
          "chronolink clock shim: %s='%s' %s; refusing to run the program on an unskewed clock\n",
          name, value, why);
  fflush(stderr);
  _exit(2);
}

// Accepts exactly what the agent's ParseInt64Text accepts: optional sign, digits.
static int64_t ParseInt64Env(const char* name, int64_t fallback, int64_t max_abs) {
  const char* text = getenv(name);
  if (text == NULL) return fallback;
  const char* p = text;
  while (isspace((unsigned char)*p)) ++p;
  if (*p == '+') ++p;
  if (!(isdigit((unsigned char)*p) || (*p == '-' && isdigit((unsigned char)p[1]))))
    Refuse(name, text, "is not an integer number of nanoseconds");
  errno = 0;
  char* end = NULL;
  const long long v = strtoll(p, &end, 10);
  while (isspace((unsigned char)*end)) ++end;
  if (*end != '\0') Refuse(name, text, "is not an integer number of nanoseconds");
  if (errno == ERANGE || v > max_abs || v < -max_abs) Refuse(name, text, "is out of range");
  return (int64_t)v;
}

// Decimal only (no hex, inf or nan, which strtod would take and the agent's
// std::from_chars(general) would not).
static double ParseDriftEnv(const char* name) {
  const char* text = getenv(name);
  if (text == NULL) return 0.0;
  const char* p = text;
  while (isspace((unsigned char)*p)) ++p;
  if (*p == '+') ++p;
  const char* digits = (*p == '-') ? p + 1 : p;
  if (!(isdigit((unsigned char)*digits) || (*digits == '.' && isdigit((unsigned char)digits[1]))))
    Refuse(name, text, "is not a decimal number of ppm");
  for (const char* q = digits; *q != '\0' && !isspace((unsigned char)*q); ++q) {
    if (!(isdigit((unsigned char)*q) || strchr(".eE+-", *q) != NULL))
      Refuse(name, text, "is not a decimal number of ppm");
  }
  errno = 0;
  char* end = NULL;
  const double v = strtod(p, &end);
  while (isspace((unsigned char)*end)) ++end;
  if (*end != '\0' || errno == ERANGE || !isfinite(v))
    Refuse(name, text, "is not a decimal number of ppm");
  if (!(fabs(v) <= kMaxAbsDriftPpm)) Refuse(name, text, "is out of range -100000..100000 ppm");
  return v;
}

static int64_t TaiOffsetNs(void) {
  struct timex tx;
  memset(&tx, 0, sizeof tx);  // modes = 0: read only
  if (adjtimex(&tx) == -1) return 0;
  return (int64_t)tx.tai * kNsPerSec;
}

static ClockGettimeFn FindLibcClockGettime(void) {
  void* next = dlsym(RTLD_NEXT, "clock_gettime");
  // Never ourselves (a second copy of this library preloaded twice would be).
  return next == (void*)&clock_gettime ? NULL : (ClockGettimeFn)next;
}

static void Init(void) {
  t_initialising = 1;
  g_params.offset_ns = ParseInt64Env("CHRONOLINK_SHIM_OFFSET_NS", 0, kMaxAbsOffsetNs);
  g_params.drift_ppm = ParseDriftEnv("CHRONOLINK_SHIM_DRIFT_PPM");
  g_params.t0_ns = ParseInt64Env("CHRONOLINK_SHIM_T0_NS", RawClockNs(CLOCK_REALTIME), kMaxAbsT0Ns);
  g_params.tai_offset_ns = TaiOffsetNs();
  g_params.mono_anchor_ns[kMono] = RawClockNs(CLOCK_MONOTONIC);
  g_params.mono_anchor_ns[kMonoRaw] = RawClockNs(CLOCK_MONOTONIC_RAW);
  g_params.mono_anchor_ns[kBoot] = RawClockNs(CLOCK_BOOTTIME);
  // Last: anchors and t0 above came from the system call, which is the same
  // kernel clock the vDSO reads.
  g_libc_clock_gettime = FindLibcClockGettime();
  t_initialising = 0;
}

// A clock read from inside Init (through dlsym) must not wait on the
// pthread_once it is part of: it reads unskewed instead.
static void EnsureInit(void) {
  if (!t_initialising) pthread_once(&g_once, Init);
}

__attribute__((constructor)) static void ShimLoad(void) { EnsureInit(); }

// VirtualClock::Apply, same operations in the same order.
static int64_t ApplyWall(int64_t real_ns, int64_t t0_ns) {
  const int64_t since_t0 = real_ns - t0_ns;
  const double skew = g_params.drift_ppm * 1e-6 * (double)since_t0;
  return real_ns + g_params.offset_ns + llround(skew);
}

static int64_t ApplyRate(int64_t real_ns, int64_t anchor_ns) {
  const int64_t since_anchor = real_ns - anchor_ns;
  const double skew = g_params.drift_ppm * 1e-6 * (double)since_anchor;
  return real_ns + llround(skew);
}

// Real reading of clock `id` -> what the program sees; other clocks
// (CPU-time clocks) unchanged.
static int64_t Skew(clockid_t id, int64_t real_ns) {
  switch (id) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
    case CLOCK_REALTIME_ALARM:
      return ApplyWall(real_ns, g_params.t0_ns);
    case CLOCK_TAI:
      return ApplyWall(real_ns, g_params.t0_ns + g_params.tai_offset_ns);
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_COARSE:  // the same clock as MONOTONIC at a lower resolution
      return ApplyRate(real_ns, g_params.mono_anchor_ns[kMono]);
    case CLOCK_MONOTONIC_RAW:
      return ApplyRate(real_ns, g_params.mono_anchor_ns[kMonoRaw]);
    case CLOCK_BOOTTIME:
    case CLOCK_BOOTTIME_ALARM:
      return ApplyRate(real_ns, g_params.mono_anchor_ns[kBoot]);
    default:
      return real_ns;
  }
}

// Floor division, so that a (theoretical) negative instant still has
// 0 <= tv_nsec < 1e9.
static int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

static void ToTimespec(int64_t ns, struct timespec* ts) {
  const int64_t sec = FloorDiv(ns, kNsPerSec);
  ts->tv_sec = (time_t)sec;
  ts->tv_nsec = (long)(ns - sec * kNsPerSec);
}

static int64_t SkewedWallNs(void) { return Skew(CLOCK_REALTIME, RawClockNs(CLOCK_REALTIME)); }

EXPORT int clock_gettime(clockid_t id, struct timespec* ts) {
  EnsureInit();
  struct timespec real;
  if (RealClockGettime(id, &real) != 0) return -1;  // errno set by libc or syscall()
  const int64_t real_ns = (int64_t)real.tv_sec * kNsPerSec + real.tv_nsec;
  const int64_t skewed = Skew(id, real_ns);
  if (skewed == real_ns) {
    *ts = real;  // untouched clocks keep their exact timespec
  } else {
    ToTimespec(skewed, ts);
  }
  return 0;
}

EXPORT int gettimeofday(struct timeval* restrict tv, void* restrict tz) {
  EnsureInit();
  if (tz != NULL && syscall(SYS_gettimeofday, NULL, tz) != 0) return -1;
  // glibc declares tv nonnull, as ts below: no NULL checks the compiler would drop.
  const int64_t ns = SkewedWallNs();
  const int64_t sec = FloorDiv(ns, kNsPerSec);
  tv->tv_sec = (time_t)sec;
  tv->tv_usec = (suseconds_t)((ns - sec * kNsPerSec) / 1000);
  return 0;
}

// glibc's time() reads the coarse clock (the vDSO's whole seconds, up to a
// tick behind CLOCK_REALTIME): so does this one.
EXPORT time_t time(time_t* out) {
  EnsureInit();
  const int64_t ns = Skew(CLOCK_REALTIME_COARSE, RawClockNs(CLOCK_REALTIME_COARSE));
  const time_t sec = (time_t)FloorDiv(ns, kNsPerSec);
  if (out != NULL) *out = sec;
  return sec;
}

EXPORT int timespec_get(struct timespec* ts, int base) {
  EnsureInit();
  if (base != TIME_UTC) return 0;  // glibc 2.36 knows TIME_UTC only
  ToTimespec(SkewedWallNs(), ts);
  return base;
}

// For tests and the workload: the shim's own arithmetic and parameters, so
// that a check can compare them with VirtualClock::Apply bit for bit.
EXPORT int64_t chronolink_shim_apply_ns(int clock_id, int64_t real_ns) {
  EnsureInit();
  return Skew((clockid_t)clock_id, real_ns);
}

EXPORT int64_t chronolink_shim_t0_ns(void) {
  EnsureInit();
  return g_params.t0_ns;
}

// The load reading a monotonic clock's rate is anchored at; -1 for a clock
// that gets no rate.
EXPORT int64_t chronolink_shim_anchor_ns(int clock_id) {
  EnsureInit();
  switch (clock_id) {
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_COARSE: return g_params.mono_anchor_ns[kMono];
    case CLOCK_MONOTONIC_RAW: return g_params.mono_anchor_ns[kMonoRaw];
    case CLOCK_BOOTTIME:
    case CLOCK_BOOTTIME_ALARM: return g_params.mono_anchor_ns[kBoot];
    default: return -1;
  }
}
