// Reads the CSV kernel traces of AMD's profilers (docs/rocprof-import.md
// lists the columns and where each was verified): rocprof (v1) results.csv
// (`BeginNs`, `EndNs`, `KernelName`, `gpu-id`, `queue-id`, `tid`),
// rocprofv2's file plugin (`Start_Timestamp`, `End_Timestamp`,
// `Kernel_Name`, `GPU_ID`, `Queue_ID`, `Correlation_ID`), rocprofv3's
// kernel_trace.csv (`Start_Timestamp`, `End_Timestamp`, `Kernel_Name`,
// `Agent_Id`, `Queue_Id`, `Correlation_Id`, `Thread_Id`, sizes) and its
// memory_copy_trace.csv (`Direction`, `Source_Agent_Id`,
// `Destination_Agent_Id`). The header row says which; column names match
// case-insensitively and in any order.
//
// Streaming with bounded memory (line_reader.h); quoted fields per RFC 4180
// (kernel names hold commas). Every row that cannot be read — a field count
// unlike the header's, an unterminated quote, a non-numeric or out-of-range
// timestamp, an end before its start — is refused and counted with its line
// number; a file that is mostly refused rows, or whose header is not one of
// the above, fails with one message.
//
// Stateless functions; thread-compatible.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "collector/importers/rocprof_record.h"

namespace chronolink::collector {

bool ReadRocprofCsv(const std::filesystem::path& path, const RocprofReadOptions& options,
                    std::vector<RocprofRecord>* out, RocprofReadResult* result, std::string* error);
// The same from bytes in memory (tests, fuzzing).
bool ParseRocprofCsv(std::string_view bytes, const RocprofReadOptions& options,
                     std::vector<RocprofRecord>* out, RocprofReadResult* result, std::string* error);

// One CSV line -> fields, RFC 4180 quoting ("" is a quote inside quotes).
// False for an unterminated quote or text after a closing quote.
bool SplitCsvLine(std::string_view line, std::vector<std::string>* fields);

}  // namespace chronolink::collector
