// How a Chrome trace-event document is held in the XSpace model: the
// reserved stat names and stat-metadata descriptions the reader writes and
// the writer reads (docs/chrome-trace.md, "Mapping into XSpace").
//
// A stat's kind is told by its metadata's description, so an arg named
// "chrome.cat" and the event field `cat` never collide:
//   ""                  an `args` entry, typed value (int64/uint64/double/str)
//   "chrome:json"       an `args` entry whose str value is JSON text
//                       (object, array, true/false/null, a number kept as written)
//   "chrome:field"      an event field other than name/ph/ts/dur/pid/tid/args,
//                       stat named "chrome.<key>", typed value
//   "chrome:field+json" the same with a JSON-text value
//   "chrome:ref"        a string interned for ref_value (cat, ph), never a stat
// XSpace-origin stats keep their own descriptions and all read as args.
//
// Constants and pure helpers; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "proto/xplane.pb.h"

namespace chronolink::trace::chrome {

enum class StatKind { kArg, kArgJson, kField, kFieldJson, kRefTarget };

inline constexpr std::string_view kDescArgJson = "chrome:json";
inline constexpr std::string_view kDescField = "chrome:field";
inline constexpr std::string_view kDescFieldJson = "chrome:field+json";
inline constexpr std::string_view kDescRefTarget = "chrome:ref";

std::string_view DescriptionOf(StatKind kind);
StatKind KindOfDescription(std::string_view description);
inline bool IsField(StatKind k) { return k == StatKind::kField || k == StatKind::kFieldJson; }
inline bool IsJson(StatKind k) { return k == StatKind::kArgJson || k == StatKind::kFieldJson; }

// Field stats are named kFieldPrefix + the JSON key ("chrome.cat").
inline constexpr std::string_view kFieldPrefix = "chrome.";
inline constexpr std::string_view kPh = "chrome.ph";    // ref; absent means "X"
inline constexpr std::string_view kCat = "chrome.cat";  // ref when a string
// Which of name/ts/dur/args the event had, when that differs from the
// default for its ph (see KeyBits); int64.
inline constexpr std::string_view kKeys = "chrome.keys";

// Bits of kKeys.
inline constexpr int64_t kHasTs = 1;
inline constexpr int64_t kHasDur = 2;
inline constexpr int64_t kHasName = 4;
inline constexpr int64_t kHasArgs = 8;  // "args": {} written even with no arg stats

// Default key set: name always; ts for all but metadata (ph M, whose ts/dur
// are kept verbatim as fields); dur for complete events (X); args when the
// event has arg stats.
int64_t DefaultKeys(std::string_view ph, bool has_arg_stats);

// Plane stats.
// Original pid when it is not an int64 (a string such as "CPU functions"),
// JSON text; the plane id is then assigned.
inline constexpr std::string_view kPid = "chrome.pid";
// {"<line id>": <original tid JSON or null when absent>} for lines whose tid
// is not an int64; JSON text.
inline constexpr std::string_view kTids = "chrome.tids";

// The plane holding the document's top-level keys other than traceEvents
// (one stat per key, named as the key; JSON kinds as above). XProf draws no
// plane of this name.
inline constexpr std::string_view kTopLevelPlane = "chrome.top_level";
// On that plane: "array" or "object" (field kind).
inline constexpr std::string_view kForm = "chrome.form";
// On that plane: 1 when the document had baseTimeNanoseconds (its value is
// HostTrace::line_base_ns, so the writer writes the current base).
inline constexpr std::string_view kHadBaseTime = "chrome.base_time";
inline constexpr std::string_view kBaseTimeKey = "baseTimeNanoseconds";

// Metadata event names (ph "M") whose args set plane and line names.
inline constexpr std::string_view kProcessName = "process_name";
inline constexpr std::string_view kThreadName = "thread_name";
inline constexpr std::string_view kProcessLabels = "process_labels";
inline constexpr std::string_view kProcessSortIndex = "process_sort_index";
inline constexpr std::string_view kThreadSortIndex = "thread_sort_index";

// An XProf counters line: its events are written as "C".
inline constexpr std::string_view kCountersLine = "_counters_";

// The plane named kTopLevelPlane that carries the kForm stat (a process
// could be named "chrome.top_level" too); null when the model has none.
const xspace::XPlane* FindTopLevelPlane(const xspace::XSpace& space);

}  // namespace chronolink::trace::chrome
