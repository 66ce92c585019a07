#include "tests/support/xspace_generator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "proto/xplane.pb.h"

namespace chronolink::trace::testing {

// ---------------------------------------------------------------------------
// Names of levels and features

namespace {

constexpr std::string_view kLevelNames[kGenLevels] = {"space", "plane",          "line",          "event",
                                                      "stat",  "event_metadata", "stat_metadata", "map_entry"};

constexpr std::string_view kFeatureNames[] = {"relative_line_times",
                                              "absolute_line_times",
                                              "task_environment",
                                              "no_task_environment",
                                              "extra_task_environment_plane",
                                              "start_time_as_int64",
                                              "no_stop_time",
                                              "planes",
                                              "empty_planes",
                                              "metadata_only_planes",
                                              "cpu_planes",
                                              "gpu_planes",
                                              "custom_planes",
                                              "host_metadata_planes",
                                              "other_planes",
                                              "negative_ids",
                                              "extreme_ids",
                                              "lines",
                                              "empty_lines",
                                              "empty_lines_odd_timestamp",
                                              "occurrence_only_lines",
                                              "unsorted_lines",
                                              "lines_before_session",
                                              "line_display_ids",
                                              "line_display_names",
                                              "line_durations",
                                              "timed_events",
                                              "occurrence_events",
                                              "events_without_data",
                                              "negative_offsets",
                                              "boundary_offsets",
                                              "zero_durations",
                                              "one_ps_durations",
                                              "huge_durations",
                                              "stat_double",
                                              "stat_uint64",
                                              "stat_int64",
                                              "stat_str",
                                              "stat_bytes",
                                              "stat_ref",
                                              "stat_compressed_str",
                                              "stat_no_value",
                                              "plane_stats",
                                              "event_stats",
                                              "metadata_stats",
                                              "event_metadata",
                                              "stat_metadata",
                                              "metadata_bytes",
                                              "metadata_display_names",
                                              "stat_descriptions",
                                              "child_ids_packed",
                                              "child_ids_unpacked",
                                              "map_entries_reversed",
                                              "map_entries_without_key",
                                              "map_entries_without_value",
                                              "metadata_id_mismatches",
                                              "dangling_metadata_refs",
                                              "no_hostnames",
                                              "one_hostname",
                                              "several_hostnames",
                                              "errors",
                                              "warnings",
                                              "non_ascii_strings",
                                              "out_of_order_messages",
                                              "interleaved_unknowns",
                                              "explicit_defaults",
                                              "overlong_varints",
                                              "overlong_lengths",
                                              "unknown_groups",
                                              "merged_fields",
                                              "exact_lines",
                                              "exact_planes"};
static_assert(std::size(kFeatureNames) == kGenFeatureCount, "one name per GenFeature");

}  // namespace

std::string_view GenLevelName(GenLevel level) { return kLevelNames[static_cast<size_t>(level)]; }
std::string_view GenFeatureName(GenFeature feature) { return kFeatureNames[static_cast<size_t>(feature)]; }

XSpaceGenFeatures& XSpaceGenFeatures::operator+=(const XSpaceGenFeatures& other) {
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  for (size_t l = 0; l < unknown_fields.size(); ++l) {
    for (size_t w = 0; w < unknown_fields[l].size(); ++w) unknown_fields[l][w] += other.unknown_fields[l][w];
  }
  for (size_t w = 0; w < offset_varint_bytes.size(); ++w) offset_varint_bytes[w] += other.offset_varint_bytes[w];
  return *this;
}

// ---------------------------------------------------------------------------
// Wire encoding

namespace {

using xspace::XEvent;
using xspace::XEventMetadata;
using xspace::XLine;
using xspace::XPlane;
using xspace::XSpace;
using xspace::XStat;
using xspace::XStatMetadata;
using F = GenFeature;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// The highest field number each message knows (proto/xplane.proto); unknown
// numbers are drawn around them. XLine's reserved 5-8 count as unknown.
static_assert(XSpace::kHostnamesFieldNumber == 4 && XPlane::kStatsFieldNumber == 6 &&
                  XLine::kDisplayNameFieldNumber == 11 && XEvent::kNumOccurrencesFieldNumber == 5 &&
                  XStat::kCompressedStrValueFieldNumber == 8 && XEventMetadata::kChildIdFieldNumber == 6 &&
                  XStatMetadata::kDescriptionFieldNumber == 3,
              "the schema's field numbers changed: update IsKnownField");

bool IsKnownField(GenLevel level, uint32_t number) {
  switch (level) {
    case GenLevel::kSpace: return number >= 1 && number <= 4;
    case GenLevel::kPlane: return number >= 1 && number <= 6;
    case GenLevel::kLine: return (number >= 1 && number <= 4) || (number >= 9 && number <= 11);
    case GenLevel::kEvent: return number >= 1 && number <= 5;
    case GenLevel::kStat: return number >= 1 && number <= 8;
    case GenLevel::kEventMetadata: return number >= 1 && number <= 6;
    case GenLevel::kStatMetadata: return number >= 1 && number <= 3;
    case GenLevel::kMapEntry: return number >= 1 && number <= 2;
  }
  return true;
}

// Field numbers 19000-19999 are protobuf's own reservation; keep clear.
uint32_t AvoidReserved(uint32_t number) { return number >= 19000 && number <= 19999 ? number + 1000 : number; }

size_t VarintSize(uint64_t v) { return v < 0x80 ? 1 : (static_cast<size_t>(std::bit_width(v)) + 6) / 7; }

// Writes v in `width` bytes (VarintSize(v) <= width <= 10): the extra bytes
// are 0x80 continuations ending in 0x00, which parsers read as the same value.
void AppendVarint(std::string* out, uint64_t v, size_t width) {
  for (size_t i = 1; i < width; ++i) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendTag(std::string* out, uint32_t number, WireType type) {
  const uint64_t tag = (static_cast<uint64_t>(number) << 3) | type;
  AppendVarint(out, tag, VarintSize(tag));
}

void AppendFixed(std::string* out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(bits >> (8 * i)));
}

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// One field of a message being built, already encoded (tag and payload).
struct WireField {
  uint32_t number;
  bool known;  // a schema field, whose order counts; else an unknown one
  std::string bytes;
};

// A field the parser overrides (allow_merges): placed before the first
// field numbered `before`, so the later one wins.
struct Decoy {
  uint32_t before;
  WireField field;
};

// A message under construction: its fields in the order they were made;
// Generator::Seal decides the order they are written in.
class WireMessage {
 public:
  void Add(uint32_t number, bool known, std::string bytes) {
    size_ += bytes.size();
    fields_.push_back({number, known, std::move(bytes)});
  }
  void AddDecoy(uint32_t before, WireField field) {
    size_ += field.bytes.size();
    decoys_.push_back({before, std::move(field)});
  }
  size_t size() const { return size_; }
  const std::vector<WireField>& fields() const { return fields_; }
  const std::vector<Decoy>& decoys() const { return decoys_; }
  bool Has(uint32_t number) const {
    return std::any_of(fields_.begin(), fields_.end(),
                       [&](const WireField& f) { return f.known && f.number == number; });
  }

