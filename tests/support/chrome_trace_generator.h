// A generator of structurally diverse, VALID Chrome trace-event JSON
// documents, for property tests and a structure-aware fuzz target:
// chronolink-trace's JSON writer must keep every event of any document the
// reader accepts, and write times that a viewer (which parses numbers as
// doubles) reads with the nesting exact arithmetic gives, not only for the
// shapes PyTorch/Kineto and the legacy profiler write.
//
// So the documents hold what those producers write (Kineto's object with
// baseTimeNanoseconds and "{}.{:03}" times, older Kineto's absolute epoch
// µs, the legacy profiler's bare array with small relative µs, their keys
// and args) and what the format allows beyond them: every `ph`, string,
// float and huge pids and tids, missing tids, every JSON escape, duplicate
// keys, nested args, top-level keys of every JSON type, whitespace of every
// kind, and times spelled every way JSON spells a number (integers, 1-9
// fractional digits, trailing zeros, exponents, negative relative values).
// Slices nest per thread, X and B/E alike, in the shapes that break double
// arithmetic: children that start or end exactly with their parent, zero
// durations, siblings that touch, near epoch 1.8e15 µs with 6 decimals.
//
// The text is written here, token by token (no JSON library), so number
// spelling is ours. Every time is chosen as an integer number of
// picoseconds first and then spelled, so each event's exact instant is
// known without reading the document back: digits below a picosecond are
// written only as noise that the reader's rounding (half away from zero,
// docs/chrome-trace.md) removes again. Every document parses with
// nlohmann::json and is accepted by ParseChromeJson (given origin_ns for a
// relative document without a base) within the reader's limits: nesting at
// most 64 deep, times within int64 ns, each thread's events within
// [start_ns, start_ns + span_ns].
//
// Only the standard library and the trace model's time type: the generator
// is compiled into a libFuzzer target too, so no gtest here.
//
// Deterministic: the same randomness gives the same bytes. Not thread-safe
// per GeneratorRandom; separate generators may run in separate threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trace/model/trace_time.h"

#include "tests/support/generator_random.h"

