// The XSpace wire path's one entry point: what a streamed align asks of it
// for each host file, without building the model. First each file's span
// for the plan (predicted from its headers, or scanned from every event:
// xspace_span_scan.h), then each file aligned on the plan and written
// (xspace_wire_align.h, checked by xspace_wire_check.h). Where it declines,
// it says why and the caller aligns the host through the model, which reads
// and reports the file as it deserves.
//
// Not thread-safe: one XSpaceWirePath per thread; it keeps its buffers from
// one host to the next.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/align/trace_aligner.h"
#include "trace/correct/host_clock_map.h"
#include "trace/importers/xspace/mapped_file.h"
#include "trace/wire/xspace_span_scan.h"
#include "trace/wire/xspace_wire_align.h"

namespace chronolink::trace {

// One host's span for the plan, and whether it was predicted (a predicted
// span is checked by the rewrite: kMispredicted when it was wrong).
struct WireHostSpan {
  HostSpanInstants span;
  bool predicted = false;
};

class XSpaceWirePath {
 public:
  // The span of the file at `path`: predicted when `predict` and the headers
  // tell, else scanned from its bytes; nullopt with *why when neither can
  // (the model's parse must say).
  std::optional<WireHostSpan> SpanOf(const std::filesystem::path& path, bool predict, std::string* why);

  // Called with "read", "align" and "write" as each phase of AlignFile ends.
  using PhaseEnd = std::function<void(const char* phase)>;

  // Aligns the file at `path` (its host named by the file name rule) as plan
  // entry `index` and writes it to `out`. kAligned: written, and
  // result->hosts[index] filled and the reader's warnings appended to
  // *notes. kDeclined or kMispredicted (`predicted` was wrong): *why says
  // why, result and notes untouched, nothing written, *error empty. *error
  // set: the output could not be written. A rewrite whose own output failed
  // its check is a bug here: that adds a note whatever the caller logs.
  WireAlignOutcome AlignFile(const std::filesystem::path& path, size_t index, bool predicted,
                             const HostClockMap& map, const AlignOptions& options, AlignResult* result,
                             const std::filesystem::path& out, std::vector<std::string>* notes,
                             const PhaseEnd& phase_end, std::string* why, std::string* error);

 private:
  ScanBuffer scan_buffer_;
  MappedFile input_;
  WireOutput output_;
};

}  // namespace chronolink::trace
