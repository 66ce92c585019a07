// Writes hosts' traces as one Chrome trace-event JSON document that Perfetto
// UI and chrome://tracing open, streaming (events are serialised one at a
// time into a 1 MiB buffer; no DOM of the trace) into a temporary file that
// is fsync'd and renamed over the destination only when complete.
//
// Two layouts (docs/chrome-trace.md, "What is written"):
//  * Faithful: one host that was read from Chrome JSON comes back in its own
//    flavour: array or object form, its top-level keys, pids/tids and every
//    event key. ts are relative to a base written as baseTimeNanoseconds:
//    the document's own (the model's current line_base_ns), else a known
//    start (a legacy trace given its origin), else the earliest event's
//    second (absolute inputs); a trace relative to an unknown start stays
//    relative to it.
//  * Times, in both layouts, lie on a binary grid of microseconds that a
//    reader parsing doubles reads exactly (micros_grid.h).
//  * Export: XSpace hosts, or several hosts (combine). Each drawn plane of
//    each host becomes a process with a fresh pid (1, 2, ...), named
//    "<host>: <plane or process name>", labelled with the host, sorted in
//    host order; lines become threads. ts are relative to one origin
//    (options.origin_ns, else the earliest non-zero line base, else the
//    earliest event floored to a second) written as baseTimeNanoseconds.
//    XSpace planes XProf does not draw (Task Environment, /host:metadata,
//    planes without events) and the JSON hosts' top-level keys go, with
//    each host's name, source and hostnames, into the top-level
//    "chronolinkHosts" array.
//
// Stateless; writing different paths from several threads is safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "trace/model/host_trace.h"

namespace chronolink::trace {

struct ChromeWriteOptions {
  // Keys added to the top-level object (e.g. the caller's "chronolink"
  // provenance object); a key the document already has is replaced. A
  // faithful array-form document becomes the object form when this is not
  // empty. Must be an object.
  nlohmann::json top_level_extra = nlohmann::json::object();
  // Export layout: the epoch ns that ts = 0 stands for.
  std::optional<int64_t> origin_ns;
};

bool WriteChromeJsonFile(const std::vector<const HostTrace*>& hosts,
                         const std::filesystem::path& path, const ChromeWriteOptions& options,
                         std::string* error);

// The same document into a string (tests and fuzzing).
bool WriteChromeJsonString(const std::vector<const HostTrace*>& hosts,
                           const ChromeWriteOptions& options, std::string* out, std::string* error);

}  // namespace chronolink::trace
