// libFuzzer target for the rocprofv3 JSON reader (collector/importers/
// rocprof_json.h): each input is one results.json. Invariants: no crash, hang
// or sanitizer report (deep nesting included); a refusal says why; every
// record handed on has end >= start > 0 and a GPU (an ordinal or an agent id).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collector/importers/rocprof_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronolink::collector;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  RocprofReadOptions options;
  options.max_records = 10'000;
  options.max_string_bytes = 1024;
  std::vector<RocprofRecord> records;
  RocprofReadResult result;
  std::string error;
  if (!ParseRocprofJson(text, options, &records, &result, &error)) {
    if (error.empty()) __builtin_trap();
    return 0;
  }
  if (records.size() != result.accepted) __builtin_trap();
  if (result.accepted + result.skipped + result.bad_rows != result.rows) __builtin_trap();
  for (const RocprofRecord& r : records) {
    if (r.start_ns <= 0 || r.end_ns < r.start_ns) __builtin_trap();
    if (r.name.size() > options.max_string_bytes + 32) __builtin_trap();
  }
  return 0;
}