 private:
  std::vector<WireField> fields_;
  std::vector<Decoy> decoys_;
  size_t size_ = 0;
};

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kMinSessionStartNs = 200'000'000'000'000'000;  // 2e17
constexpr int64_t kMaxSessionStartNs = 4'000'000'000'000'000'000;
constexpr int64_t kMaxSpanNs = 10'000'000'000'000;  // 1e13
constexpr size_t kMinLineBytes = 48;
constexpr size_t kMinPlaneBytes = 96;
constexpr size_t kMaxExactBytes = size_t{1} << 30;
// The smallest padding field: a one-byte tag and a zero length.
constexpr size_t kMinPad = 2;
// A length-delimited field's tag and longest length prefix.
constexpr size_t kMaxLenOverhead = 3 + 5;

// Rates of the encodings protobuf never writes, per value or per message.
constexpr double kOverlongVarintRate = 0.02;
constexpr double kOverlongLengthRate = 0.01;
constexpr double kExplicitDefaultRate = 0.05;
constexpr double kShuffledRate = 0.04;
constexpr double kReversedRate = 0.02;
constexpr double kInterleavedRate = 0.3;  // of messages that carry unknown fields
constexpr double kGroupRate = 0.03;       // of unknown fields
// Per message, by level: messages that occur once per file get more.
constexpr double kUnknownRate[kGenLevels] = {0.3, 0.12, 0.06, 0.03, 0.04, 0.08, 0.08, 0.06};

// Names drawn from what producers write, near misses of the names readers
// look for, and empty ones.
constexpr std::string_view kLineNames[] = {"python3",
                                           "Stream #13(Compute)",
                                           "Stream #14(Compute,NCCL)",
                                           "XLA Modules",
                                           "XLA Ops",
                                           "Steps",
                                           "_counters_",
                                           "pjrt_gpu_0",
                                           "TraceMe",
                                           "",
                                           "线程 1",
                                           "Framework Name Scope"};
constexpr std::string_view kEventNames[] = {"train_step",        "ExecuteProgram",
                                            "XlaModule",         "fusion.12",
                                            "all-reduce.1",      "all-reduce-start.6",
                                            "all-reduce-done.6", "ncclKernel_AllReduce_RING_LL_Sum_float",
                                            "MemcpyH2D",         "",
                                            "Ünïcode-op"};
constexpr std::string_view kStatNames[] = {
    "correlation_id", "kernel_details", "hlo_op",     "hlo_module", "step_num", "_r",    "program_id", "flops",
    "bytes_accessed", "device_id",      "context_id", "stream_id",  "group_id", "tf_op", "",           "profile_start"};
constexpr std::string_view kOtherPlaneNames[] = {"",
                                                 "/host:TPU",
                                                 "/host:python",
                                                 "/device:TPU:0",
                                                 "/device:GPU:",
                                                 "Task Environment ",
                                                 "task environment",
                                                 "Task Environment\n",
                                                 "/host:CPUx",
                                                 "/device:ПРОЦЕССОР:0"};
constexpr std::string_view kCustomDevices[] = {"TPU:0", "Ascend 3", "NPU:1", "", "设备"};
constexpr std::string_view kCpuSuffixes[] = {" 0", ":1", "_XLA", " (pid 4242)", "/é"};
constexpr std::string_view kMessages[] = {"profiler session failed to start on 1 device",
                                          "CUPTI buffer dropped 12 records", "", "⚠ truncated"};

constexpr std::string_view kTaskEnvPlaneName = "Task Environment";
constexpr std::string_view kStartStatName = "profile_start_time";
constexpr std::string_view kStopStatName = "profile_stop_time";

enum class PlaneKind { kCpu, kGpu, kCustom, kHostMetadata, kOther, kEmpty };
enum class LineKind { kTimed, kMixed, kOccurrences, kEmpty };

// The metadata a plane's events and stats may name.
struct PlaneIds {
  std::set<int64_t> event_keys;
  std::set<int64_t> stat_keys;              // every stat_metadata key (ref_value targets)
  std::vector<int64_t> event_key_list;      // in draw order, for picking
  std::vector<int64_t> stat_ids_for_stats;  // keys a stat's metadata_id may use
};

// An event before it is encoded: lines plan all their events first so that
// they can be sorted by start.
struct EventPlan {
  bool timed = true;
  bool omit_offset = false;  // offset 0 left out: neither oneof member set
  int64_t offset_ps = 0;
  int64_t duration_ps = 0;
  int64_t occurrences = 0;
};

// What a line may grow to: `cap` bytes at most, or `exact` bytes precisely;
// `need_timed` forces a first timed event; `budgeted` lines stop when the
// file's budget is spent.
struct LineLimit {
  size_t cap = std::numeric_limits<size_t>::max();
  std::optional<size_t> exact;
  bool need_timed = false;
  bool budgeted = true;
  size_t max_events = 0;  // 0: the usual draw

  static LineLimit Exact(size_t bytes, size_t max_events) {
    LineLimit limit;
    limit.exact = bytes;
    limit.budgeted = false;
    limit.max_events = max_events;
    return limit;
  }
  static LineLimit Capped(size_t cap, size_t max_events) {
    LineLimit limit;
    limit.cap = cap;
    limit.budgeted = false;
    limit.max_events = max_events;
    return limit;
  }
  static LineLimit WithTimedEvent() {
    LineLimit limit;
    limit.need_timed = true;
    return limit;
  }
};

class Generator {
 public:
  Generator(GeneratorRandom& random, const XSpaceGenOptions& options)
      : r_(random), o_(options), span_ps_(options.span_ns * 1000) {}

  GeneratedXSpace Run();

 private:
  // --- encoding
  void AppendValueVarint(std::string* out, uint64_t v);
  void AppendLength(std::string* out, size_t length);
  std::string LenField(uint32_t number, std::string_view payload);
  void PutVarint(WireMessage* m, uint32_t number, uint64_t v);
  void PutInt(WireMessage* m, uint32_t number, uint64_t v);
  void PutFixed64(WireMessage* m, uint32_t number, uint64_t bits);
  void PutText(WireMessage* m, uint32_t number, std::string_view text, bool always = false);
  void PutBytes(WireMessage* m, uint32_t number, std::string_view bytes);
  void PutDecoy(WireMessage* m, uint32_t before, uint32_t number, uint64_t v);
  uint32_t UnknownNumber(GenLevel level, size_t tag_bytes = 0);
  std::string UnknownField(GenLevel level, int depth);
  void AddUnknowns(WireMessage* m, GenLevel level, size_t limit = std::numeric_limits<size_t>::max());
  void Pad(WireMessage* m, size_t target, GenLevel level);
  std::vector<size_t> ShuffledOrder(const std::vector<WireField>& fields);
  std::vector<size_t> FieldOrder(const WireMessage& m, double reverse_rate);
  std::string Seal(const WireMessage& m, double reverse_rate = kReversedRate,
                   std::vector<uint32_t>* known_order = nullptr);
  std::string Finish(WireMessage* m, GenLevel level, double reverse_rate = kReversedRate) {
    AddUnknowns(m, level);
    return Seal(*m, reverse_rate);
  }
  template <typename Build>
  bool TryAdd(WireMessage* m, uint32_t number, size_t limit, Build build);

  // --- values
  size_t SmallCount(size_t max) { return r_.Below(r_.Below(max + 1) + 1); }
  uint64_t AnyUint64();
  int64_t AnyInt64();
  int64_t AnyId();
  int64_t NewKey(std::set<int64_t>* used);
  int64_t MissingKey(const std::set<int64_t>& used);
  uint32_t CodePoint();
  std::string Text(size_t max_code_points);
  std::string Bytes(size_t max);
  template <size_t N>
  std::string Name(const std::string_view (&pool)[N]);

  // --- time
  int64_t LinePositionNs(bool inside);
  int64_t LargeOffsetPs();
  int64_t LineTimestampNs(int64_t position_ns) const;
  int64_t ChooseOffsetPs(int64_t lo, int64_t hi, std::optional<int64_t> previous);
  int64_t ChooseDurationPs(int64_t room);
  std::vector<EventPlan> PlanEvents(LineKind kind, int64_t position_ns, size_t count);

  // --- messages
  std::string BuildStat(const PlaneIds& ids);
  void PutStats(WireMessage* m, uint32_t number, const PlaneIds& ids, size_t count, F kind);
  std::string BuildEvent(const PlaneIds& ids, const EventPlan& plan);
  std::string BuildLine(const PlaneIds& ids, LineKind kind, const LineLimit& limit);
  std::string BuildEventMetadata(int64_t key, const PlaneIds& ids);
  std::string BuildStatMetadata(int64_t key, std::string_view name);
  std::string MapEntry(int64_t key, const std::string& value);
  void PutChildIds(WireMessage* m, int64_t parent, const PlaneIds& ids);
  std::string PlaneName(PlaneKind kind, bool compact, int64_t* id);
  void AddMetadata(WireMessage* plane, PlaneIds* ids, PlaneKind kind, size_t limit);
  std::string BuildPlane(PlaneKind kind, std::optional<size_t> exact, std::optional<size_t> exact_line,
                         bool need_timed);
  std::string BuildTaskEnvPlane(bool session);
  LineKind RandomLineKind();
  PlaneKind RandomPlaneKind();
  void PutHostnames(WireMessage* space);

