// Reads one host's `<host>.xplane.pb` (XSpace, proto/xplane.proto) into a
// HostTrace: the message is parsed straight into the trace's arena, streamed
// from the file (no copy of the whole file in memory), unknown fields kept.
// The reader also decides what the model needs beyond the message: the host
// name and the line time base (docs/xspace.md, "Time").
//
// Bad input never throws or crashes: a false return and one message naming
// the file and, where the wire data allows, the byte offset and what was
// expected there. Files of 2 GiB or more are refused (protobuf's int limit).
//
// Stateless; safe to call from several threads on different HostTraces.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "trace/model/host_trace.h"

namespace chronolink::trace {

// What the reader noticed without failing.
struct XSpaceReadResult {
  std::vector<std::string> warnings;
};

// Reads `path`; host = hostnames[0] when present, else the file name without
// `.xplane.pb` (when both exist and differ the file name wins and a warning
// says so). On failure `*out` is left an empty trace and `*error` says why.
bool ReadXSpaceFile(const std::filesystem::path& path, HostTrace* out, std::string* error,
                    XSpaceReadResult* result = nullptr);

// What a profile file of one host is called: <host>.xplane.pb (XProf).
inline constexpr std::string_view kXSpaceFileSuffix = ".xplane.pb";

// The host a file's trace is named: its file name without `.xplane.pb`.
std::string HostFromXSpaceFileName(const std::filesystem::path& path);
// The reader's warning for file `name` when its file name's host and its
// hostnames[0] (`listed`) disagree; empty when they agree or either is empty.
std::string HostnameWarning(std::string_view name, std::string_view file_host, std::string_view listed);

// Parses serialized bytes (the fuzz entry point): host = hostnames[0] or "".
bool ParseXSpace(std::string_view bytes, HostTrace* out, std::string* error,
                 XSpaceReadResult* result = nullptr);

// Keeps up to `max_bytes` of the large arena blocks freed by traces this
// reader built, for the next read to reuse (0, the default: none kept). For
// a program that reads one large trace after another and frees each
// (chronolink-trace align); the memory stays with the process.
void SetXSpaceBlockReuse(size_t max_bytes);

// The largest file or buffer the reader accepts (protobuf sizes are int).
inline constexpr int64_t kMaxXSpaceBytes = 2'147'483'647;

}  // namespace chronolink::trace
