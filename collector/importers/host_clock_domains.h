// The node's other host clocks against CLOCK_REALTIME, measured while a
// profiler runs and written to a JSONL file, so that timestamps the profiler
// took on one of them (rocprofv3 and rocprof stamp CLOCK_BOOTTIME,
// docs/rocprof-import.md) can later be moved onto REALTIME with a bound.
//
// A measurement brackets one REALTIME read between two reads of the domain's
// clock and keeps the tightest of a few such brackets (the idea of
// clock/kernel_clock_mapping.h, applied to BOOTTIME, MONOTONIC and
// MONOTONIC_RAW): the REALTIME read happened at some domain instant inside
// the bracket, so REALTIME - domain at the bracket's midpoint is known to
// half its width plus the clocks' read granularity.
//
// The file (docs/rocprof-import.md, "host-clocks file"):
//   {"schema":"chronolink.host_clocks/1","host":"node1","boot_id":"…",
//    "started_realtime_ns":…,"period_ns":…,"granularity_ns":…}
//   {"domain":"boottime","ref_ns":…,"offset_ns":…,"error_ns":…,"bracket_ns":…}
//   … one line per domain per sampling instant, each written and flushed
//   whole, so a recording cut short by a signal or a crash is still a
//   complete file up to its last line.
// host_clocks_loader.h reads it back.
//
// HostClockRecorder is not thread-safe; HostClocksWriter is one writer per file.
#pragma once

#include <time.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "clock/kernel_clock_mapping.h"  // ClockReadFn
#include "clock/timestamp.h"

namespace chronolink::collector {

inline constexpr char kHostClocksSchema[] = "chronolink.host_clocks/1";

// The host clocks a profiler may stamp with. kRealtime is the target: it
// needs no recording.
enum class HostClockDomain : uint8_t { kBoottime = 0, kMonotonic = 1, kMonotonicRaw = 2, kRealtime = 3 };
inline constexpr HostClockDomain kRecordedDomains[] = {
    HostClockDomain::kBoottime, HostClockDomain::kMonotonic, HostClockDomain::kMonotonicRaw};

std::string_view HostClockDomainName(
    HostClockDomain d);  // "boottime", "monotonic", "monotonic_raw", "realtime"
bool ParseHostClockDomain(std::string_view name, HostClockDomain* out);
clockid_t HostClockId(HostClockDomain d);
ClockDomain ToClockDomain(HostClockDomain d);

// One line of the file: REALTIME - domain, measured at the domain's ref_ns.
struct HostClockSample {
  HostClockDomain domain = HostClockDomain::kBoottime;
  int64_t ref_ns = 0;      // the domain's clock (BOOTTIME, ...) at the measurement
  int64_t offset_ns = 0;   // REALTIME - domain at ref_ns
  int64_t error_ns = 0;    // |offset_ns - true offset at ref_ns| <= error_ns
  int64_t bracket_ns = 0;  // width of the tightest bracket (the domain's ns)
};

struct HostClocksHeader {
  std::string schema = kHostClocksSchema;
  std::string host;
  std::string boot_id;              // /proc/sys/kernel/random/boot_id
  int64_t started_realtime_ns = 0;  // kNodeRealtime: when the recording began
  int64_t period_ns = 0;            // the sampling period asked for
  int64_t granularity_ns = 0;       // read granularity added to every error
};

struct HostClockRecorderOptions {
  int reads_per_sample = 7;  // brackets per domain per Measure(); the tightest is kept
  // A domain whose tightest bracket is wider than this is not sampled this
  // time (the thread was preempted through every read).
  int64_t max_bracket_ns = 50'000;
  // < 0: the largest clock_getres of REALTIME and the recorded domains.
  int64_t read_granularity_ns = -1;
};

class HostClockRecorder {
 public:
  explicit HostClockRecorder(const HostClockRecorderOptions& options = {}, ClockReadFn read = {});

  // Measures every recorded domain once now. Domains whose every bracket
  // was too wide (or went backwards) are left out and counted.
  std::vector<HostClockSample> Measure();

  int64_t granularity_ns() const { return granularity_ns_; }
  uint64_t measured() const { return measured_; }
  uint64_t rejected() const { return rejected_; }

 private:
  bool Bracket(HostClockDomain domain, HostClockSample* out);

  HostClockRecorderOptions options_;
  ClockReadFn read_;
  int64_t granularity_ns_ = 1;
  uint64_t measured_ = 0;
  uint64_t rejected_ = 0;
};

// The file's lines, written one whole line per write(2).
class HostClocksWriter {
 public:
  HostClocksWriter() = default;
  HostClocksWriter(const HostClocksWriter&) = delete;
  HostClocksWriter& operator=(const HostClocksWriter&) = delete;
  ~HostClocksWriter();

  // Creates (truncates) `path` and writes the header.
  bool Open(const std::filesystem::path& path, const HostClocksHeader& header, std::string* error);
  bool Write(const HostClockSample& sample, std::string* error);
  // fsyncs and closes; false when either failed.
  bool Close(std::string* error);
  uint64_t samples_written() const { return samples_written_; }

 private:
  bool WriteLine(const std::string& line, std::string* error);

  int fd_ = -1;
  std::filesystem::path path_;
  uint64_t samples_written_ = 0;
};

std::string HeaderLine(const HostClocksHeader& h);
std::string SampleLine(const HostClockSample& s);

// This boot's id (/proc/sys/kernel/random/boot_id, trimmed); false with *error.
bool CurrentBootId(std::string* boot_id, std::string* error);

}  // namespace chronolink::collector
