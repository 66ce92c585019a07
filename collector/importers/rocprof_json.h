// Reads rocprofv3's JSON output (`--output-format json`, results.json; the
// layout of rocprofiler-sdk's rocprofv3-schema.json, docs/rocprof-import.md):
//   {"rocprofiler-sdk-tool": [ {            one object per profiled process
//      "agents": [ {"id": {"handle"}, "type" (2 = GPU), "node_id",
//                   "logical_node_type_id" (newer), ...} ],
//      "kernel_symbols": [ {"kernel_id", "kernel_name", "formatted_kernel_name", ...} ],
//      "buffer_records": {
//        "kernel_dispatch": [ {"thread_id", "correlation_id": {"internal"},
//            "start_timestamp", "end_timestamp",
//            "dispatch_info": {"agent_id": {"handle"}, "queue_id": {"handle"},
//                              "kernel_id", "grid_size", "workgroup_size", ...}} ],
//        "memory_copy": [ {"operation" (2 H2D, 3 D2H, 4 D2D), "start_timestamp",
//            "end_timestamp", "src_agent_id", "dst_agent_id", "bytes", ...} ] } } ]}
// (a bare process object at the top is read too). Every other key is
// skipped unread. GPU ordinals come from the agents table: a GPU agent's
// logical_node_type_id when written, else its rank by node_id among the
// process's GPU agents.
//
// Streaming (a SAX parse over the file in fixed chunks): only the record
// being read is held, strings are capped, nesting is limited. A record that
// is not valid (a missing or non-integer timestamp, end before start, an
// agent that is not a GPU) is refused and counted with its number; broken
// JSON fails with the byte offset; a file that is mostly refused records
// fails as a whole.
//
// Stateless functions; thread-compatible.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "collector/importers/rocprof_record.h"

namespace chronolink::collector {

bool ReadRocprofJson(const std::filesystem::path& path, const RocprofReadOptions& options,
                     std::vector<RocprofRecord>* out, RocprofReadResult* result, std::string* error);
// The same from bytes in memory (tests, fuzzing).
bool ParseRocprofJson(std::string_view bytes, const RocprofReadOptions& options,
                      std::vector<RocprofRecord>* out, RocprofReadResult* result, std::string* error);

}  // namespace chronolink::collector