  GeneratorRandom& r_;
  const XSpaceGenOptions& o_;
  XSpaceGenFeatures f_;
  int64_t span_ps_;
  int64_t budget_ = 0;  // bytes left for budgeted elements (soft)
  bool relative_ = false;
  int64_t session_start_ns_ = 0;  // profile_start_time, when the file has one
  std::string host_;
};

// --- encoding ---------------------------------------------------------------

void Generator::AppendValueVarint(std::string* out, uint64_t v) {
  size_t width = VarintSize(v);
  if (width < 10 && r_.Chance(kOverlongVarintRate)) {
    width += 1 + r_.Below(10 - width);
    ++f_[F::kOverlongVarints];
  }
  AppendVarint(out, v, width);
}

void Generator::AppendLength(std::string* out, size_t length) {
  // protobuf reads a length as at most 5 bytes (a 32-bit size).
  size_t width = VarintSize(length);
  if (width < 5 && r_.Chance(kOverlongLengthRate)) {
    width += 1 + r_.Below(5 - width);
    ++f_[F::kOverlongLengths];
  }
  AppendVarint(out, length, width);
}

std::string Generator::LenField(uint32_t number, std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + kMaxLenOverhead);
  AppendTag(&out, number, kLen);
  AppendLength(&out, payload.size());
  out.append(payload);
  return out;
}

void Generator::PutVarint(WireMessage* m, uint32_t number, uint64_t v) {
  std::string out;
  AppendTag(&out, number, kVarint);
  AppendValueVarint(&out, v);
  m->Add(number, true, std::move(out));
}

// A singular varint field as protobuf writes it (nothing for 0), except that
// a 0 is sometimes written explicitly.
void Generator::PutInt(WireMessage* m, uint32_t number, uint64_t v) {
  if (v == 0) {
    if (!r_.Chance(kExplicitDefaultRate)) return;
    ++f_[F::kExplicitDefaults];
  }
  PutVarint(m, number, v);
}

void Generator::PutFixed64(WireMessage* m, uint32_t number, uint64_t bits) {
  std::string out;
  AppendTag(&out, number, kFixed64);
  AppendFixed(&out, bits, 8);
  m->Add(number, true, std::move(out));
}

// A string field (valid UTF-8): "" is omitted unless `always` (a oneof
// member) or, at a low rate, written explicitly.
void Generator::PutText(WireMessage* m, uint32_t number, std::string_view text, bool always) {
  if (text.empty() && !always) {
    if (!r_.Chance(kExplicitDefaultRate)) return;
    ++f_[F::kExplicitDefaults];
  }
  if (!IsAscii(text)) ++f_[F::kNonAsciiStrings];
  m->Add(number, true, LenField(number, text));
}

void Generator::PutBytes(WireMessage* m, uint32_t number, std::string_view bytes) {
  m->Add(number, true, LenField(number, bytes));
}

void Generator::PutDecoy(WireMessage* m, uint32_t before, uint32_t number, uint64_t v) {
  std::string out;
  AppendTag(&out, number, kVarint);
  AppendVarint(&out, v, VarintSize(v));
  m->AddDecoy(before, {number, true, std::move(out)});
  ++f_[F::kMergedFields];
}

// An unknown field number for `level`: next to the schema's (one-byte tags),
// in the low hundreds, or anywhere up to 2^29 - 1. `tag_bytes` (1..3), when
// given, fixes the tag's length (the exact-size padding needs it).
uint32_t Generator::UnknownNumber(GenLevel level, size_t tag_bytes) {
  const uint64_t range = tag_bytes != 0 ? tag_bytes - 1 : r_.Below(4);
  switch (range) {
    case 0: {
      std::vector<uint32_t> free;  // every level has some below 16
      for (uint32_t n = 1; n < 16; ++n) {
        if (!IsKnownField(level, n)) free.push_back(n);
      }
      return free[r_.Below(free.size())];
    }
    case 1: return static_cast<uint32_t>(tag_bytes != 0 ? r_.Between(16, 2047) : r_.Between(50, 2000));
    case 2: return AvoidReserved(static_cast<uint32_t>(r_.Between(2048, 262143 - 1000)));
    default: return AvoidReserved(static_cast<uint32_t>(r_.Between(16, (1 << 29) - 1001)));
  }
}

std::string Generator::UnknownField(GenLevel level, int depth) {
  const uint32_t number = UnknownNumber(level);
  const size_t l = static_cast<size_t>(level);
  std::string out;
  if (o_.unknown_groups && depth < 2 && r_.Chance(kGroupRate)) {
    // A group: start tag, any fields, the matching end tag.
    AppendTag(&out, number, kStartGroup);
    for (size_t i = SmallCount(3); i > 0; --i) out += UnknownField(level, depth + 1);
    AppendTag(&out, number, kEndGroup);
    if (depth == 0) ++f_.unknown_fields[l][kStartGroup];
    ++f_[F::kUnknownGroups];
    return out;
  }
  const WireType types[] = {kVarint, kFixed64, kLen, kFixed32};
  const WireType type = types[r_.Below(4)];
  AppendTag(&out, number, type);
  switch (type) {
    case kVarint: AppendValueVarint(&out, AnyUint64()); break;
    case kFixed64: AppendFixed(&out, r_.Next(), 8); break;
    case kFixed32: AppendFixed(&out, r_.Next(), 4); break;
    default: {
      const std::string payload = Bytes(24);
      AppendLength(&out, payload.size());
      out += payload;
    }
  }
  if (depth == 0) ++f_.unknown_fields[l][type];
  return out;
}

// Unknown fields at the level's rate; only as many as keep `m` within `limit`.
void Generator::AddUnknowns(WireMessage* m, GenLevel level, size_t limit) {
  if (!r_.Chance(kUnknownRate[static_cast<size_t>(level)])) return;
  for (size_t i = 1 + r_.Below(3); i > 0; --i) {
    const XSpaceGenFeatures saved = f_;
    std::string field = UnknownField(level, 0);
    if (m->size() + field.size() > limit) {
      f_ = saved;
      return;
    }
    m->Add(0, false, std::move(field));
  }
}

// Adds one unknown length-delimited field that brings `m` to exactly
// `target` bytes (target - m->size() >= kMinPad): the tag's and the length
// prefix's sizes are chosen so the length is written minimally where any
// combination allows, else overlong.
void Generator::Pad(WireMessage* m, size_t target, GenLevel level) {
  const size_t room = target - m->size();
  size_t tag_bytes = 0, len_bytes = 0;
  for (size_t t = 1; t <= 3 && tag_bytes == 0; ++t) {
    for (size_t w = 1; w <= 5 && tag_bytes == 0; ++w) {
      if (room >= t + w && VarintSize(room - t - w) == w) tag_bytes = t, len_bytes = w;
    }
  }
  for (size_t w = 1; w <= 5 && tag_bytes == 0; ++w) {
    if (room >= 1 + w && VarintSize(room - 1 - w) <= w) tag_bytes = 1, len_bytes = w;
  }
  const size_t length = room - tag_bytes - len_bytes;
  const uint32_t number = UnknownNumber(level, tag_bytes);
  std::string out;
  out.reserve(room);
  AppendTag(&out, number, kLen);
  if (VarintSize(length) < len_bytes) ++f_[F::kOverlongLengths];
  AppendVarint(&out, length, len_bytes);
  // Filler from one draw: opaque bytes, cheap for megabytes.
  uint64_t x = r_.Next() | 1;
  for (size_t i = 0; i < length; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    out.push_back(static_cast<char>(x));
  }
  ++f_.unknown_fields[static_cast<size_t>(level)][kLen];
  m->Add(number, false, std::move(out));
}

// All fields shuffled, then fields sharing a number put back into their
// original relative order: each slot takes the next field of its number
// (unknown fields count as one number).
std::vector<size_t> Generator::ShuffledOrder(const std::vector<WireField>& fields) {
  std::vector<size_t> order(fields.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[r_.Below(i)]);
  std::vector<std::pair<uint32_t, std::vector<size_t>>> groups;
  const auto group_of = [&](size_t i) {
    const uint32_t key = fields[i].known ? fields[i].number : 0;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) it = groups.insert(groups.end(), {key, {}});
    return static_cast<size_t>(it - groups.begin());
  };
  for (size_t i = 0; i < fields.size(); ++i) groups[group_of(i)].second.push_back(i);
  std::vector<size_t> taken(groups.size(), 0);
  for (size_t& slot : order) {
    const size_t g = group_of(slot);
    slot = groups[g].second[taken[g]++];
  }
  return order;
}

// The order to write m's fields in: mostly as protobuf writes them (known
// fields by number, unknown ones last), else unknown fields interleaved,
// known fields in reverse number order, or all shuffled. Fields sharing a
// number always keep their order: repeated fields are sequences.
std::vector<size_t> Generator::FieldOrder(const WireMessage& m, double reverse_rate) {
  const auto& fields = m.fields();
  if (r_.Chance(kShuffledRate)) return ShuffledOrder(fields);
  std::vector<size_t> order, unknown;
  for (size_t i = 0; i < fields.size(); ++i) (fields[i].known ? order : unknown).push_back(i);
  const bool reversed = order.size() > 1 && r_.Chance(reverse_rate);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reversed ? fields[a].number > fields[b].number : fields[a].number < fields[b].number;
  });
  const bool interleave = !unknown.empty() && !order.empty() && r_.Chance(kInterleavedRate);
  for (const size_t u : unknown) {
    const size_t at = interleave ? r_.Below(order.size() + 1) : order.size();
    order.insert(order.begin() + static_cast<std::ptrdiff_t>(at), u);
  }
  return order;
}

