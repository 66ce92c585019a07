// chronolink_shim_probe: the program tests run with and without the clock
// shim preloaded (tests/unit/trace/clock_shim_test.cc). It reads every time
// source the shim interposes, each bracketed by two readings of the real
// clock behind it taken with the raw system call (which no preload can
// change), and prints one line per source:
//     read <source> <real_before_ns> <value> <real_after_ns>
// <value> is in the source's own unit (ns, µs for gettimeofday, s for time).
// If the shim is loaded it also prints its parameters and, for every
// argument CLOCK_ID:REAL_NS, the shim's own mapping of that reading:
//     shim t0 <ns> | shim anchor <clock_id> <ns> | apply <clock_id> <real_ns> <result>
// A test compares these with VirtualClock::Apply. --sleep-ms=N first sleeps
// N ms (a relative sleep, which no clock skew changes), so that a rate
// applied since the library loaded has grown large enough to see.
// Single-threaded.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>

namespace {

int64_t RawNs(clockid_t id) {
  timespec ts{};
  syscall(SYS_clock_gettime, id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t NsOf(const timespec& ts) { return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec; }

void Bracket(const char* source, clockid_t real_clock, const std::function<int64_t()>& read) {
  const int64_t before = RawNs(real_clock);
  const int64_t value = read();
  const int64_t after = RawNs(real_clock);
  std::printf("read %s %" PRId64 " %" PRId64 " %" PRId64 "\n", source, before, value, after);
}

std::function<int64_t()> ClockGettime(clockid_t id) {
  return [id] {
    timespec ts{};
    clock_gettime(id, &ts);
    return NsOf(ts);
  };
}

void ReadAll() {
  Bracket("clock_gettime.REALTIME", CLOCK_REALTIME, ClockGettime(CLOCK_REALTIME));
  Bracket("clock_gettime.REALTIME_COARSE", CLOCK_REALTIME_COARSE, ClockGettime(CLOCK_REALTIME_COARSE));
  Bracket("clock_gettime.TAI", CLOCK_TAI, ClockGettime(CLOCK_TAI));
  Bracket("clock_gettime.MONOTONIC", CLOCK_MONOTONIC, ClockGettime(CLOCK_MONOTONIC));
  Bracket("clock_gettime.MONOTONIC_COARSE", CLOCK_MONOTONIC_COARSE, ClockGettime(CLOCK_MONOTONIC_COARSE));
  Bracket("clock_gettime.MONOTONIC_RAW", CLOCK_MONOTONIC_RAW, ClockGettime(CLOCK_MONOTONIC_RAW));
  Bracket("clock_gettime.BOOTTIME", CLOCK_BOOTTIME, ClockGettime(CLOCK_BOOTTIME));
  Bracket("clock_gettime.PROCESS_CPUTIME", CLOCK_PROCESS_CPUTIME_ID, ClockGettime(CLOCK_PROCESS_CPUTIME_ID));
  Bracket("gettimeofday.us", CLOCK_REALTIME, [] {
    timeval tv{};
    gettimeofday(&tv, nullptr);
    return static_cast<int64_t>(tv.tv_sec) * 1'000'000 + tv.tv_usec;
  });
  Bracket("time.s", CLOCK_REALTIME_COARSE, [] { return static_cast<int64_t>(time(nullptr)); });
  Bracket("timespec_get", CLOCK_REALTIME, [] {
    timespec ts{};
    timespec_get(&ts, TIME_UTC);
    return NsOf(ts);
  });
  Bracket("system_clock", CLOCK_REALTIME, [] {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count());
  });
  Bracket("steady_clock", CLOCK_MONOTONIC, [] {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now().time_since_epoch())
                                    .count());
  });
}

// The shim's exported helpers, when it is loaded (RTLD_DEFAULT finds a
// preloaded library's symbols).
void PrintShim(int argc, char** argv) {
  using ApplyFn = int64_t (*)(int, int64_t);
  using T0Fn = int64_t (*)();
  using AnchorFn = int64_t (*)(int);
  auto apply = reinterpret_cast<ApplyFn>(dlsym(RTLD_DEFAULT, "chronolink_shim_apply_ns"));
  auto t0 = reinterpret_cast<T0Fn>(dlsym(RTLD_DEFAULT, "chronolink_shim_t0_ns"));
  auto anchor = reinterpret_cast<AnchorFn>(dlsym(RTLD_DEFAULT, "chronolink_shim_anchor_ns"));
  if (apply == nullptr || t0 == nullptr || anchor == nullptr) {
    std::printf("shim absent\n");
    return;
  }
  std::printf("shim t0 %" PRId64 "\n", t0());
  for (clockid_t id : {CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME}) {
    std::printf("shim anchor %d %" PRId64 "\n", static_cast<int>(id), anchor(id));
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto colon = arg.find(':');
    if (colon == std::string::npos) continue;
    const int id = std::atoi(arg.substr(0, colon).c_str());
    const int64_t real = std::strtoll(arg.substr(colon + 1).c_str(), nullptr, 10);
    std::printf("apply %d %" PRId64 " %" PRId64 "\n", id, real, apply(id, real));
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--sleep-ms=", 0) == 0) {
      const long ms = std::atol(arg.c_str() + 11);
      timespec ts{ms / 1000, (ms % 1000) * 1'000'000};
      while (nanosleep(&ts, &ts) != 0) {
      }
    }
  }
  ReadAll();
  PrintShim(argc, argv);
  return 0;
}
