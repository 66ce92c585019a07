// A generator of structurally diverse, VALID XSpace files (the wire bytes of
// chronolink.xspace.XSpace, proto/xplane.proto), for property tests and a
// structure-aware fuzz target: chronolink-trace's rewriters must turn every
// valid input into valid output, not only the shapes protobuf's serializer
// and the fixture generator (tools/trace_fixture/) write.
//
// So the bytes come from a small encoder of its own, which writes what
// protobuf never does and any parser must accept: fields out of order,
// unknown fields of every wire type at every level (map entries included;
// groups at a low rate), default values written explicitly, overlong
// varints for values and lengths, packed and unpacked repeated fields, map
// entries with key and value reversed or the key missing. Every file parses
// with protobuf and is accepted by ParseXSpace with a known line base (a
// `Task Environment` start with relative line times, or absolute epoch line
// times, with or without that plane), and every timed event (start and end)
// lies in [session_start_ns, session_start_ns + span_ns], so an offsets map
// covering that span aligns it.
//
// Only the standard library and the generated proto header: the generator
// is compiled into a libFuzzer target too.
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

#include "tests/support/generator_random.h"

namespace chronolink::trace::testing {

struct XSpaceGenOptions {
  // Epoch ns: every timed event lies in [session_start_ns, session_start_ns
  // + span_ns]. Must be >= 2e17 (1976; absolute line times need >= 1e17
  // even for lines placed far before the session) and <= 4e18; span_ns in
  // [1, 1e13] (picoseconds of the span must fit int64 with room to spare).
  int64_t session_start_ns = 1'795'320'926'000'000'000;  // 2026-11-22
  int64_t span_ns = 20'000'000'000;                      // 20 s
  // Exact sizes: when set, the file holds one line and/or one plane (extra,
  // in a plane whose events are timed, never the Task Environment) whose
  // encoded message length (the value of its length prefix) is exactly
  // this. They are filled with events, metadata and stats, then one unknown
  // length-delimited field sized to hit the target. line_bytes >= 48,
  // plane_bytes >= 96, both < 1 GiB. When both are set and plane_bytes >=
  // line_bytes + 128, the line sits inside that plane half the time.
  std::optional<size_t> line_bytes;
  std::optional<size_t> plane_bytes;
  // A soft cap (>= 256) on the file's size without the exact-size parts:
  // each file draws a budget log-uniformly in [256, max_bytes] and stops
  // adding planes, lines, events and metadata once it is spent; it may pass
  // it by the element that crossed it and the file's mandatory parts (a few
  // hundred bytes). With the default, the median file is about 1 KB and 90 %
  // are under 5 KB: thousands of files a second.
  size_t max_bytes = 64 << 10;
  // Unknown fields that are groups (wire types 3/4): protobuf parses them,
  // a wire-level rewriter may decline such a file.
  bool unknown_groups = true;
  // Fields written twice (a singular scalar, or both members of a oneof, the
  // last one winning): legal protobuf that merges; off unless asked for.
  bool allow_merges = false;
};

// Where an unknown field was written: each message of the schema, and the
// entries of the plane's two maps.
enum class GenLevel : int {
  kSpace,
  kPlane,
  kLine,
  kEvent,
  kStat,
  kEventMetadata,
  kStatMetadata,
  kMapEntry,
};
inline constexpr int kGenLevels = 8;
std::string_view GenLevelName(GenLevel level);

// Wire types as protobuf numbers them; 3 is a whole group (4, its end, is
// never a field of its own), so unknown_fields[level][4] stays 0.
inline constexpr int kGenWireTypes = 6;

// What a generated file contains, counted as it is written, for coverage
// assertions over many files (sum them with +=).
enum class GenFeature : int {
  // the file's time base
  kRelativeLineTimes,  // Task Environment start, line times relative to it
  kAbsoluteLineTimes,  // epoch line times
  kTaskEnvironment,    // the file has a Task Environment plane
  kNoTaskEnvironment,
  kExtraTaskEnvironmentPlane,  // a second plane of that name, after the first, with no session
  kStartTimeAsInt64,           // profile_start_time stored as int64, not uint64
  kNoStopTime,
  // planes
  kPlanes,
  kEmptyPlanes,         // nothing but (maybe) id and name
  kMetadataOnlyPlanes,  // metadata and stats, no line
  kCpuPlanes,
  kGpuPlanes,
  kCustomPlanes,
  kHostMetadataPlanes,
  kOtherPlanes,  // names of no known kind
  kNegativeIds,  // plane, line and metadata ids below 0
  kExtremeIds,   // INT64_MIN or INT64_MAX
  // lines
  kLines,
  kEmptyLines,
  kEmptyLinesOddTimestamp,  // an empty line's timestamp of neither base (readers skip it)
  kOccurrenceOnlyLines,
  kUnsortedLines,       // timed events not in start order
  kLinesBeforeSession,  // line timestamp before the session start (large offsets)
  kLineDisplayIds,
  kLineDisplayNames,
  kLineDurations,
  // events
  kTimedEvents,
  kOccurrenceEvents,   // num_occurrences set
  kEventsWithoutData,  // neither oneof member: timed at offset 0
  kNegativeOffsets,
  kBoundaryOffsets,  // within 3 of a 2^(7k) varint width boundary
  kZeroDurations,
  kOnePsDurations,
  kHugeDurations,  // >= 1 s
  // stats
  kStatDouble,
  kStatUint64,
  kStatInt64,
  kStatStr,
  kStatBytes,
  kStatRef,
  kStatCompressedStr,
  kStatNoValue,
  kPlaneStats,
  kEventStats,
  kMetadataStats,  // stats of an XEventMetadata
  // metadata
  kEventMetadata,
  kStatMetadata,
  kMetadataBytes,
  kMetadataDisplayNames,
  kStatDescriptions,
  kChildIdsPacked,
  kChildIdsUnpacked,
  kMapEntriesReversed,    // value before key
  kMapEntriesWithoutKey,  // key 0 by omission
  kMapEntriesWithoutValue,
  kMetadataIdMismatches,  // value's id differs from its map key
  kDanglingMetadataRefs,  // an event or stat naming a missing metadata id
  // the space
  kNoHostnames,
  kOneHostname,
  kSeveralHostnames,
  kErrors,
  kWarnings,
  kNonAsciiStrings,
  // encodings
  kOutOfOrderMessages,   // known fields not in field-number order
  kInterleavedUnknowns,  // unknown fields between known ones
  kExplicitDefaults,     // 0 or "" written where protobuf writes nothing
  kOverlongVarints,      // a value in more bytes than it needs
  kOverlongLengths,      // a length prefix in more bytes than it needs
  kUnknownGroups,
  kMergedFields,  // allow_merges: a field the parser overrides
  kExactLines,
  kExactPlanes,
};
inline constexpr int kGenFeatureCount = static_cast<int>(GenFeature::kExactPlanes) + 1;
std::string_view GenFeatureName(GenFeature feature);

struct XSpaceGenFeatures {
  std::array<int64_t, kGenFeatureCount> counts{};
  // [level][wire type]: unknown fields written (the exact-size padding included).
  std::array<std::array<int64_t, kGenWireTypes>, kGenLevels> unknown_fields{};
  // [w] for w in 1..10: timed events whose offset_ps varint is w bytes long
  // (minimal encoding; 10 = negative); [0]: offset_ps absent.
  std::array<int64_t, 11> offset_varint_bytes{};

  int64_t operator[](GenFeature f) const { return counts[static_cast<size_t>(f)]; }
  int64_t& operator[](GenFeature f) { return counts[static_cast<size_t>(f)]; }
  int64_t unknown(GenLevel level, int wire_type) const {
    return unknown_fields[static_cast<size_t>(level)][static_cast<size_t>(wire_type)];
  }
  XSpaceGenFeatures& operator+=(const XSpaceGenFeatures& other);
};

struct GeneratedXSpace {
  std::string bytes;  // the file
  XSpaceGenFeatures features;
  std::string host;  // its host, e.g. "gen-host-3": hostnames[0] when it has any
};

// Throws std::invalid_argument when `options` break their stated bounds.
GeneratedXSpace GenerateXSpace(GeneratorRandom& random, const XSpaceGenOptions& options);

}  // namespace chronolink::trace::testing