// The message's bytes, its fields in FieldOrder and each decoy anywhere
// before the field it loses to. `known_order`, when given, receives the
// known fields' numbers as written.
std::string Generator::Seal(const WireMessage& m, double reverse_rate, std::vector<uint32_t>* known_order) {
  std::vector<const WireField*> out;
  out.reserve(m.fields().size() + m.decoys().size());
  for (const size_t i : FieldOrder(m, reverse_rate)) out.push_back(&m.fields()[i]);
  for (const Decoy& decoy : m.decoys()) {
    const auto first =
        std::find_if(out.begin(), out.end(), [&](const WireField* f) { return f->known && f->number == decoy.before; });
    const auto at = static_cast<std::ptrdiff_t>(r_.Below(static_cast<size_t>(first - out.begin()) + 1));
    out.insert(out.begin() + at, &decoy.field);
  }
  uint32_t last_known = 0;
  bool out_of_order = false, seen_unknown = false, interleaved = false;
  for (const WireField* f : out) {
    if (!f->known) {
      seen_unknown = true;
      continue;
    }
    interleaved |= seen_unknown;
    out_of_order |= f->number < last_known;
    last_known = std::max(last_known, f->number);
    if (known_order != nullptr) known_order->push_back(f->number);
  }
  f_[F::kOutOfOrderMessages] += out_of_order;
  f_[F::kInterleavedUnknowns] += interleaved;
  std::string bytes;
  bytes.reserve(m.size());
  for (const WireField* f : out) bytes += f->bytes;
  return bytes;
}

// Builds a length-delimited field with `build` and adds it when `m` stays
// within `limit` bytes; else undoes its features and returns false.
template <typename Build>
bool Generator::TryAdd(WireMessage* m, uint32_t number, size_t limit, Build build) {
  const bool limited = limit != std::numeric_limits<size_t>::max();
  std::optional<XSpaceGenFeatures> saved;
  if (limited) saved = f_;
  std::string field = LenField(number, build());
  if (limited && m->size() + field.size() > limit) {
    f_ = *saved;
    return false;
  }
  m->Add(number, true, std::move(field));
  return true;
}

// --- values -----------------------------------------------------------------

// Any uint64, spread over every varint width and its edges.
uint64_t Generator::AnyUint64() {
  switch (r_.Below(6)) {
    case 0: return r_.Below(128);
    case 1: {
      const uint64_t edge = uint64_t{1} << (7 * (1 + r_.Below(9)));  // 2^7 .. 2^63
      return edge + static_cast<uint64_t>(r_.Between(-2, 2));
    }
    case 2: return r_.Next();
    case 3: return r_.Below(uint64_t{1} << 20);
    case 4: return std::numeric_limits<uint64_t>::max() - r_.Below(4);
    default: return uint64_t{1} << r_.Below(64);
  }
}

int64_t Generator::AnyInt64() {
  const int64_t v = static_cast<int64_t>(AnyUint64());
  return r_.Chance(0.25) && v != kInt64Min ? -v : v;
}

// An id: mostly small, sometimes negative, huge or an int64 extreme.
int64_t Generator::AnyId() {
  int64_t id = 0;
  switch (r_.Below(10)) {
    case 6: id = r_.Between(100, int64_t{1} << 32); break;
    case 7: id = -r_.Between(1, 1000); break;
    case 8: id = r_.Chance(0.5) ? kInt64Max : kInt64Min; break;
    case 9: id = static_cast<int64_t>(r_.Next()); break;
    default: id = r_.Between(0, 99);
  }
  f_[F::kNegativeIds] += id < 0;
  f_[F::kExtremeIds] += id == kInt64Max || id == kInt64Min;
  return id;
}

// A map key not in `used` (then added): ids as AnyId draws them, 0 included
// (an entry whose key is then left out).
int64_t Generator::NewKey(std::set<int64_t>* used) {
  const bool zero = r_.Chance(0.04) && used->count(0) == 0;  // XLA starts at 1; 0 is the missing key
  uint64_t key = zero ? 0 : static_cast<uint64_t>(r_.Chance(0.8) ? r_.Between(1, 64) : AnyId());
  while (used->count(static_cast<int64_t>(key)) != 0) ++key;  // wraps at INT64_MAX, never UB
  used->insert(static_cast<int64_t>(key));
  return static_cast<int64_t>(key);
}

int64_t Generator::MissingKey(const std::set<int64_t>& used) {
  uint64_t key = static_cast<uint64_t>(AnyId());
  while (used.count(static_cast<int64_t>(key)) != 0) ++key;
  return static_cast<int64_t>(key);
}

// A Unicode scalar value (never a surrogate): proto3 strings must be UTF-8.
uint32_t Generator::CodePoint() {
  const uint64_t c = r_.Below(100);
  if (c < 70) return static_cast<uint32_t>(r_.Between(0x20, 0x7e));
  if (c < 74) return r_.Chance(0.5) ? 0x7f : static_cast<uint32_t>(r_.Below(0x20));  // NUL included
  if (c < 86) return static_cast<uint32_t>(r_.Between(0x80, 0x7ff));
  if (c < 96) {
    const auto cp = static_cast<uint32_t>(r_.Between(0x800, 0xffff - 0x800));
    return cp >= 0xd800 ? cp + 0x800 : cp;  // skip D800-DFFF
  }
  return static_cast<uint32_t>(r_.Between(0x10000, 0x10ffff));
}

