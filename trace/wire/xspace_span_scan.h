// The span of one host's XSpace file read straight from its wire bytes,
// without building the model: the line time base and the first and last
// instants, exactly as DetectLineBase and HostSpan would find them on the
// parsed message. `chronolink-trace align` streams one host at a time and
// needs every host's first instant (the common origin) before it rewrites
// the first one; this pass costs a fraction of a parse and no memory.
//
// Only the lines' timestamps and the events' offsets, durations and oneof
// case are decoded; everything else is skipped by wire type, except the
// first `Task Environment` plane, which is small and is parsed with
// protobuf so that its stats read exactly as the model reads them.
//
// The scan never guesses: anything it does not decide exactly as the
// parser would (groups, malformed or truncated bytes, an instant outside
// int64, mixed line bases, no timed event) returns nullopt with the reason,
// and the caller parses the file instead, which reports such files as they
// deserve. tests/fuzz/xspace_reader_fuzz.cc checks that every span the scan
// returns equals the parsed model's.
//
// Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "trace/importers/xspace/line_base.h"
#include "trace/model/host_span.h"

namespace chronolink::trace {

struct XSpaceSpan {
  LineBase base;
  HostSpanInstants span;  // on the host's clock, line base applied
};

std::optional<XSpaceSpan> ScanXSpaceSpan(std::string_view bytes, std::string* why);

// A prediction of the span of one host's file that reads only the headers
// of its planes and lines, each line's first event and the Task Environment
// planes (a few kilobytes, whatever the file's size): exact when each
// line's first event holds its earliest instant (events in start order, as
// producers write them), except the last instant, which it only guesses
// (the session's stop, else the first events' ends). Nothing may trust it:
// the wire-level rewrite decodes every event and checks that the first
// instant was right (xspace_wire_align.h, WireAlignPredictedHost). nullopt
// with *why where it cannot tell (non-canonical field order, malformed
// headers, no timed first event).
std::optional<XSpaceSpan> PredictXSpaceFileSpan(const std::filesystem::path& path, std::string* why);

// Bytes read from one file, kept to be reused by the next (a file is read
// whole into it; the exact scan is the fallback path and keeps to plain
// reads; the wire rewrite maps its input through MappedFile, which guards
// against a file truncated meanwhile).
class ScanBuffer {
 public:
  char* Reserve(size_t bytes);

 private:
  std::unique_ptr<char[]> data_;
  size_t capacity_ = 0;
};

// A whole file read into `buffer`; nullopt with *why when it cannot be read
// (or is not a regular file of a size the reader accepts).
std::optional<std::string_view> ReadXSpaceFileBytes(const std::filesystem::path& path, ScanBuffer* buffer,
                                                    std::string* why);

// The same over a file.
std::optional<XSpaceSpan> ScanXSpaceFileSpan(const std::filesystem::path& path, ScanBuffer* buffer,
                                             std::string* why);

}  // namespace chronolink::trace
