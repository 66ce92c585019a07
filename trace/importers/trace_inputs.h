// What the user names on chronolink-trace's command line, read into the
// model: TensorBoard logdirs and run directories (every `<host>.xplane.pb`
// of the run), single `.xplane.pb` files, and Chrome/Kineto `.json` files.
// The format of a file is told by its content, not only its name. The one
// table of readers lives here (Perfetto's trace_processor registers its
// importers the same way).
//
// Relative Chrome traces (the legacy PyTorch profiler writes `ts` from the
// profiler's start) get their start from `--origin HOST=NS` or from the
// sidecar `<file>.chronolink-origin.json` a workload writes beside them
// (docs/traces.md, "Traces with relative times").
//
// Single-threaded; reads files only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "trace/model/host_trace.h"

namespace chronolink::trace {

struct TraceInputOptions {
  std::string run;                             // run name inside a logdir; empty: the latest
  std::map<std::string, int64_t> origins_ns;   // host -> start of relative times, epoch ns
  bool read_origin_sidecars = true;
};

struct TraceInputs {
  std::vector<HostTrace> hosts;     // in the order named, hosts of a run sorted by name
  std::string run_name;             // the run the XSpace hosts came from ("" for loose files)
  std::vector<std::string> notes;   // one line each: what was read, origins taken, warnings
  bool AllXSpace() const;
  bool AllChromeJson() const;
};

// One file the inputs name, resolved but not read.
struct TraceInputFile {
  std::filesystem::path path;
  TraceFormat format = TraceFormat::kXSpace;  // told by the first byte
  std::string host;                           // the host its trace will be named (file name rule)
};

struct TraceInputList {
  std::vector<TraceInputFile> files;
  std::string run_name;
  std::vector<std::string> notes;
  bool AllXSpace() const;
};

// "HOST=NS" (NS decimal epoch nanoseconds) for --origin.
bool ParseOrigin(const std::string& text, std::string* host, int64_t* ns, std::string* error);

bool LoadTraceInputs(const std::vector<std::string>& inputs, const TraceInputOptions& options,
                     TraceInputs* out, std::string* error);

// The two halves of LoadTraceInputs, for callers that read one host at a
// time: resolve what the inputs name (runs, files, formats, host names;
// two files of one host refused), then read one of them into `out`
// (appending its trace and notes).
bool ListTraceInputs(const std::vector<std::string>& inputs, const TraceInputOptions& options,
                     TraceInputList* out, std::string* error);
bool LoadTraceInput(const TraceInputFile& file, const TraceInputOptions& options, TraceInputs* out,
                    std::string* error);

}  // namespace chronolink::trace