std::string Generator::Text(size_t max_code_points) {
  std::string s;
  for (size_t n = r_.Below(max_code_points + 1); n > 0; --n) {
    const uint32_t cp = CodePoint();
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      s.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  return s;
}

// Arbitrary bytes (bytes fields need not be UTF-8; 0xff never is).
std::string Generator::Bytes(size_t max) {
  std::string s(r_.Below(max + 1), '\0');
  for (char& c : s) c = static_cast<char>(r_.Chance(0.1) ? 0xff : r_.Below(256));
  return s;
}

template <size_t N>
std::string Generator::Name(const std::string_view (&pool)[N]) {
  if (r_.Chance(0.15)) return Text(16);
  return std::string(pool[r_.Below(N)]);
}

// --- time -------------------------------------------------------------------
//
// A line's position is its instant (base + timestamp_ns) minus the session
// start, in ns. Its events' offsets then lie in [lo, hi] = [-position,
// span - position] ps, which keeps every start and end in the session.

// Mostly inside the session; else far before it, so that the line's offsets
// need 6 to 9 varint bytes.
int64_t Generator::LinePositionNs(bool inside) {
  if (inside || !r_.Chance(0.25)) {
    if (r_.Chance(0.1)) return r_.Chance(0.5) ? 0 : o_.span_ns;
    return r_.Between(0, o_.span_ns);
  }
  const int64_t at_ps = r_.Between(0, span_ps_);
  const int64_t position_ps = at_ps - LargeOffsetPs();
  const int64_t floor_ns = position_ps / 1000 - (position_ps % 1000 < 0 ? 1 : 0);
  // Offsets up to span - position must fit int64.
  return std::max(floor_ns, -((kInt64Max - span_ps_) / 1000));
}

// An offset a far line's events sit around: near a varint width boundary
// (2^35 .. 2^56), anywhere in widths 6..9, or near INT64_MAX.
int64_t Generator::LargeOffsetPs() {
  const int64_t max = kInt64Max - span_ps_;
  int64_t v = 0;
  switch (r_.Below(3)) {
    case 0: v = (int64_t{1} << (7 * (5 + r_.Below(4)))) + r_.Between(-3, 3); break;
    case 1: {
      const int w = static_cast<int>(6 + r_.Below(4));
      const int64_t hi = w == 9 ? max : (int64_t{1} << (7 * w)) - 1;
      v = r_.Between(int64_t{1} << (7 * (w - 1)), hi);
      break;
    }
    default: v = max - r_.Between(0, 1000);
  }
  return std::min(v, max);
}

int64_t Generator::LineTimestampNs(int64_t position_ns) const {
  const int64_t instant = o_.session_start_ns + position_ns;
  return relative_ ? instant - session_start_ns_ : instant;
}

// An offset in [lo, hi]: uniform, near a 2^(7k) varint boundary, uniform in
// one varint width, a small step after the previous event, or 0.
int64_t Generator::ChooseOffsetPs(int64_t lo, int64_t hi, std::optional<int64_t> previous) {
  switch (r_.Below(5)) {
    case 1: {
      std::vector<int64_t> edges;
      for (int k = 1; k <= 8; ++k) {
        const int64_t edge = int64_t{1} << (7 * k);
        if (edge - 3 >= lo && edge + 3 <= hi) edges.push_back(edge);
      }
      if (edges.empty()) break;
      return edges[r_.Below(edges.size())] + r_.Between(-3, 3);
    }
    case 2: {
      std::vector<std::pair<int64_t, int64_t>> widths;  // [lo, hi] of each width, within [lo, hi]
      for (int w = 1; w <= 10; ++w) {
        const int64_t wlo = w == 10 ? kInt64Min : w == 1 ? 0 : int64_t{1} << (7 * (w - 1));
        const int64_t whi = w == 10 ? -1 : w == 9 ? kInt64Max : (int64_t{1} << (7 * w)) - 1;
        if (std::max(wlo, lo) <= std::min(whi, hi)) widths.emplace_back(std::max(wlo, lo), std::min(whi, hi));
      }
      const auto& [a, b] = widths[r_.Below(widths.size())];
      return r_.Between(a, b);
    }
    case 3:
      if (previous && *previous < hi) {
        const int64_t step = r_.Between(0, int64_t{1} << r_.Below(40));
        return step > hi - *previous ? hi : *previous + step;
      }
      break;
    case 4:
      if (lo <= 0 && 0 <= hi) return 0;
      break;
  }
  return r_.Between(lo, hi);
}

// A duration in [0, room]: 0, 1, up to the session's end, or spread.
int64_t Generator::ChooseDurationPs(int64_t room) {
  switch (r_.Below(6)) {
    case 0: return 0;
    case 1: return std::min<int64_t>(1, room);
    case 2: return r_.Between(room / 2, room);
    default: return r_.Between(0, std::min(room, int64_t{1} << r_.Below(45)));
  }
}

std::vector<EventPlan> Generator::PlanEvents(LineKind kind, int64_t position_ns, size_t count) {
  const int64_t position_ps = position_ns * 1000;
  const int64_t lo = -position_ps, hi = span_ps_ - position_ps;
  std::vector<EventPlan> plans(count);
  std::optional<int64_t> previous;
  for (EventPlan& plan : plans) {
    plan.timed = kind == LineKind::kTimed || (kind == LineKind::kMixed && r_.Chance(0.6));
    if (!plan.timed) {
      const int64_t counts[] = {1, 0, kInt64Max, r_.Between(2, 1000), r_.Between(1, int64_t{1} << 40), -1};
      plan.occurrences = counts[r_.Below(std::size(counts))];
      plan.duration_ps = r_.Chance(0.5) ? 0 : r_.Between(0, int64_t{1} << r_.Below(50));
      continue;
    }
    plan.offset_ps = ChooseOffsetPs(lo, hi, previous);
    plan.omit_offset = plan.offset_ps == 0 && r_.Chance(0.5);
    plan.duration_ps = ChooseDurationPs(hi - plan.offset_ps);
    previous = plan.offset_ps;
  }
  if (r_.Chance(0.85)) {
    // Timed events in start order, in the slots timed events hold.
    std::vector<EventPlan> timed;
    for (const EventPlan& plan : plans) {
      if (plan.timed) timed.push_back(plan);
    }
    std::stable_sort(timed.begin(), timed.end(),
                     [](const EventPlan& a, const EventPlan& b) { return a.offset_ps < b.offset_ps; });
    size_t next = 0;
    for (EventPlan& plan : plans) {
      if (plan.timed) plan = timed[next++];
    }
  }
  return plans;
}

// --- messages -----------------------------------------------------------------

// A stat of any value kind (or none); its metadata_id names the plane's
// stat metadata, now and then one that does not exist.
std::string Generator::BuildStat(const PlaneIds& ids) {
  WireMessage m;
  int64_t metadata_id = 0;
  if (r_.Chance(0.01)) {
    metadata_id = MissingKey(ids.stat_keys);
    ++f_[F::kDanglingMetadataRefs];
  } else if (!ids.stat_ids_for_stats.empty()) {
    metadata_id = ids.stat_ids_for_stats[r_.Below(ids.stat_ids_for_stats.size())];
  }
  PutInt(&m, XStat::kMetadataIdFieldNumber, static_cast<uint64_t>(metadata_id));
  if (r_.Chance(0.03)) {
    ++f_[F::kStatNoValue];
    return Finish(&m, GenLevel::kStat);
  }
  uint64_t kind = r_.Below(7);
  if (kind == 5 && ids.stat_keys.empty()) kind = 1;  // a ref needs a stat metadata entry to point at
  uint32_t number = 0;
  switch (kind) {
    case 0: {
      number = XStat::kDoubleValueFieldNumber;
      using Double = std::numeric_limits<double>;
      const double specials[] = {
          0.0,          -0.0, 1.5, Double::quiet_NaN(), Double::infinity(), -Double::infinity(), Double::denorm_min(),
          Double::max()};
      const double v = specials[r_.Below(std::size(specials))];
      uint64_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      PutFixed64(&m, number, r_.Chance(0.3) ? r_.Next() : bits);  // any bits: NaN payloads too
      ++f_[F::kStatDouble];
      break;
    }
    case 1:
      number = XStat::kUint64ValueFieldNumber;
      PutVarint(&m, number, AnyUint64());
      ++f_[F::kStatUint64];
      break;
    case 2:
      number = XStat::kInt64ValueFieldNumber;
      PutVarint(&m, number, static_cast<uint64_t>(AnyInt64()));
      ++f_[F::kStatInt64];
      break;
    case 3:
      number = XStat::kStrValueFieldNumber;
      PutText(&m, number, Text(24), true);
      ++f_[F::kStatStr];
      break;
    case 4:
      number = XStat::kBytesValueFieldNumber;
      PutBytes(&m, number, Bytes(24));
      ++f_[F::kStatBytes];
      break;
    case 5: {
      number = XStat::kRefValueFieldNumber;
      auto it = ids.stat_keys.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(r_.Below(ids.stat_keys.size())));
      PutVarint(&m, number, static_cast<uint64_t>(*it));
      ++f_[F::kStatRef];
      break;
    }
    default:
      number = XStat::kCompressedStrValueFieldNumber;
      PutBytes(&m, number, Bytes(32));
      ++f_[F::kStatCompressedStr];
  }
  if (o_.allow_merges && r_.Chance(0.1)) {
    const uint32_t other =
        number == XStat::kInt64ValueFieldNumber ? XStat::kUint64ValueFieldNumber : XStat::kInt64ValueFieldNumber;
    PutDecoy(&m, number, other, r_.Below(1000));
  }
  return Finish(&m, GenLevel::kStat);
}

void Generator::PutStats(WireMessage* m, uint32_t number, const PlaneIds& ids, size_t count, F kind) {
  for (size_t i = 0; i < count; ++i) {
    m->Add(number, true, LenField(number, BuildStat(ids)));
    ++f_[kind];
  }
}

std::string Generator::BuildEvent(const PlaneIds& ids, const EventPlan& plan) {
  WireMessage m;
  int64_t metadata_id = 0;
  if (r_.Chance(0.01)) {
    metadata_id = MissingKey(ids.event_keys);
    ++f_[F::kDanglingMetadataRefs];
  } else if (!ids.event_key_list.empty()) {
    metadata_id = ids.event_key_list[r_.Below(ids.event_key_list.size())];
  }
  PutInt(&m, XEvent::kMetadataIdFieldNumber, static_cast<uint64_t>(metadata_id));
  if (plan.timed) {
    ++f_[F::kTimedEvents];
    if (plan.omit_offset) {
      ++f_[F::kEventsWithoutData];
      ++f_.offset_varint_bytes[0];
    } else {
      // A oneof member is written even when 0.
      PutVarint(&m, XEvent::kOffsetPsFieldNumber, static_cast<uint64_t>(plan.offset_ps));
      ++f_.offset_varint_bytes[VarintSize(static_cast<uint64_t>(plan.offset_ps))];
      f_[F::kNegativeOffsets] += plan.offset_ps < 0;
      for (int k = 1; k <= 9; ++k) {
        const uint64_t edge = uint64_t{1} << (7 * k);
        f_[F::kBoundaryOffsets] += static_cast<uint64_t>(plan.offset_ps) + 3 - edge <= 6;
      }
      if (o_.allow_merges && r_.Chance(0.05)) {
        PutDecoy(&m, XEvent::kOffsetPsFieldNumber, XEvent::kNumOccurrencesFieldNumber, r_.Below(100));
      }
    }
    f_[F::kZeroDurations] += plan.duration_ps == 0;
    f_[F::kOnePsDurations] += plan.duration_ps == 1;
    f_[F::kHugeDurations] += plan.duration_ps >= 1'000'000'000'000;
  } else {
    ++f_[F::kOccurrenceEvents];
    PutVarint(&m, XEvent::kNumOccurrencesFieldNumber, static_cast<uint64_t>(plan.occurrences));
    if (o_.allow_merges && r_.Chance(0.05)) {
      PutDecoy(&m, XEvent::kNumOccurrencesFieldNumber, XEvent::kOffsetPsFieldNumber, r_.Next());
    }
  }
  PutInt(&m, XEvent::kDurationPsFieldNumber, static_cast<uint64_t>(plan.duration_ps));
  if (o_.allow_merges && plan.duration_ps != 0 && r_.Chance(0.03)) {
    PutDecoy(&m, XEvent::kDurationPsFieldNumber, XEvent::kDurationPsFieldNumber, r_.Next());
  }
  if (r_.Chance(0.35)) PutStats(&m, XEvent::kStatsFieldNumber, ids, 1 + SmallCount(3), F::kEventStats);
  return Finish(&m, GenLevel::kEvent);
}

