// What the rocprof readers (rocprof_csv.h, rocprof_json.h) hand on: one GPU
// activity as the profiler wrote it, its times still on the profiler's host
// clock (CLOCK_BOOTTIME for rocprof and rocprofv3, docs/rocprof-import.md),
// and the bookkeeping every reader shares: the read limits, the count of
// rows it refused with their line numbers, and the rule that a file that is
// mostly refused rows fails as a whole. rocprof_import.h turns the records
// into device planes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collector/device/gpu_activity.h"

namespace chronolink::collector {

enum class RocprofFormat : uint8_t {
  kV1Csv,            // rocprof (v1) results.csv: BeginNs, EndNs, KernelName, gpu-id, queue-id
  kV2Csv,            // rocprofv2 file plugin v2: Start_Timestamp, End_Timestamp, Kernel_Name, GPU_ID
  kV3KernelCsv,      // rocprofv3 kernel_trace.csv
  kV3MemoryCopyCsv,  // rocprofv3 memory_copy_trace.csv
  kV3Json,           // rocprofv3 --output-format json (results.json)
};
std::string_view RocprofFormatName(RocprofFormat f);

struct RocprofRecord {
  ActivityKind kind = ActivityKind::kKernel;
  // The GPU: an ordinal the profiler resolved (rocprof's gpu-id, rocprofv3
  // JSON's agent table), or else the profiler's agent id, which the import
  // maps to ordinals over all its files.
  bool ordinal_known = false;
  uint32_t ordinal = 0;
  uint64_t agent_id = 0;
  uint64_t queue = 0;           // the hardware queue it ran on
  uint64_t correlation_id = 0;  // 0: none
  uint64_t thread_id = 0;       // the host thread that launched it (0: unknown)
  int64_t start_ns = 0;         // the profiler's host clock (BOOTTIME), not REALTIME
  int64_t end_ns = 0;           // same clock, >= start_ns
  uint64_t bytes = 0;           // copies
  std::string name;             // kernel name
  std::string details;          // "grid:… block:… …" when the file has them
};

struct RocprofReadOptions {
  size_t max_line_bytes = 1 << 20;    // a CSV row (kernel names can be long)
  uint64_t max_records = 50'000'000;  // beyond this the read fails: memory stays bounded
  size_t max_string_bytes = 1 << 16;  // a JSON string (a kernel name)
  // A file fails when more than this share of its rows is refused (and at
  // least min_bad_to_fail are): it is not what it claims to be.
  double max_bad_fraction = 0.5;
  uint64_t min_bad_to_fail = 4;
};

inline constexpr size_t kMaxListedBadRows = 10;

struct RocprofReadResult {
  RocprofFormat format = RocprofFormat::kV3KernelCsv;
  uint64_t rows = 0;  // data rows (CSV) or records (JSON) seen
  uint64_t accepted = 0;
  uint64_t skipped = 0;                    // valid rows of a kind not imported (host-to-host copies)
  uint64_t bad_rows = 0;                   // refused
  std::vector<uint64_t> bad_line_numbers;  // the first kMaxListedBadRows (JSON: record numbers)
  std::string first_bad_reason;            // "line 7: EndNs is before BeginNs"
  std::string unit = "line";               // what the numbers count ("record" for JSON)

  // Counts a refused row.
  void Refuse(uint64_t line, const std::string& why);
  // False with *error when the refused rows are the majority.
  bool Acceptable(const RocprofReadOptions& o, std::string* error) const;
};

// A timestamp field: decimal digits (spaces around allowed), at most
// INT64_MAX. False with *why naming `column`.
bool ParseTimestampNs(std::string_view text, std::string_view column, int64_t* out, std::string* why);
// An unsigned field (ids, sizes); "" is 0.
bool ParseUnsigned(std::string_view text, std::string_view column, uint64_t* out, std::string* why);
// rocprofv3's agent id: "4" or "Agent 4".
bool ParseAgentId(std::string_view text, uint64_t* out, std::string* why);

// Start/end sanity shared by the readers: both set, end >= start.
bool CheckSpan(int64_t start_ns, int64_t end_ns, std::string* why);

}  // namespace chronolink::collector
