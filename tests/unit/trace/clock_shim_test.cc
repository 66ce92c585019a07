// The test-only clock shim (tools/testbed/clock_shim/clock_shim.c) gives an
// unmodified program exactly the agent's virtual clock. A probe program
// (tools/testbed/clock_shim/shim_probe.cc) and Debian's Python read every
// interposed time source, each bracketed by raw system-call readings of the
// real clock behind it; the test checks each reading against
// VirtualClock::Apply of the bracket (Apply is non-decreasing, so the
// skewed reading must lie between the skewed ends), and the shim's own
// arithmetic against Apply bit for bit.
#include <sys/syscall.h>
#include <sys/timex.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "clock/virtual_clock.cc"  // the agent's arithmetic, without linking the agent
#include "tests/support/ci_rule.h"
#include "tests/support/run_process.h"

#ifndef CHRONOLINK_CLOCK_SHIM_SO
#error "CHRONOLINK_CLOCK_SHIM_SO (path of libchronolink_clock_shim.so) must be defined by CMake"
#endif
#ifndef CHRONOLINK_SHIM_PROBE_BIN
#error "CHRONOLINK_SHIM_PROBE_BIN (path of chronolink_shim_probe) must be defined by CMake"
#endif

namespace chronolink::trace {
namespace {

using chronolink::testing::ProcessResult;
using chronolink::testing::RunProcess;

constexpr int64_t kNsPerUs = 1'000;
constexpr int64_t kNsPerSec = 1'000'000'000;
constexpr char kPython[] = "/usr/bin/python3";

struct Bracketed {
  int64_t before = 0;
  int64_t value = 0;
  int64_t after = 0;
};

// What the probe printed: `read` lines by source, shim parameters, `apply` results.
struct ProbeOutput {
  std::map<std::string, Bracketed> reads;
  bool shim_present = false;
  int64_t t0_ns = 0;
  std::map<int, int64_t> anchors;
  std::vector<std::pair<int64_t, int64_t>> applied;  // (real, shim's result) for clock 0
};

ProbeOutput Parse(const std::string& text) {
  ProbeOutput out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string kind;
    f >> kind;
    if (kind == "read") {
      std::string source;
      Bracketed b;
      f >> source >> b.before >> b.value >> b.after;
      out.reads[source] = b;
    } else if (kind == "shim") {
      std::string what;
      f >> what;
      if (what == "t0") {
        out.shim_present = true;
        f >> out.t0_ns;
      } else if (what == "anchor") {
        int id = 0;
        int64_t ns = 0;
        f >> id >> ns;
        out.anchors[id] = ns;
      }
    } else if (kind == "apply") {
      int id = 0;
      int64_t real = 0;
      int64_t result = 0;
      f >> id >> real >> result;
      out.applied.emplace_back(real, result);
    }
  }
  return out;
}

std::map<std::string, std::string> ShimEnv(const std::string& offset, const std::string& drift,
                                           const std::string& t0) {
  return {{"LD_PRELOAD", CHRONOLINK_CLOCK_SHIM_SO},
          {"CHRONOLINK_SHIM_OFFSET_NS", offset},
          {"CHRONOLINK_SHIM_DRIFT_PPM", drift},
          {"CHRONOLINK_SHIM_T0_NS", t0}};
}

ProcessResult RunProbe(const std::map<std::string, std::string>& env,
                       std::vector<std::string> args = {}) {
  std::vector<std::string> argv = {CHRONOLINK_SHIM_PROBE_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, env, std::chrono::seconds(20));
}

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

int64_t TaiOffsetNs() {
  timex tx{};
  return adjtimex(&tx) == -1 ? 0 : static_cast<int64_t>(tx.tai) * kNsPerSec;
}

// value (in units of `unit` ns, floored) lies between the clock's mapping of the bracket.
void ExpectWithin(const std::string& source, const Bracketed& b, const VirtualClock& clock,
                  int64_t unit = 1) {
  const int64_t lo = FloorDiv(clock.Apply(b.before), unit);
  const int64_t hi = FloorDiv(clock.Apply(b.after), unit);
  EXPECT_LE(lo, b.value) << source << ": real [" << b.before << ", " << b.after << "]";
  EXPECT_LE(b.value, hi) << source << ": real [" << b.before << ", " << b.after << "]";
}

const std::vector<std::string> kWallSources = {"clock_gettime.REALTIME", "timespec_get",
                                               "system_clock"};
const std::vector<std::string> kMonotonicSources = {
    "clock_gettime.MONOTONIC", "clock_gettime.MONOTONIC_COARSE", "clock_gettime.MONOTONIC_RAW",
    "clock_gettime.BOOTTIME", "steady_clock"};

int ClockOf(const std::string& source) {
  if (source == "clock_gettime.MONOTONIC_RAW") return CLOCK_MONOTONIC_RAW;
  if (source == "clock_gettime.BOOTTIME") return CLOCK_BOOTTIME;
  return CLOCK_MONOTONIC;  // MONOTONIC, its COARSE variant and steady_clock share its anchor
}

TEST(ClockShimTest, WithoutTheShimEveryReadingIsTheRealClock) {
  const ProcessResult r = RunProbe({});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ProbeOutput p = Parse(r.out);
  EXPECT_FALSE(p.shim_present);
  ASSERT_EQ(p.reads.size(), 13u) << r.out;
  const VirtualClock identity;
  for (const auto& [source, b] : p.reads) {
    const int64_t unit = source == "gettimeofday.us" ? kNsPerUs : source == "time.s" ? kNsPerSec : 1;
    ExpectWithin(source, b, identity, unit);
  }
}

TEST(ClockShimTest, WallClocksReadTheAgentsVirtualClock) {
  // T0 ten minutes ago: the drift term (-52.5 ms) is as visible as the offset.
  const VirtualClockParams params{41'234'567, -87.5, RealtimeNs() - 600 * kNsPerSec};
  const ProcessResult r = RunProbe(ShimEnv("41234567", "-87.5", std::to_string(params.t0_ns)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ProbeOutput p = Parse(r.out);
  ASSERT_TRUE(p.shim_present) << r.out;
  EXPECT_EQ(p.t0_ns, params.t0_ns);
  const VirtualClock clock(params);
  for (const auto& source : kWallSources) {
    ASSERT_TRUE(p.reads.count(source)) << source;
    ExpectWithin(source, p.reads.at(source), clock);
  }
  ExpectWithin("gettimeofday.us", p.reads.at("gettimeofday.us"), clock, kNsPerUs);
  ExpectWithin("time.s", p.reads.at("time.s"), clock, kNsPerSec);
  // The coarse clock is bracketed by coarse readings, TAI by TAI readings (its
  // drift term is taken against the same instant as the wall clock's).
  ExpectWithin("clock_gettime.REALTIME_COARSE", p.reads.at("clock_gettime.REALTIME_COARSE"), clock);
  const VirtualClock tai({params.offset_ns, params.drift_ppm, params.t0_ns + TaiOffsetNs()});
  ExpectWithin("clock_gettime.TAI", p.reads.at("clock_gettime.TAI"), tai);
  // A CPU-time clock is no wall clock: untouched.
  ExpectWithin("clock_gettime.PROCESS_CPUTIME", p.reads.at("clock_gettime.PROCESS_CPUTIME"),
               VirtualClock());
}

TEST(ClockShimTest, MonotonicClocksGetTheRateOnly) {
  // 10 % fast, 30 ms after load: 3 ms of rate, far outside any bracket; the
  // offset must not show.
  const ProcessResult r =
      RunProbe(ShimEnv("-45000000", "100000", std::to_string(RealtimeNs())), {"--sleep-ms=30"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ProbeOutput p = Parse(r.out);
  ASSERT_TRUE(p.shim_present) << r.out;
  for (const auto& source : kMonotonicSources) {
    ASSERT_TRUE(p.reads.count(source)) << source;
    const int id = ClockOf(source);
    ASSERT_TRUE(p.anchors.count(id)) << source;
    const VirtualClock rate_only({0, 100000.0, p.anchors.at(id)});
    ExpectWithin(source, p.reads.at(source), rate_only);
    EXPECT_GT(p.reads.at(source).value - p.reads.at(source).after, 2'000'000) << source;
  }
}

TEST(ClockShimTest, ShimArithmeticIsVirtualClockApplyBitForBit) {
  const int64_t t0 = 1'795'320'926'123'456'789;
  // Instants near T0 (halfway rounding cases included) and far from it.
  std::vector<int64_t> reals;
  for (int64_t d : {0LL, 1LL, -1LL, 999LL, 20'000LL, -20'000LL, 1'234'567'891LL, -987'654'321'987LL,
                    86'400'000'000'000LL, -86'400'000'000'000LL, 100'000'000'000'000'000LL,
                    -1'000'000'000'000'000'000LL}) {
    reals.push_back(t0 + d);
  }
  for (const char* drift : {"0", "45", "-45", "12.345678", "-99.999", "0.001", "100000", "-100000",
                            "2.5e1", "1e-3"}) {
    std::vector<std::string> args;
    for (int64_t real : reals) args.push_back("0:" + std::to_string(real));
    const ProcessResult r = RunProbe(ShimEnv("-3700000", drift, std::to_string(t0)), args);
    ASSERT_EQ(r.exit_code, 0) << drift << ": " << r.err;
    const ProbeOutput p = Parse(r.out);
    ASSERT_EQ(p.applied.size(), reals.size()) << r.out;
    const VirtualClock clock({-3'700'000, std::stod(drift), t0});
    for (const auto& [real, shim] : p.applied) {
      EXPECT_EQ(shim, clock.Apply(real)) << "drift " << drift << " ppm at real " << real;
    }
  }
}

TEST(ClockShimTest, AcceptsWhatTheAgentAccepts) {
  const ProcessResult r = RunProbe(ShimEnv("+5", " 2.5e1 ", " 1795320926000000000"), {"0:1795320926000000000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ProbeOutput p = Parse(r.out);
  EXPECT_EQ(p.t0_ns, 1'795'320'926'000'000'000);
  ASSERT_EQ(p.applied.size(), 1u);
  EXPECT_EQ(p.applied[0].second, 1'795'320'926'000'000'005);
}

TEST(ClockShimTest, BadParametersStopTheProgramAtLoadWithOneLine) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"CHRONOLINK_SHIM_OFFSET_NS", "12ms"},     {"CHRONOLINK_SHIM_OFFSET_NS", ""},
      {"CHRONOLINK_SHIM_OFFSET_NS", "1.5"},      {"CHRONOLINK_SHIM_OFFSET_NS", "99999999999999999999"},
      {"CHRONOLINK_SHIM_DRIFT_PPM", "nan"},      {"CHRONOLINK_SHIM_DRIFT_PPM", "0x10"},
      {"CHRONOLINK_SHIM_DRIFT_PPM", "1e400"},    {"CHRONOLINK_SHIM_DRIFT_PPM", "100000.5"},
      {"CHRONOLINK_SHIM_DRIFT_PPM", "45ppm"},    {"CHRONOLINK_SHIM_T0_NS", "-"},
      {"CHRONOLINK_SHIM_T0_NS", "5000000000000000000"}};
  for (const auto& [name, value] : bad) {
    std::map<std::string, std::string> env = ShimEnv("0", "0", "0");
    env[name] = value;
    const ProcessResult r = RunProbe(env);
    EXPECT_EQ(r.exit_code, 2) << name << "='" << value << "'";
    EXPECT_TRUE(r.out.empty()) << name << "='" << value << "': the program ran: " << r.out;
    EXPECT_NE(r.err.find(name + "='" + value + "'"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Python's time.time_ns/time/monotonic_ns go through the interposed libc
// calls; the truth is read with the raw system call through ctypes.
TEST(ClockShimTest, PythonTimeReadsTheVirtualClock) {
  if (access(kPython, X_OK) != 0) {
    CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI(std::string(kPython) + " is missing");
  }
  const char* script = R"(
import ctypes, sys, time
class TS(ctypes.Structure): _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
libc = ctypes.CDLL(None)
nr = int(sys.argv[1])
def raw(clock):
    t = TS(); libc.syscall(nr, clock, ctypes.byref(t)); return t.s * 10**9 + t.ns
time.sleep(0.03)
for name, clock, read in (("time_ns", 0, time.time_ns), ("time", 0, lambda: int(time.time() * 1e6)),
                          ("monotonic_ns", 1, time.monotonic_ns)):
    b = raw(clock); v = read(); a = raw(clock)
    print("read", name, b, v, a)
libc.chronolink_shim_anchor_ns.restype = ctypes.c_int64
print("shim anchor 1", libc.chronolink_shim_anchor_ns(1))
)";
  // 0.5 % fast since T0 100 s ago (+0.5 s), and 150 µs of rate on the
  // monotonic clock after the 30 ms sleep: both far outside the brackets.
  const VirtualClockParams params{-23'000'000, 5000.25, RealtimeNs() - 100 * kNsPerSec};
  const auto env = ShimEnv("-23000000", "5000.25", std::to_string(params.t0_ns));
  const ProcessResult r = RunProcess({kPython, "-c", script, std::to_string(SYS_clock_gettime)}, env,
                                     std::chrono::seconds(30));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ProbeOutput p = Parse(r.out);
  ASSERT_EQ(p.reads.size(), 3u) << r.out;
  const VirtualClock clock(params);
  ExpectWithin("time.time_ns", p.reads.at("time_ns"), clock);
  // time.time() is a double: compared in µs, one µs either way for its rounding.
  const Bracketed t = p.reads.at("time");
  EXPECT_LE(FloorDiv(clock.Apply(t.before), kNsPerUs) - 1, t.value);
  EXPECT_LE(t.value, FloorDiv(clock.Apply(t.after), kNsPerUs) + 1);
  ASSERT_TRUE(p.anchors.count(CLOCK_MONOTONIC)) << r.out;
  ExpectWithin("time.monotonic_ns", p.reads.at("monotonic_ns"),
               VirtualClock({0, 5000.25, p.anchors.at(CLOCK_MONOTONIC)}));
}

}  // namespace
}  // namespace chronolink::trace