LineKind Generator::RandomLineKind() {
  const uint64_t c = r_.Below(100);
  if (c < 70) return LineKind::kTimed;
  if (c < 80) return LineKind::kMixed;
  if (c < 87) return LineKind::kOccurrences;
  return LineKind::kEmpty;
}

// A line of `kind`: header, then events while the limit and the budget allow.
std::string Generator::BuildLine(const PlaneIds& ids, LineKind kind, const LineLimit& limit) {
  const size_t target = limit.exact ? *limit.exact : limit.cap;
  // A small size leaves no room for extras: a short header that always
  // leaves room for one event and the padding.
  const bool compact = target < 512;
  const size_t reserve = limit.exact ? kMinPad : 0;
  WireMessage line;
  PutInt(&line, XLine::kIdFieldNumber, static_cast<uint64_t>(compact ? r_.Between(0, 99) : AnyId()));
  PutText(&line, XLine::kNameFieldNumber,
          compact ? std::string("t") + std::to_string(r_.Below(1000)) : Name(kLineNames));
  if (!compact && r_.Chance(0.15)) {
    PutInt(&line, XLine::kDisplayIdFieldNumber, static_cast<uint64_t>(AnyId()));
    ++f_[F::kLineDisplayIds];
  }
  if (!compact && r_.Chance(0.15)) {
    PutText(&line, XLine::kDisplayNameFieldNumber, Name(kLineNames), true);
    ++f_[F::kLineDisplayNames];
  }
  if (!compact && r_.Chance(0.25)) {
    PutInt(&line, XLine::kDurationPsFieldNumber,
           static_cast<uint64_t>(r_.Chance(0.05) ? kInt64Max : r_.Between(0, span_ps_)));
    ++f_[F::kLineDurations];
  }
  const int64_t position_ns = LinePositionNs(compact || limit.exact.has_value());
  // Readers skip empty lines, so their timestamp may be anything.
  const bool odd_timestamp = kind == LineKind::kEmpty && r_.Chance(0.3);
  const int64_t ts = odd_timestamp ? AnyInt64() : LineTimestampNs(position_ns);
  PutInt(&line, XLine::kTimestampNsFieldNumber, static_cast<uint64_t>(ts));
  if (o_.allow_merges && !compact && line.Has(XLine::kTimestampNsFieldNumber) && r_.Chance(0.05)) {
    PutDecoy(&line, XLine::kTimestampNsFieldNumber, XLine::kTimestampNsFieldNumber, r_.Next());
  }
  // Room kept for the smallest event (an empty one, its length maybe overlong).
  constexpr size_t kSmallestEvent = 1 + 5;
  if (target >= reserve + kSmallestEvent) AddUnknowns(&line, GenLevel::kLine, target - reserve - kSmallestEvent);

  size_t count = 0;
  if (kind != LineKind::kEmpty) {
    count = limit.max_events != 0 ? limit.max_events : r_.Chance(0.08) ? 1 + r_.Below(500) : 1 + SmallCount(16);
  }
  const std::vector<EventPlan> plans = PlanEvents(kind, position_ns, count);
  size_t events = 0, timed = 0;
  std::optional<int64_t> last_offset;
  bool unsorted = false;
  for (const EventPlan& plan : plans) {
    const bool mandatory = limit.need_timed && events == 0;
    if (limit.budgeted && !mandatory && budget_ <= 0) break;
    const size_t before = line.size();
    if (!TryAdd(&line, XLine::kEventsFieldNumber, target - reserve, [&] { return BuildEvent(ids, plan); })) break;
    if (limit.budgeted) budget_ -= static_cast<int64_t>(line.size() - before);
    ++events;
    if (plan.timed) {
      unsorted |= last_offset && plan.offset_ps < *last_offset;
      last_offset = plan.offset_ps;
      ++timed;
    }
  }
  if (limit.exact && events == 0) {
    // No planned event fitted: the smallest one, timed at the line's start
    // (exact lines lie inside the session).
    line.Add(XLine::kEventsFieldNumber, true, LenField(XLine::kEventsFieldNumber, ""));
    ++events, ++timed;
    ++f_[F::kTimedEvents], ++f_[F::kEventsWithoutData], ++f_[F::kZeroDurations];
    ++f_.offset_varint_bytes[0];
  }
  ++f_[F::kLines];
  f_[F::kEmptyLines] += events == 0;
  f_[F::kEmptyLinesOddTimestamp] += events == 0 && odd_timestamp;
  f_[F::kOccurrenceOnlyLines] += events > 0 && timed == 0;
  f_[F::kUnsortedLines] += unsorted;
  f_[F::kLinesBeforeSession] += events > 0 && position_ns < 0;
  if (limit.exact) {
    Pad(&line, *limit.exact, GenLevel::kLine);
    ++f_[F::kExactLines];
  }
  std::string bytes = Seal(line);
  if (limit.exact && bytes.size() != *limit.exact) throw std::logic_error("xspace generator: exact line size missed");
  return bytes;
}

// child_id: packed (one length-delimited run of varints, the proto3
// default), unpacked (one varint field each), or both in one message.
void Generator::PutChildIds(WireMessage* m, int64_t parent, const PlaneIds& ids) {
  const uint32_t number = XEventMetadata::kChildIdFieldNumber;
  std::vector<int64_t> others;  // no metadata its own child
  for (const int64_t key : ids.event_key_list) {
    if (key != parent) others.push_back(key);
  }
  if (others.empty()) return;
  std::vector<int64_t> children(1 + SmallCount(5));
  for (int64_t& child : children) child = others[r_.Below(others.size())];
  const uint64_t style = r_.Below(3);  // 0 packed, 1 unpacked, 2 mixed
  size_t packed_until = style == 0 ? children.size() : style == 1 ? 0 : r_.Below(children.size() + 1);
  if (packed_until > 0) {
    std::string run;
    for (size_t i = 0; i < packed_until; ++i) AppendValueVarint(&run, static_cast<uint64_t>(children[i]));
    m->Add(number, true, LenField(number, run));
    ++f_[F::kChildIdsPacked];
  }
  if (packed_until < children.size()) ++f_[F::kChildIdsUnpacked];
  for (size_t i = packed_until; i < children.size(); ++i) PutVarint(m, number, static_cast<uint64_t>(children[i]));
}

std::string Generator::BuildEventMetadata(int64_t key, const PlaneIds& ids) {
  if (r_.Chance(0.03)) return "";  // an entry with no value at all
  WireMessage m;
  int64_t id = key;
  if (r_.Chance(0.1)) {
    id = r_.Chance(0.7) ? 0 : MissingKey(ids.event_keys);
    f_[F::kMetadataIdMismatches] += id != key;
  }
  PutInt(&m, XEventMetadata::kIdFieldNumber, static_cast<uint64_t>(id));
  PutText(&m, XEventMetadata::kNameFieldNumber, Name(kEventNames));
  if (r_.Chance(0.2)) {
    PutText(&m, XEventMetadata::kDisplayNameFieldNumber, Name(kEventNames), true);
    ++f_[F::kMetadataDisplayNames];
  }
  if (r_.Chance(0.15)) {
    PutBytes(&m, XEventMetadata::kMetadataFieldNumber, Bytes(40));
    ++f_[F::kMetadataBytes];
  }
  if (r_.Chance(0.15)) PutStats(&m, XEventMetadata::kStatsFieldNumber, ids, 1 + SmallCount(2), F::kMetadataStats);
  if (r_.Chance(0.2)) PutChildIds(&m, key, ids);
  return Finish(&m, GenLevel::kEventMetadata);
}

std::string Generator::BuildStatMetadata(int64_t key, std::string_view name) {
  WireMessage m;
  PutInt(&m, XStatMetadata::kIdFieldNumber, static_cast<uint64_t>(key));
  PutText(&m, XStatMetadata::kNameFieldNumber, name);
  if (r_.Chance(0.2)) {
    PutText(&m, XStatMetadata::kDescriptionFieldNumber, Text(20), true);
    ++f_[F::kStatDescriptions];
  }
  return Finish(&m, GenLevel::kStatMetadata);
}

