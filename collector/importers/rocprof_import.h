// rocprof / rocprofv3 trace files -> a host's XSpace device planes on
// REALTIME: reads every file (CSV or JSON, told apart by their first byte),
// gives each GPU an ordinal (rocprof's gpu-id and rocprofv3 JSON's agent
// table say it; rocprofv3 CSV agent ids are numbered in increasing order
// over all the files), and exports the records through
// collector/export/device_planes.h with the profiler's host clock converted
// by a recorded host clock domain (host_clocks_loader.h): every event
// carries that conversion's bound. What the conversion cannot place is
// counted there, never guessed.
//
// Stateless functions; thread-compatible.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "collector/export/device_planes.h"
#include "collector/importers/rocprof_record.h"
#include "trace/model/host_trace.h"

namespace chronolink::collector {

struct RocprofFileResult {
  std::filesystem::path path;
  RocprofReadResult read;
};

struct RocprofImportResult {
  std::vector<RocprofFileResult> files;
  std::map<uint64_t, uint32_t> agent_ordinals;  // rocprofv3 CSV agent id -> GPU ordinal
  std::map<uint32_t, uint64_t> events_per_gpu;  // records handed to the export, per ordinal
  int64_t first_ns = 0;                         // earliest start over the records, the profiler's clock
  int64_t last_ns = 0;                          // latest end, same clock
  DeviceExportStats exported;
};

// One file, CSV or JSON by its first non-blank byte ('{' or '[': JSON).
bool ReadRocprofFile(const std::filesystem::path& path, const RocprofReadOptions& options,
                     std::vector<RocprofRecord>* out, RocprofReadResult* result, std::string* error);

// Records -> one DeviceExport per GPU (its activity on the profiler's clock,
// converted by `conversion`), ordinals assigned as above.
std::vector<DeviceExport> RocprofDeviceExports(const std::vector<RocprofRecord>& records,
                                               const HostDomainConversion& conversion,
                                               std::map<uint64_t, uint32_t>* agent_ordinals);

// Reads `files` and appends their device planes to `trace` (host set by
// the caller). False with *error on a file that fails or an export refused.
bool ImportRocprof(const std::vector<std::filesystem::path>& files, const HostDomainConversion& conversion,
                   const RocprofReadOptions& options, trace::HostTrace* trace, RocprofImportResult* result,
                   std::string* error);

}  // namespace chronolink::collector