namespace chronolink::trace::testing {


enum class ChromeFlavour : int {
  kKinetoBase,      // object, baseTimeNanoseconds, ts relative to it, "{}.{:03}" mostly
  kObjectAbsolute,  // object without a base, absolute epoch µs (older Kineto, most tools)
  kLegacyArray,     // bare array, small µs relative to an unstated start (legacy profiler)
  kArrayAbsolute,   // bare array, absolute epoch µs
};
inline constexpr int kChromeFlavours = 4;
std::string_view ChromeFlavourName(ChromeFlavour flavour);

struct ChromeGenOptions {
  // Epoch ns: every timed event (start and end) lies in [start_ns, start_ns
  // + span_ns]. start_ns in [1e17, 4e18] (absolute µs must read as
  // absolute: >= 1e14 µs), span_ns in [1, 1e13] (a thread's events must lie
  // within int64 ps of each other, with room to spare).
  int64_t start_ns = 1'795'320'926'000'000'000;  // 2026-11-22
  int64_t span_ns = 20'000'000'000;              // 20 s
  // Each document draws its event count log-uniformly in [1, max_events]
  // (rarely 0: an empty trace); a hard cap on the events written.
  size_t max_events = 160;
  // Every flavour, drawn per document, when unset.
  std::optional<ChromeFlavour> flavour;
  // Integer pids/tids equal to INT64_MAX (the reader once gave the next
  // non-integer id INT64_MAX + 1). Off, huge ids stay 1024 below it.
  bool int64_max_ids = true;
  // process_name/thread_name events whose "name" arg is written twice: the
  // last one wins, for viewers and the reader alike.
  bool duplicate_metadata_names = true;
};

// What ts = 0 stands for in a document.
enum class ChromeTimeOrigin : int {
  kEpoch,     // absolute flavours: ts are epoch µs; origin_ns is 0
  kBaseTime,  // baseTimeNanoseconds, which is origin_ns
  kUnstated,  // relative ts with nothing in the file saying to what: the
              // profiler start origin_ns, for ChromeReadOptions::origin_ns
};

// One event as written, in file order.
struct GeneratedEvent {
  std::string ph;
  std::optional<std::string> name;  // decoded UTF-8, when "name" is a string
  std::string pid_json;             // the JSON text of the (last) pid written
  std::string tid_json;             // likewise; empty when the event has no tid
  // Processes numbered in order of first appearance in the file, threads
  // (a process's distinct tids, no tid being one) likewise within their
  // process: the model's plane and line order (docs/chrome-trace.md).
  int process_index = 0;
  int thread_index = 0;
  bool has_ts = false;  // "ts" written (for ph M it is not a time)
  bool timed = false;   // has_ts and not ph M: the event has an instant
  bool has_dur = false;
  // ts exactly as the reader reads it (ns + ps, ps in [0, 1000), sub-ps
  // digits rounded), relative to GeneratedChromeTrace::origin_ns: absolute
  // for kEpoch. Valid when `timed`.
  int64_t ts_ns = 0;
  int32_t ts_ps = 0;
  int64_t dur_ps = 0;          // valid when has_dur
  bool sub_ps_digits = false;  // ts or dur written with digits below 1 ps
  // Slices (an X, or a B and its E) are numbered 0, 1, ... per document;
  // parent_slice is the slice this one was generated inside (-1 at top
  // level). Exact arithmetic nests it there: within the parent's start and
  // end, apart from its siblings (equal ends and zero durations included).
  int depth = -1;  // 0 at top level; -1 for events that are no slice
  int slice = -1;
  int parent_slice = -1;
};

// What a generated document contains, counted as it is written, for
// coverage assertions over many documents (sum them with +=).
enum class ChromeGenFeature : int {
  // form and flavour
  kObjectForm,
  kArrayForm,
  kKinetoBase,
  kObjectAbsolute,
  kLegacyArray,
  kArrayAbsolute,
  kEmptyTrace,
  kBaseAfterEvents,  // baseTimeNanoseconds after traceEvents
  kBaseAfterStart,   // a base later than some events: negative relative ts
  // ph
  kPhX,
  kPhB,
  kPhE,
  kPhInstant,        // i
  kPhInstantLegacy,  // I
  kPhC,
  kPhM,
  kPhFlowStart,       // s
  kPhFlowStep,        // t
  kPhFlowEnd,         // f
  kPhAsyncBegin,      // b
  kPhAsyncInstant,    // n
  kPhAsyncEnd,        // e
  kPhSample,          // P
  kPhObjectSnapshot,  // O
  kPhObjectNew,       // N
  kPhObjectDelete,    // D
  kPhUnknown,         // Z and others
  // event details
  kInstantScopeThread,
  kInstantScopeProcess,
  kInstantScopeGlobal,
  kFlowBindEnclosing,  // "bp": "e"
  kAsyncId,
  kAsyncId2Local,
  kAsyncId2Global,
  kAsyncScope,
  kProcessName,
  kThreadName,
  kProcessSortIndex,
  kThreadSortIndex,
  kProcessLabels,
  kMetadataTs,          // a metadata event with a ts
  kMetadataTsNotATime,  // ... that no time could be (1e300, beyond int64 ns)
  kEndWithoutName,      // an E without "name"
  kNonStringName,
  kCounterArgs,
  // nesting
  kNestedSlices,  // a slice inside another
  kDepth5,        // a slice at depth >= 5
  kStartsWithParent,
  kEndsWithParent,
  kSameAsParent,  // start and end both equal the parent's
  kZeroDuration,
  kTouchingSiblings,  // one ends where the next begins
  kBeginEndThreads,   // a thread of B/E pairs only
  kMixedThreads,      // X and B/E nested in one another
  kUnsortedSlices,    // X events not in start order in the file
  // time spelling
  kIntegerTimes,
  kFractionDigits1,
  kFractionDigits2,
  kFractionDigits3,
  kFractionDigits4,
  kFractionDigits5,
  kFractionDigits6,
  kSubPsDigits,  // 7-9 fractional digits, rounded by the reader
  kSubPsHalves,  // exactly half a ps below: rounds away from zero
  kTrailingZeros,
  kExponentTimes,
  kNegativeTs,
  kNegativeZero,         // -0, -0.0
  kAbsoluteSixDecimals,  // epoch µs with 6 fractional digits
  kKinetoThreeDecimals,  // "{}.{:03}"
  // pids and tids
  kPidSmallInt,
  kPidNegative,
  kPidHugeInt,       // > 2^53, <= INT64_MAX
  kPidBeyondInt64,   // > INT64_MAX, as an unsigned integer
  kPidBeyondUint64,  // integer text no 64-bit integer holds (a float to JSON readers)
  kPidFloat,
  kPidFloatSpellings,  // one pid written two ways (1e300, 1.0e300)
  kPidString,
  kPidEmptyString,
  kPidUnicode,
  kTidSmallInt,
  kTidNegative,
  kTidHugeInt,
  kTidBeyondInt64,
  kTidBeyondUint64,
  kTidFloat,
  kTidFloatSpellings,
  kTidString,
  kTidEmptyString,
  kTidUnicode,
  kTidMissing,
  // strings
  kEscapeQuote,
  kEscapeBackslash,
  kEscapeSlash,
  kEscapeBackspace,
  kEscapeFormFeed,
  kEscapeNewline,
  kEscapeReturn,
  kEscapeTab,
  kEscapeNul,            // \u0000
  kEscapeControl,        // \u0001-\u001f
  kEscapeUnicode,        // \u00e9 and other non-ASCII BMP characters
  kEscapeUpperHex,       // \u00E9
  kEscapeSurrogatePair,  // \ud83d\ude00
  kRawUtf8,
  kRawUtf8FourByte,
  kRawDelete,  // 0x7f unescaped
  // args and other keys
  kKinetoArgs,
  kNestedArgs,
  kEmptyArgs,  // "args": {}
  kArgTrue,
  kArgFalse,
  kArgNull,
  kArgHugeInt,  // > INT64_MAX or < INT64_MIN
  kArgFloat,
  kArgExponent,
  kArgString,
  kDuplicateArgKeys,
  kDuplicateEventKeys,    // ts, name, pid, cat ... written twice (the last wins)
  kDuplicateArgsObjects,  // "args" written twice
  kCat,
  kNonStringCat,
  kCname,
  kTts,
  kTdur,
  kSf,
  kStack,
  kId2,
  kScope,
  kUnknownKeyObject,  // an unknown event key with an object value
  kMaxNesting,        // a value nested exactly 64 levels deep (the reader's limit)
  // top level
  kTopString,
  kTopInteger,
  kTopFloat,
  kTopBool,
  kTopNull,
  kTopArray,
  kTopObject,
  kTopDuplicateKeys,
  kStackFrames,
  // whitespace
  kCompactText,
  kSpacedText,
  kNewlines,
  kTabs,
  kCarriageReturns,
};
inline constexpr int kChromeGenFeatureCount = static_cast<int>(ChromeGenFeature::kCarriageReturns) + 1;
std::string_view ChromeGenFeatureName(ChromeGenFeature feature);

struct ChromeGenFeatures {
  std::array<int64_t, kChromeGenFeatureCount> counts{};

