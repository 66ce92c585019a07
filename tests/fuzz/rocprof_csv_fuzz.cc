// libFuzzer target for the rocprof CSV reader (collector/importers/
// rocprof_csv.h): each input is one trace file. Invariants: no crash, hang or
// sanitizer report; a refusal says why; every record handed on has a start
// and an end with end >= start > 0; every data row is accepted, skipped or
// refused, nothing else.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collector/importers/rocprof_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronolink::collector;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> fields;
  (void)SplitCsvLine(text.substr(0, text.find('\n')), &fields);

  RocprofReadOptions options;
  options.max_line_bytes = 4096;
  options.max_records = 10'000;
  std::vector<RocprofRecord> records;
  RocprofReadResult result;
  std::string error;
  if (!ParseRocprofCsv(text, options, &records, &result, &error)) {
    if (error.empty()) __builtin_trap();  // a refusal must say why
    return 0;
  }
  if (result.accepted + result.skipped + result.bad_rows != result.rows) __builtin_trap();
  if (records.size() != result.accepted) __builtin_trap();
  for (const RocprofRecord& r : records) {
    if (r.start_ns <= 0 || r.end_ns < r.start_ns) __builtin_trap();
  }
  return 0;
}
