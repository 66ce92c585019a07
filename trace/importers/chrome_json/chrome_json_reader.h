// Reads a Chrome trace-event JSON document (the bare array or the
// {"traceEvents": [...]} object; PyTorch/Kineto and the legacy PyTorch
// profiler included) into the XSpace model, streaming: the file is parsed
// in one pass with a SAX handler and never held whole, so memory is the
// model's, not the document's. Every event and every key of it is kept
// (docs/chrome-trace.md), and ts/dur are read exactly from the number's
// text into ns + ps.
//
// Time base of the result (HostTrace::line_base_ns):
//  * baseTimeNanoseconds present (Kineto since 2024): ts are relative to it;
//  * otherwise ts >= 1e17 ns (1e14 µs) are absolute epoch times: base 0;
//  * otherwise ts are relative to something the file does not say (the
//    legacy profiler's start): base = options.origin_ns when given, else
//    line_base_known = false.
//
// Errors: false with one message naming the source, the byte offset and,
// inside an event, traceEvents[i]; *out is then left untouched. Never
// throws. Stateless; reading different files from several threads is safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "trace/model/host_trace.h"

namespace chronolink::trace {

struct ChromeReadOptions {
  // Epoch ns that ts = 0 stands for in a relative trace without
  // baseTimeNanoseconds (the legacy PyTorch profiler's start).
  std::optional<int64_t> origin_ns;
  // The recording host (HostTrace::host, XSpace hostnames[0]).
  std::string host;
};

bool ReadChromeJsonFile(const std::filesystem::path& path, const ChromeReadOptions& options,
                        HostTrace* out, std::string* error);

// The same from bytes in memory (tests, fuzzing); `source` is left empty.
bool ParseChromeJson(std::string_view bytes, const ChromeReadOptions& options, HostTrace* out,
                     std::string* error);

}  // namespace chronolink::trace