// A map entry (key 1, value 2): the key left out when 0 (protobuf reads 0),
// an empty value sometimes left out too, the two sometimes reversed.
std::string Generator::MapEntry(int64_t key, const std::string& value) {
  WireMessage entry;
  if (key == 0 && !r_.Chance(0.3)) {
    ++f_[F::kMapEntriesWithoutKey];
  } else {
    f_[F::kExplicitDefaults] += key == 0;
    PutVarint(&entry, 1, static_cast<uint64_t>(key));
  }
  if (value.empty() && r_.Chance(0.6)) {
    ++f_[F::kMapEntriesWithoutValue];
  } else {
    entry.Add(2, true, LenField(2, value));
  }
  AddUnknowns(&entry, GenLevel::kMapEntry);
  std::vector<uint32_t> order;
  std::string bytes = Seal(entry, 0.15, &order);
  f_[F::kMapEntriesReversed] += order.size() == 2 && order[0] == 2;
  return bytes;
}

// The plane's name by kind; `compact`: no drawn text (an exact size).
std::string Generator::PlaneName(PlaneKind kind, bool compact, int64_t* id) {
  switch (kind) {
    case PlaneKind::kCpu:
      ++f_[F::kCpuPlanes];
      if (compact || !r_.Chance(0.3)) return "/host:CPU";
      return "/host:CPU" + std::string(kCpuSuffixes[r_.Below(std::size(kCpuSuffixes))]);
    case PlaneKind::kGpu: {
      ++f_[F::kGpuPlanes];
      const int64_t ordinal = static_cast<int64_t>(r_.Below(16));
      if (r_.Chance(0.8)) *id = ordinal;  // XProf takes the GPU's pid from its plane id
      return "/device:GPU:" + std::to_string(ordinal);
    }
    case PlaneKind::kCustom:
      ++f_[F::kCustomPlanes];
      return "/device:CUSTOM:" + (compact ? std::string("TPU") : Name(kCustomDevices));
    case PlaneKind::kHostMetadata: ++f_[F::kHostMetadataPlanes]; return "/host:metadata";
    case PlaneKind::kEmpty: {
      const PlaneKind named[] = {PlaneKind::kOther, PlaneKind::kCpu, PlaneKind::kGpu, PlaneKind::kCustom};
      return PlaneName(named[r_.Below(std::size(named))], compact, id);
    }
    case PlaneKind::kOther: {
      ++f_[F::kOtherPlanes];
      if (compact) return "/host:TPU";
      std::string name = Name(kOtherPlaneNames);
      return name == kTaskEnvPlaneName ? name + "?" : name;
    }
  }
  return "";
}

// The plane's stat and event metadata maps, within `limit` bytes.
void Generator::AddMetadata(WireMessage* plane, PlaneIds* ids, PlaneKind kind, size_t limit) {
  const bool compact = limit < 512;
  // Producers name every event and stat: planes mostly have both maps.
  const size_t stat_count =
      compact ? r_.Below(2) : (r_.Chance(0.85) ? 1 : 0) + SmallCount(kind == PlaneKind::kHostMetadata ? 16 : 8);
  const size_t event_count = compact ? r_.Below(2) : (r_.Chance(0.85) ? 1 : 0) + SmallCount(12);
  std::vector<int64_t> stat_keys;
  for (size_t i = 0; i < stat_count; ++i) stat_keys.push_back(NewKey(&ids->stat_keys));
  for (size_t i = 0; i < event_count; ++i) ids->event_key_list.push_back(NewKey(&ids->event_keys));
  for (const int64_t key : stat_keys) {
    std::string name = Name(kStatNames);
    if (name == kStartStatName || name == kStopStatName) name += "_";
    const size_t before = plane->size();
    if (TryAdd(plane, XPlane::kStatMetadataFieldNumber, limit,
               [&] { return MapEntry(key, BuildStatMetadata(key, name)); })) {
      ++f_[F::kStatMetadata];
      ids->stat_ids_for_stats.push_back(key);
    }
    budget_ -= static_cast<int64_t>(plane->size() - before);
  }
  for (const int64_t key : ids->event_key_list) {
    const size_t before = plane->size();
    if (TryAdd(plane, XPlane::kEventMetadataFieldNumber, limit,
               [&] { return MapEntry(key, BuildEventMetadata(key, *ids)); })) {
      ++f_[F::kEventMetadata];
    }
    budget_ -= static_cast<int64_t>(plane->size() - before);
  }
}

// A plane of `kind`; when asked, of an exact size, holding an exact-size
// line, or with a timed event for sure.
std::string Generator::BuildPlane(PlaneKind kind, std::optional<size_t> exact, std::optional<size_t> exact_line,
                                  bool need_timed) {
  const size_t limit = exact ? *exact - kMinPad : std::numeric_limits<size_t>::max();
  const bool compact = exact && *exact < 512;
  WireMessage plane;
  int64_t id = exact ? r_.Between(0, 99) : AnyId();
  const std::string name = PlaneName(kind, compact, &id);
  PutInt(&plane, XPlane::kIdFieldNumber, static_cast<uint64_t>(id));
  PutText(&plane, XPlane::kNameFieldNumber, name);
  ++f_[F::kPlanes];
  if (kind == PlaneKind::kEmpty) {
    ++f_[F::kEmptyPlanes];
    return Seal(plane);
  }
  // In an exact plane, metadata and stats leave room for the exact line
  // (Run puts one there only when the plane has room beyond its header).
  const size_t header_limit = exact && exact_line ? limit - *exact_line - kMaxLenOverhead : limit;
  PlaneIds ids;
  AddUnknowns(&plane, GenLevel::kPlane, header_limit);
  AddMetadata(&plane, &ids, kind, header_limit);
  if (!ids.stat_keys.empty() && r_.Chance(0.4)) {
    const XSpaceGenFeatures saved = f_;
    WireMessage stats;
    PutStats(&stats, XPlane::kStatsFieldNumber, ids, 1 + SmallCount(4), F::kPlaneStats);
    if (plane.size() + stats.size() <= header_limit) {
      for (const auto& field : stats.fields()) plane.Add(field.number, true, field.bytes);
      budget_ -= static_cast<int64_t>(stats.size());
    } else {
      f_ = saved;
    }
  }
  size_t lines = 0;
  if (exact_line) {
    const LineKind kinds[] = {LineKind::kTimed, LineKind::kMixed};
    const LineLimit line_limit = LineLimit::Exact(*exact_line, 1 + r_.Below(*exact_line / 12 + 1));
    plane.Add(XPlane::kLinesFieldNumber, true,
              LenField(XPlane::kLinesFieldNumber, BuildLine(ids, kinds[r_.Below(2)], line_limit)));
    ++lines;
  }
  if (need_timed) {
    plane.Add(XPlane::kLinesFieldNumber, true,
              LenField(XPlane::kLinesFieldNumber, BuildLine(ids, LineKind::kTimed, LineLimit::WithTimedEvent())));
    ++lines;
  }
  if (exact) {
    // Lines up to a random part of the target, then the padding.
    const size_t fill = static_cast<size_t>(r_.Between(0, static_cast<int64_t>(*exact)));
    for (int tries = 0; tries < 64 && plane.size() < fill && plane.size() + kMaxLenOverhead + 16 <= limit; ++tries) {
      const size_t room = limit - plane.size() - kMaxLenOverhead;
      const LineLimit line_limit = LineLimit::Capped(room, 1 + r_.Below(room / 10 + 1));
      if (!TryAdd(&plane, XPlane::kLinesFieldNumber, limit,
                  [&] { return BuildLine(ids, RandomLineKind(), line_limit); })) {
        break;
      }
      ++lines;
    }
    Pad(&plane, *exact, GenLevel::kPlane);
    ++f_[F::kExactPlanes];
  } else if (kind != PlaneKind::kHostMetadata) {
    for (size_t n = SmallCount(5); n > 0 && budget_ > 0; --n) {
      plane.Add(XPlane::kLinesFieldNumber, true,
                LenField(XPlane::kLinesFieldNumber, BuildLine(ids, RandomLineKind(), LineLimit{})));
      ++lines;
    }
  }
  f_[F::kMetadataOnlyPlanes] += lines == 0;
  std::string bytes = Seal(plane);
  if (exact && bytes.size() != *exact) throw std::logic_error("xspace generator: exact plane size missed");
  return bytes;
}