  int64_t operator[](ChromeGenFeature f) const { return counts[static_cast<size_t>(f)]; }
  int64_t& operator[](ChromeGenFeature f) { return counts[static_cast<size_t>(f)]; }
  ChromeGenFeatures& operator+=(const ChromeGenFeatures& other);
};

struct GeneratedChromeTrace {
  std::string text;  // the document
  ChromeFlavour flavour = ChromeFlavour::kKinetoBase;
  bool object_form = false;
  ChromeTimeOrigin time_origin = ChromeTimeOrigin::kEpoch;
  int64_t origin_ns = 0;               // epoch ns of ts = 0 (see ChromeTimeOrigin)
  std::optional<int64_t> base_ns;      // baseTimeNanoseconds as written
  std::vector<GeneratedEvent> events;  // in file order
  int processes = 0;                   // distinct pids
  std::vector<int> threads;            // distinct threads per process (by process_index)
  ChromeGenFeatures features;
};

// Throws std::invalid_argument when `options` break their stated bounds.
GeneratedChromeTrace GenerateChromeTrace(GeneratorRandom& random, const ChromeGenOptions& options);

// An event's exact epoch instant (origin_ns + ts) and end (+ dur); nullopt
// for an event without an instant.
std::optional<TraceInstant> ExactStart(const GeneratedChromeTrace& trace, const GeneratedEvent& event);
std::optional<TraceInstant> ExactEnd(const GeneratedChromeTrace& trace, const GeneratedEvent& event);

}  // namespace chronolink::trace::testing