// The Task Environment plane: with the session (profile_start_time, and
// mostly profile_stop_time, as uint64 or a non-negative int64), or, as an
// extra plane of that name after the first, without it.
std::string Generator::BuildTaskEnvPlane(bool session) {
  WireMessage plane;
  PutInt(&plane, XPlane::kIdFieldNumber, static_cast<uint64_t>(AnyId()));
  PutText(&plane, XPlane::kNameFieldNumber, kTaskEnvPlaneName);
  ++f_[F::kPlanes];
  AddUnknowns(&plane, GenLevel::kPlane);
  PlaneIds ids;
  // Stat metadata: the session's two names (each once: readers take the
  // smallest id of a name), then others.
  std::vector<std::pair<int64_t, std::string>> names;
  std::optional<int64_t> start_key, stop_key;
  if (session) {
    start_key = NewKey(&ids.stat_keys);
    names.emplace_back(*start_key, kStartStatName);
    if (!r_.Chance(0.15)) {
      stop_key = NewKey(&ids.stat_keys);
      names.emplace_back(*stop_key, kStopStatName);
    }
  }
  for (size_t n = SmallCount(3); n > 0; --n) {
    const int64_t key = NewKey(&ids.stat_keys);
    ids.stat_ids_for_stats.push_back(key);
    std::string name = r_.Chance(0.5) ? "profile_options" : Name(kStatNames);
    if (name == kStartStatName || name == kStopStatName) name += "_";
    names.emplace_back(key, std::move(name));
  }
  for (const auto& [key, name] : names) {
    plane.Add(XPlane::kStatMetadataFieldNumber, true,
              LenField(XPlane::kStatMetadataFieldNumber, MapEntry(key, BuildStatMetadata(key, name))));
    ++f_[F::kStatMetadata];
  }
  if (session) {
    const bool as_int64 = r_.Chance(0.15);
    f_[F::kStartTimeAsInt64] += as_int64;
    f_[F::kNoStopTime] += !stop_key;
    const int64_t stop_ns = r_.Between(session_start_ns_, o_.session_start_ns + o_.span_ns);
    for (const auto& [key, value] : {std::pair{start_key, session_start_ns_}, std::pair{stop_key, stop_ns}}) {
      if (!key) continue;
      WireMessage stat;
      PutInt(&stat, XStat::kMetadataIdFieldNumber, static_cast<uint64_t>(*key));
      PutVarint(&stat, as_int64 ? XStat::kInt64ValueFieldNumber : XStat::kUint64ValueFieldNumber,
                static_cast<uint64_t>(value));
      plane.Add(XPlane::kStatsFieldNumber, true, LenField(XPlane::kStatsFieldNumber, Finish(&stat, GenLevel::kStat)));
      ++f_[F::kPlaneStats];
      ++f_[as_int64 ? F::kStatInt64 : F::kStatUint64];
    }
  }
  if (!ids.stat_ids_for_stats.empty()) PutStats(&plane, XPlane::kStatsFieldNumber, ids, SmallCount(2), F::kPlaneStats);
  // Empty lines only: a line with events here would be a timed one.
  for (size_t n = r_.Chance(0.1) ? 1 + r_.Below(2) : 0; n > 0; --n) {
    plane.Add(XPlane::kLinesFieldNumber, true,
              LenField(XPlane::kLinesFieldNumber, BuildLine(ids, LineKind::kEmpty, LineLimit{})));
  }
  return Seal(plane);
}

PlaneKind Generator::RandomPlaneKind() {
  const PlaneKind kinds[] = {PlaneKind::kCpu,   PlaneKind::kGpu,          PlaneKind::kGpu,  PlaneKind::kCustom,
                             PlaneKind::kOther, PlaneKind::kHostMetadata, PlaneKind::kEmpty};
  return kinds[r_.Below(std::size(kinds))];
}

void Generator::PutHostnames(WireMessage* space) {
  const uint64_t c = r_.Below(10);
  const size_t count = c < 5 ? 1 : c < 8 ? 0 : 2 + r_.Below(3);
  f_[count == 0 ? F::kNoHostnames : count == 1 ? F::kOneHostname : F::kSeveralHostnames] += 1;
  for (size_t i = 0; i < count; ++i) {
    const std::string others[] = {host_ + ".example.internal", "localhost", "gen-host-ü", Text(12)};
    PutText(space, XSpace::kHostnamesFieldNumber, i == 0 ? host_ : others[r_.Below(std::size(others))], true);
  }
}

GeneratedXSpace Generator::Run() {
  if (o_.session_start_ns < kMinSessionStartNs || o_.session_start_ns > kMaxSessionStartNs || o_.span_ns < 1 ||
      o_.span_ns > kMaxSpanNs ||
      (o_.line_bytes && (*o_.line_bytes < kMinLineBytes || *o_.line_bytes >= kMaxExactBytes)) ||
      (o_.plane_bytes && (*o_.plane_bytes < kMinPlaneBytes || *o_.plane_bytes >= kMaxExactBytes)) ||
      o_.max_bytes < 256) {
    throw std::invalid_argument("XSpaceGenOptions out of bounds (tests/support/xspace_generator.h)");
  }
  host_ = "gen-host-" + std::to_string(r_.Below(1000));
  // The time base: relative to a Task Environment start (XLA, JAX), or
  // absolute epoch times with or without that plane.
  const uint64_t mode = r_.Below(10);
  relative_ = mode < 5;
  const bool task_env = mode < 7;
  ++f_[relative_ ? F::kRelativeLineTimes : F::kAbsoluteLineTimes];
  ++f_[task_env ? F::kTaskEnvironment : F::kNoTaskEnvironment];
  session_start_ns_ = o_.session_start_ns + (task_env ? r_.Between(0, o_.span_ns) : 0);
  const int max_bits = std::bit_width(o_.max_bytes) - 1;
  const int bits = static_cast<int>(r_.Between(8, std::max(8, max_bits)));
  budget_ = std::min<int64_t>(static_cast<int64_t>(o_.max_bytes),
                              (int64_t{1} << bits) + static_cast<int64_t>(r_.Below(uint64_t{1} << bits)));

  std::vector<std::string> planes;
  planes.push_back(BuildPlane(r_.Chance(0.5) ? PlaneKind::kGpu : PlaneKind::kCpu, {}, {}, true));
  for (size_t n = SmallCount(6); n > 0 && budget_ > 0; --n)
    planes.push_back(BuildPlane(RandomPlaneKind(), {}, {}, false));
  const PlaneKind timed_kinds[] = {PlaneKind::kCpu, PlaneKind::kGpu, PlaneKind::kCustom, PlaneKind::kOther};
  const bool line_in_plane =
      o_.line_bytes && o_.plane_bytes && *o_.plane_bytes >= *o_.line_bytes + 128 && r_.Chance(0.5);
  if (o_.plane_bytes) {
    planes.push_back(
        BuildPlane(timed_kinds[r_.Below(4)], o_.plane_bytes, line_in_plane ? o_.line_bytes : std::nullopt, false));
  }
  if (o_.line_bytes && !line_in_plane) {
    planes.push_back(BuildPlane(timed_kinds[r_.Below(4)], {}, o_.line_bytes, false));
  }
  if (r_.Chance(0.5)) {
    for (size_t i = planes.size(); i > 1; --i) std::swap(planes[i - 1], planes[r_.Below(i)]);
  }
  // The Task Environment anywhere; an extra plane of that name only after it.
  size_t task_env_at = planes.size();
  if (task_env) {
    task_env_at = r_.Below(planes.size() + 1);
    planes.insert(planes.begin() + static_cast<std::ptrdiff_t>(task_env_at), BuildTaskEnvPlane(true));
  }
  if (r_.Chance(0.03)) {
    const size_t from = task_env ? task_env_at + 1 : 0;
    const size_t at = from + r_.Below(planes.size() - from + 1);
    planes.insert(planes.begin() + static_cast<std::ptrdiff_t>(at), BuildTaskEnvPlane(false));
    ++f_[F::kExtraTaskEnvironmentPlane];
  }

  WireMessage space;
  for (const std::string& plane : planes)
    space.Add(XSpace::kPlanesFieldNumber, true, LenField(XSpace::kPlanesFieldNumber, plane));
  if (r_.Chance(0.1)) {
    for (size_t n = 1 + r_.Below(3); n > 0; --n) PutText(&space, XSpace::kErrorsFieldNumber, Name(kMessages), true);
    ++f_[F::kErrors];
  }
  if (r_.Chance(0.1)) {
    for (size_t n = 1 + r_.Below(3); n > 0; --n) PutText(&space, XSpace::kWarningsFieldNumber, Name(kMessages), true);
    ++f_[F::kWarnings];
  }
  PutHostnames(&space);
  GeneratedXSpace out;
  out.bytes = Finish(&space, GenLevel::kSpace);
  out.features = f_;
  out.host = host_;
  return out;
}

}  // namespace

GeneratedXSpace GenerateXSpace(GeneratorRandom& random, const XSpaceGenOptions& options) {
  return Generator(random, options).Run();
}

}  // namespace chronolink::trace::testing
