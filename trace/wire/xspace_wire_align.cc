#include "trace/wire/xspace_wire_align.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/common.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>

#include "proto/xplane.pb.h"
#include "trace/align/correction_record.h"
#include "trace/importers/xspace/line_base.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/host_span.h"
#include "trace/model/xplane_edit.h"
#include "trace/wire/protobuf_wire_type.h"
#include "trace/wire/xspace_wire_check.h"

namespace chronolink::trace {
namespace {

using Ptr = const uint8_t*;

// Tags as protobuf writes them (field << 3 | wire type), for the fields
// the rewrite reads (proto/xplane.proto).
constexpr uint32_t kSpacePlane = 1 << 3 | kLen;
constexpr uint32_t kSpaceErrors = 2 << 3 | kLen, kSpaceWarnings = 3 << 3 | kLen, kSpaceHostnames = 4 << 3 | kLen;
constexpr uint32_t kPlaneId = 1 << 3 | kVarint, kPlaneName = 2 << 3 | kLen, kPlaneLine = 3 << 3 | kLen;
constexpr uint32_t kLineId = 1 << 3 | kVarint, kLineName = 2 << 3 | kLen, kLineTimestamp = 3 << 3 | kVarint;
constexpr uint32_t kLineEvent = 4 << 3 | kLen, kLineDuration = 9 << 3 | kVarint, kLineDisplayName = 11 << 3 | kLen;
constexpr uint32_t kEventMetadata = 1 << 3 | kVarint, kEventOffset = 2 << 3 | kVarint;
constexpr uint32_t kEventDuration = 3 << 3 | kVarint, kEventStat = 4 << 3 | kLen;
constexpr uint32_t kEventOccurrences = 5 << 3 | kVarint;
constexpr uint32_t kStatStr = 5 << 3 | kLen;

constexpr size_t kMaxMessageBytes = std::numeric_limits<int32_t>::max();

constexpr char kMalformedEvent[] = "malformed wire data or a group in an event";
constexpr char kMergedEvent[] =
    "an event's time written twice, or both members of its oneof (protobuf would merge them)";

// ---- Reading, exactly where protobuf would read the same; declining where in doubt.

// A varint of at most 8 bytes (56 bits) with 8 bytes readable at p,
// without a loop: the 7-bit groups of one load packed pairwise. False
// (p untouched) when it is longer; the loop below reads those.
inline bool ReadVarint8(Ptr& p, uint64_t* out) {
  if constexpr (std::endian::native != std::endian::little) return false;
  uint64_t x;
  std::memcpy(&x, p, 8);
  const uint64_t stops = ~x & 0x8080808080808080ULL;  // bytes without a continuation bit
  if (stops == 0) return false;
  const int last_bit = std::countr_zero(stops);     // 8 * (bytes - 1) + 7
  x &= ~uint64_t{0} >> (63 - last_bit) & 0x7f7f7f7f7f7f7f7fULL;
  x = (x & 0x007f007f007f007fULL) | (x & 0x7f007f007f007f00ULL) >> 1;
  x = (x & 0x00003fff00003fffULL) | (x & 0x3fff00003fff0000ULL) >> 2;
  x = (x & 0x000000000fffffffULL) | (x & 0x0fffffff00000000ULL) >> 4;
  *out = x;
  p += (last_bit >> 3) + 1;
  return true;
}

// A value varint: up to 10 bytes; a tenth byte with bits past 64 (which
// protobuf drops) is declined rather than reasoned about.
inline bool ReadVarint(Ptr& p, Ptr end, uint64_t* out) {
  if (p < end && *p < 0x80) {
    *out = *p++;
    return true;
  }
  if (end - p >= 8 && ReadVarint8(p, out)) return true;
  uint64_t v = 0;
  for (int i = 0; i < 10; ++i) {
    if (p == end) return false;
    const uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      if (i == 9 && b > 1) return false;
      *out = v;
      return true;
    }
  }
  return false;
}

// A tag: at most 5 bytes, below 2^32, field number not 0.
inline bool ReadTag(Ptr& p, Ptr end, uint32_t* tag) {
  if (p < end && *p < 0x80) {
    *tag = *p++;
    return *tag >= 8;
  }
  uint64_t v = 0;
  for (int i = 0; i < 5; ++i) {
    if (p == end) return false;
    const uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      if (v > std::numeric_limits<uint32_t>::max() || (v >> 3) == 0) return false;
      *tag = static_cast<uint32_t>(v);
      return true;
    }
  }
  return false;
}

// A length, as protobuf's ReadSize takes it: at most 5 bytes, below 2^31,
// and within the bytes left.
inline bool ReadLen(Ptr& p, Ptr end, size_t* len) {
  if (p < end && *p < 0x80) {
    *len = *p++;
    return *len <= static_cast<size_t>(end - p);
  }
  uint64_t v = 0;
  for (int i = 0; i < 5; ++i) {
    if (p == end) return false;
    const uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      if (v > kMaxMessageBytes || v > static_cast<uint64_t>(end - p)) return false;
      *len = static_cast<size_t>(v);
      return true;
    }
  }
  return false;
}

// Skips a field of any wire type but groups (3, 4) and the invalid 6, 7.
inline bool SkipField(Ptr& p, Ptr end, uint32_t wire_type) {
  uint64_t ignored = 0;
  size_t len = 0;
  switch (wire_type) {
    case kVarint: return ReadVarint(p, end, &ignored);
    case kFixed64:
      if (end - p < 8) return false;
      p += 8;
      return true;
    case kFixed32:
      if (end - p < 4) return false;
      p += 4;
      return true;
    case kLen:
      if (!ReadLen(p, end, &len)) return false;
      p += len;
      return true;
    default: return false;
  }
}

// Whether n bytes are all ASCII: 8 at a time, the last 8 overlapping.
inline bool Ascii(Ptr p, size_t n) {
  if (n < 8) {
    uint8_t high = 0;
    for (size_t i = 0; i < n; ++i) high |= p[i];
    return high < 0x80;
  }
  uint64_t high = 0, word;
  for (size_t i = 0; i + 8 < n; i += 8) {
    std::memcpy(&word, p + i, 8);
    high |= word;
  }
  std::memcpy(&word, p + n - 8, 8);
  return ((high | word) & 0x8080808080808080ULL) == 0;
}

// protobuf's own check of proto3 string fields; ASCII (the usual case) first.
inline bool ValidUtf8(Ptr p, size_t n) {
  if (Ascii(p, n)) return true;
  return google::protobuf::internal::IsStructurallyValidUTF8(reinterpret_cast<const char*>(p), static_cast<int>(n));
}

// A string field's bytes: read and checked.
inline bool ReadString(Ptr& p, Ptr end, std::string_view* out) {
  size_t n = 0;
  if (!ReadLen(p, end, &n) || !ValidUtf8(p, n)) return false;
  *out = std::string_view(reinterpret_cast<const char*>(p), n);
  p += n;
  return true;
}

// The usual stat, decided with a few loads: metadata_id (tag 0x08, a value
// of 1 or 2 bytes), then either one field of wire type varint with a
// one-byte tag whose value of 1 to 9 bytes ends exactly at `end`, or
// str_value (tag 0x2a) with a one-byte length, ending at `end`, all ASCII.
// True only where the loop below would say true too; anything else is
// left to it.
inline bool UsualStat(Ptr p, Ptr end) {
  const ptrdiff_t n = end - p;
  if (n < 4 || p[0] != 0x08) return false;
  const ptrdiff_t tag_at = p[1] < 0x80 ? 2 : (p[2] < 0x80 ? 3 : 0);
  if (tag_at == 0 || tag_at >= n - 1) return false;
  const uint8_t tag = p[tag_at];
  if (tag == kStatStr) {
    const size_t length = p[tag_at + 1];
    return length < 0x80 && tag_at + 2 + static_cast<ptrdiff_t>(length) == n && Ascii(p + tag_at + 2, length);
  }
  if (tag >= 0x80 || tag < 8 || (tag & 7) != kVarint || n - tag_at - 1 > 9 || p[n - 1] >= 0x80) return false;
  for (ptrdiff_t i = tag_at + 1; i < n - 1; ++i) {
    if (p[i] < 0x80) return false;  // the value ends early: another field follows
  }
  return true;
}

// An XStat parses when its string value is UTF-8 and every field is well formed.
bool ValidStat(Ptr p, Ptr end) {
  if (UsualStat(p, end)) return true;
  while (p < end) {
    uint32_t tag = 0;
    if (!ReadTag(p, end, &tag)) return false;
    std::string_view ignored;
    if (tag == kStatStr ? !ReadString(p, end, &ignored) : !SkipField(p, end, tag & 7)) return false;
  }
  return true;
}

// ---- Writing.

// 1 + (bits - 1) / 7, with a multiply for the division.
inline int VarintSize(uint64_t v) { return (std::bit_width(v | 1) * 9 + 64) / 64; }

inline char* PutVarint(char* w, uint64_t v) {
  while (v >= 0x80) {
    *w++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *w++ = static_cast<char>(v);
  return w;
}

// Overwrites the `width` bytes (1 to 8) at w, which hold a varint of that
// width, with v's varint, known to have that width too, in one store: v's
// 7-bit groups spread to bytes pairwise (ReadVarint8 backwards). The 8
// bytes at w must be writable; those after the varint keep their value.
[[gnu::always_inline]] inline void PatchVarint(char* w, uint64_t v, int width) {
  if constexpr (std::endian::native != std::endian::little) {
    PutVarint(w, v);
    return;
  }
  uint64_t x = v;
  x = (x & 0x000000000fffffffULL) | (x & 0x00fffffff0000000ULL) << 4;
  x = (x & 0x00003fff00003fffULL) | (x & 0x0fffc0000fffc000ULL) << 2;
  x = (x & 0x007f007f007f007fULL) | (x & 0x3f803f803f803f80ULL) << 1;
  const uint64_t keep = width == 8 ? 0 : ~uint64_t{0} << (8 * width);
  const uint64_t more = 0x8080808080808080ULL & (~keep >> 8);  // every byte but the varint's last
  uint64_t old;
  std::memcpy(&old, w, 8);
  x = ((x | more) & ~keep) | (old & keep);
  std::memcpy(w, &x, 8);
}

inline char* PutBytes(char* w, Ptr begin, Ptr end) {
  const size_t n = static_cast<size_t>(end - begin);
  std::memcpy(w, begin, n);
  return w + n;
}

void SerializeDeterministic(const google::protobuf::MessageLite& message, std::string* out) {
  out->clear();
  message.ByteSizeLong();
  google::protobuf::io::StringOutputStream stream(out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeWithCachedSizes(&coded);
}

std::string_view View(Ptr begin, Ptr end) {
  return {reinterpret_cast<const char*>(begin), static_cast<size_t>(end - begin)};
}

// ---- What the first pass learns.

// A line's fields before its first event (protobuf's order puts id, name
// and timestamp there); the rewrite reads the rest, and declines a line
// whose id, name or timestamp comes after an event.
struct LineInfo {
  int64_t id = 0;
  std::string_view name;
  int64_t timestamp_ns = 0;
  bool has_timestamp = false;
  bool nonempty = false;  // has an event
  int64_t duration_ps = 0;  // read only in an empty line (the rewrite reads the others')
};

struct PlaneInfo {
  Ptr begin = nullptr;  // the plane message's bytes
  Ptr end = nullptr;
  int64_t id = 0;
  std::string_view name;
  size_t first_line = 0;  // into the host's lines, in file order
  size_t lines = 0;
  bool task_env = false;
};

// The `/host:CPU` plane's new bytes around its rewritten lines.
struct CountersPlane {
  size_t plane = SIZE_MAX;
  std::string head;      // the plane's fields before its lines, serialised
  std::string new_line;  // the `_counters_` line
  std::string tail;      // the fields after its lines
};

class WireAligner {
 public:
  // `predicted`: the plan's first instant for this host is a prediction
  // (PredictXSpaceFileSpan) to check, its last a guess to replace.
  WireAligner(std::string_view bytes, const HostClockMap& map, const AlignOptions& options,
              const AlignResult& result, bool predicted, HostAlignment* stats, WireOutput* out)
      : begin_(reinterpret_cast<Ptr>(bytes.data())), end_(begin_ + bytes.size()), map_(map), cursor_(map),
        options_(options), result_(result), predicted_(predicted), stats_(stats), out_(out) {}

  bool Run(std::string* hostname0) {
    if (!ScanSpace()) return false;
    *hostname0 = std::string(hostname0_);
    if (!DecideBase() || !CheckPlanes()) return false;
    const HostAlignment planned = *stats_;
    const HostSpanInstants seed_span = span_;  // the Task Environment's part, before the events
    const bool seed_any = any_;
    if (!Emit()) return false;
    if (predicted_ && !TakeFoundSpan(planned)) {
      if (!reason_.empty()) return false;
      // The span planes changed size: the host again, on the found span.
      const HostAlignment counts = *stats_;
      *stats_ = planned;
      SetSpanEntries(counts, stats_);
      span_ = seed_span;
      any_ = seed_any;
      uncertainty_sum_ = 0;
      if (!Emit()) return false;
    }
    if (!CheckSpan()) return false;
    std::string bound_error;
    if (!CheckPlannedBound(*stats_, options_, &bound_error)) return Fail("the bound is over the limit");
    if (!EmitRecordPlaneAtEnd()) return false;
    if (out_->size() > kMaxMessageBytes) return Fail("the output would be over protobuf's 2 GiB limit");
    return CheckOutput();
  }

  const std::string& reason() const { return reason_; }
  bool mispredicted() const { return mispredicted_; }

 private:
  bool Fail(std::string_view reason) {
    if (reason_.empty()) reason_ = reason;
    return false;
  }

  bool Mispredicted(std::string_view reason) {
    mispredicted_ = true;
    return Fail(reason);
  }

  // The span planes on the plan's stats, then every plane.
  bool Emit() {
    if (!PrepareSpanPlanes()) return false;
    out_->Clear();
    meant_.Clear();
    later_task_env_index_ = 0;
    task_env_slot_ = SIZE_MAX;
    counters_line_at_ = SIZE_MAX;
    out_->Reserve(static_cast<size_t>(end_ - begin_) + static_cast<size_t>(end_ - begin_) / 8 + 65536);
    if (!EmitSpace()) return false;
    if (stats_->events > 0) uncertainty_sum_ /= static_cast<double>(stats_->events);
    stats_->uncertainty_mean_ns = uncertainty_sum_;
    return true;
  }

  static void SetSpanEntries(const HostAlignment& from, HostAlignment* to) {
    to->first_host = from.first_host;
    to->last_host = from.last_host;
    to->correction_first_ns = from.correction_first_ns;
    to->correction_last_ns = from.correction_last_ns;
  }

  // After a predicted plan's emit: the first instant must be the predicted
  // one (the common origin came from it); the last is the one found, and
  // the span planes are made again on it and patched in where their sizes
  // have not changed. False, with nothing failed, when they have.
  bool TakeFoundSpan(const HostAlignment& planned) {
    if (!any_ || span_.first != planned.first_host) {
      return Mispredicted("its first instant is not the predicted one (events out of start order)");
    }
    HostAlignment replanned = planned;
    TraceInstant mapped_first;
    std::string error;
    if (!PlanHostSpan(planned.host, span_, map_, options_, &replanned, &mapped_first, &error)) {
      return Mispredicted("its found span does not plan (the exact plan reports why)");
    }
    SetSpanEntries(replanned, stats_);
    const std::string env_bytes = task_env_bytes_;
    const CountersPlane counters = counters_;
    if (!PrepareSpanPlanes()) return false;
    if (env_bytes.size() != task_env_bytes_.size() || counters.head != counters_.head ||
        counters.tail != counters_.tail || counters.new_line.size() != counters_.new_line.size()) {
      return false;
    }
    if (task_env_at_ != SIZE_MAX) std::memcpy(out_->data() + task_env_at_, task_env_bytes_.data(), task_env_bytes_.size());
    if (counters_line_at_ != SIZE_MAX) {
      std::memcpy(out_->data() + counters_line_at_, counters_.new_line.data(), counters_.new_line.size());
    }
    return true;
  }

  // ---- First pass: structure, names, line times; strings checked.

  bool ScanSpace() {
    Ptr p = begin_;
    bool have_hostname = false;
    while (p < end_) {
      uint32_t tag = 0;
      if (!ReadTag(p, end_, &tag)) return Fail("malformed wire data or a group");
      if (tag == kSpacePlane) {
        size_t n = 0;
        if (!ReadLen(p, end_, &n) || !ScanPlane(p, p + n)) return Fail("malformed wire data or a group in a plane");
        p += n;
      } else if (tag == kSpaceErrors || tag == kSpaceWarnings || tag == kSpaceHostnames) {
        std::string_view s;
        if (!ReadString(p, end_, &s)) return Fail("a string of the XSpace is not UTF-8 or malformed");
        if (tag == kSpaceHostnames && !have_hostname) hostname0_ = s, have_hostname = true;
      } else if (!SkipField(p, end_, tag & 7)) {
        return Fail("malformed wire data or a group");
      }
    }
    if (planes_.empty()) return Fail("no planes");
    return true;
  }

  bool ScanPlane(Ptr begin, Ptr end) {
    PlaneInfo plane;
    plane.begin = begin;
    plane.end = end;
    plane.first_line = lines_.size();
    for (Ptr p = begin; p < end;) {
      uint32_t tag = 0;
      if (!ReadTag(p, end, &tag)) return false;
      if (tag == kPlaneLine) {
        size_t n = 0;
        if (!ReadLen(p, end, &n) || !ScanLine(p, p + n)) return false;
        p += n;
        ++plane.lines;
        continue;
      }
      if (tag == kPlaneId) {
        uint64_t v = 0;
        if (!ReadVarint(p, end, &v)) return false;
        plane.id = static_cast<int64_t>(v);
      } else if (tag == kPlaneName) {
        size_t n = 0;
        if (!ReadLen(p, end, &n)) return false;
        plane.name = View(p, p + n);  // UTF-8: checked when the plane's other fields parse
        p += n;
      } else if (!SkipField(p, end, tag & 7)) {
        return false;
      }
    }
    plane.task_env = plane.name == kTaskEnvPlaneName;
    planes_.push_back(plane);
    return true;
  }

  // Up to the line's first event only: walking every event here would read
  // the whole file once more before the rewrite reads it.
  bool ScanLine(Ptr p, Ptr end) {
    LineInfo line;
    while (p < end && !line.nonempty) {
      uint32_t tag = 0;
      if (!ReadTag(p, end, &tag)) return false;
      uint64_t v = 0;
      switch (tag) {
        case kLineEvent:
          line.nonempty = true;
          break;
        case kLineId:
          if (!ReadVarint(p, end, &v)) return false;
          line.id = static_cast<int64_t>(v);
          break;
        case kLineTimestamp:
          if (line.has_timestamp || !ReadVarint(p, end, &v)) return Fail("a line's timestamp twice, or malformed");
          line.timestamp_ns = static_cast<int64_t>(v);
          line.has_timestamp = true;
          break;
        case kLineName:
          if (!ReadString(p, end, &line.name)) return Fail("a line name is not UTF-8 or malformed");
          break;
        case kLineDuration:  // twice: declined where the rewrite meets it
          if (!ReadVarint(p, end, &v)) return false;
          line.duration_ps = static_cast<int64_t>(v);
          break;
        default:  // the display name is checked where the rewrite meets it
          if (!SkipField(p, end, tag & 7)) return false;
      }
    }
    lines_.push_back(line);
    return true;
  }

  // The line base by the reader's rule, from what the first pass read.
  bool DecideBase() {
    std::vector<int64_t> nonempty;
    for (const LineInfo& l : lines_) {
      if (l.nonempty) nonempty.push_back(l.timestamp_ns);
    }
    // The first Task Environment plane, parsed: its stats read as the model reads them.
    // Later ones are parsed too: they must parse, and their events count in the span.
    later_task_envs_.clear();
    for (const PlaneInfo& plane : planes_) {
      if (!plane.task_env) continue;
      xspace::XPlane* parsed =
          task_env_.planes().empty() ? task_env_.add_planes() : &later_task_envs_.emplace_back();
      if (!parsed->ParseFromArray(plane.begin, static_cast<int>(plane.end - plane.begin))) {
        return Fail("a Task Environment plane does not parse");
      }
    }
    LineBase base;
    size_t abs_i = 0, rel_i = 0;
    if (DecideLineBase(ProfileStartTime(task_env_), nonempty, &base, &abs_i, &rel_i) != LineBaseVerdict::kOk) {
      return Fail("no single line base");
    }
    if (!base.known) return Fail("relative line times with no start");
    base_ns_ = base.base_ns;
    // Task Environment planes are not re-timed, but their events and the
    // session bounds (read before they are set on the plan) count in the span.
    for (const auto& plane : task_env_.planes()) AddParsedLines(plane);
    for (const auto& plane : later_task_envs_) AddParsedLines(plane);
    if (span_overflow_) return Fail("an event of a Task Environment plane lies outside int64 ns");
    TakeSessionBounds(task_env_, &span_, &any_);
    return true;
  }

  // ---- The small planes, through the model.

  // A space of the planes' ids and names: where the record plane's id and
  // the counters plane come from, as on the model.
  bool CheckPlanes() {
    for (const PlaneInfo& plane : planes_) {
      if (plane.name == kCorrectionPlane) return Fail("a clock-correction record plane is there already");
      xspace::XPlane* stub = stubs_.add_planes();
      stub->set_id(plane.id);
      stub->set_name(std::string(plane.name));
    }
    for (size_t i = 0; i < planes_.size(); ++i) {
      if (!planes_[i].task_env && !CheckOtherFields(planes_[i])) return false;
    }
    if (options_.counters_line) {
      const xspace::XPlane* cpu = FindCountersPlane(&stubs_);
      for (int i = 0; cpu != nullptr && i < stubs_.planes_size(); ++i) {
        if (&stubs_.planes(i) == cpu) counters_.plane = static_cast<size_t>(i);
      }
    }
    return true;
  }

  // The planes made from the host's span: the Task Environment's session
  // and the `_counters_` line.
  bool PrepareSpanPlanes() {
    if (!task_env_.planes().empty()) {
      // On the plane as parsed each time: setting the session twice is not
      // the same as once on every input (a plane with odd stat metadata).
      xspace::XSpace session = task_env_;
      SetSessionOnPlan(map_, *stats_, result_, &session);
      SerializeDeterministic(session.planes(0), &task_env_bytes_);
      task_env_plane_ = session.planes(0);
    }
    return counters_.plane == SIZE_MAX || PrepareCountersPlane();
  }

  // A plane's fields other than its lines: parsed alone, so that whatever
  // they hold parses as protobuf parses it (names, metadata, stats).
  bool CheckOtherFields(const PlaneInfo& plane) {
    if (!OtherFields(plane, &skeleton_bytes_) ||
        !scratch_plane_.ParseFromArray(skeleton_bytes_.data(), static_cast<int>(skeleton_bytes_.size()))) {
      return Fail("a plane's metadata or stats do not parse");
    }
    return true;
  }

  bool OtherFields(const PlaneInfo& plane, std::string* bytes) {
    bytes->clear();
    for (Ptr p = plane.begin; p < plane.end;) {
      const Ptr field = p;
      uint32_t tag = 0;
      if (!ReadTag(p, plane.end, &tag) || !SkipField(p, plane.end, tag & 7)) return false;
      if (tag != kPlaneLine) bytes->append(View(field, p));
    }
    return true;
  }

  // The counters plane without its lines' events (their ids and names
  // only: what GetOrCreateLine reads), edited by AddCountersLine, split
  // around where its own lines go.
  bool PrepareCountersPlane() {
    const PlaneInfo& plane = planes_[counters_.plane];
    xspace::XPlane cpu;
    if (!OtherFields(plane, &skeleton_bytes_) ||
        !cpu.ParseFromArray(skeleton_bytes_.data(), static_cast<int>(skeleton_bytes_.size()))) {
      return Fail("a plane's metadata or stats do not parse");
    }
    for (size_t i = plane.first_line; i < plane.first_line + plane.lines; ++i) {
      if (lines_[i].name == kCountersLine) return Fail("the CPU plane has a _counters_ line already");
      xspace::XLine* stub = cpu.add_lines();
      stub->set_id(lines_[i].id);
      stub->set_name(std::string(lines_[i].name));
    }
    AddCountersLine(map_, *stats_, result_, &cpu);
    if (cpu.lines_size() != static_cast<int>(plane.lines) + 1) return Fail("internal: no counters line was added");
    SerializeDeterministic(cpu.lines(cpu.lines_size() - 1), &counters_.new_line);
    counters_line_ = cpu.lines(cpu.lines_size() - 1);
    cpu.clear_lines();
    std::string all;
    SerializeDeterministic(cpu, &all);
    // Serialised in field order: id, name, then (lines), metadata, stats.
    Ptr p = reinterpret_cast<Ptr>(all.data());
    const Ptr end = p + all.size();
    Ptr split = end;
    for (Ptr q = p; q < end;) {
      const Ptr field = q;
      uint32_t tag = 0;
      if (!ReadTag(q, end, &tag) || !SkipField(q, end, tag & 7)) return Fail("internal: serialised plane unreadable");
      if ((tag >> 3) > 3) {
        split = field;
        break;
      }
    }
    counters_.head.assign(View(p, split));
    counters_.tail.assign(View(split, end));
    return true;
  }

  // ---- Second pass: the output.

  bool EmitSpace() {
    size_t plane_index = 0;
    for (Ptr p = begin_; p < end_;) {
      const Ptr field = p;
      uint32_t tag = 0;
      if (!ReadTag(p, end_, &tag) || !SkipField(p, end_, tag & 7)) return Fail("malformed wire data");
      if (tag != kSpacePlane) {
        Append(field, p);
        continue;
      }
      if (!EmitPlane(plane_index)) return false;
      if (++plane_index == planes_.size()) record_at_ = out_->size();  // the record plane goes after the last
    }
    return true;
  }

  void Append(Ptr begin, Ptr end) {
    char* w = out_->Reserve(static_cast<size_t>(end - begin));
    out_->Resize(static_cast<size_t>(PutBytes(w, begin, end) - out_->data()));
  }

  void AppendField(uint32_t tag, std::string_view bytes) {
    char* w = out_->Reserve(bytes.size() + 16);
    w = PutVarint(w, tag);
    w = PutVarint(w, bytes.size());
    std::memcpy(w, bytes.data(), bytes.size());
    out_->Resize(static_cast<size_t>(w + bytes.size() - out_->data()));
  }

  // A length-delimited field whose length is known at its end: room for
  // the width the input had, moved only when the width changes.
  size_t OpenField(uint32_t tag, size_t old_length, int* width) {
    *width = VarintSize(old_length);
    char* w = out_->Reserve(static_cast<size_t>(*width) + 8);
    w = PutVarint(w, tag);
    const size_t length_at = static_cast<size_t>(w - out_->data());
    out_->Resize(length_at + static_cast<size_t>(*width));
    return length_at;
  }

  // Returns how far the content moved (the length's width less the one
  // opened): whatever was placed inside the field moved with it.
  ptrdiff_t CloseField(size_t length_at, int width) {
    const size_t content = length_at + static_cast<size_t>(width);
    const size_t length = out_->size() - content;
    const int needed = VarintSize(length);
    if (needed != width) {
      out_->Reserve(static_cast<size_t>(std::max(needed - width, 0)));
      char* base = out_->data();
      std::memmove(base + length_at + needed, base + content, length);
      out_->Resize(length_at + static_cast<size_t>(needed) + length);
    }
    PutVarint(out_->data() + length_at, length);
    return needed - width;
  }

  bool EmitPlane(size_t index) {
    const PlaneInfo& plane = planes_[index];
    if (plane.task_env) {  // not re-timed; the first one carries the session, set on the plan
      if (index == FirstTaskEnv()) {
        AppendField(kSpacePlane, task_env_bytes_);
        task_env_at_ = out_->size() - task_env_bytes_.size();
        task_env_slot_ = meant_.ReservePlane();
      } else {
        AppendField(kSpacePlane, View(plane.begin, plane.end));
        meant_.AddPlane(later_task_envs_.at(later_task_env_index_++));
      }
      return true;
    }
    meant_.BeginPlane(plane.id);
    const bool counters = index == counters_.plane;
    counted_ = CountsInAlignmentStats(plane.name);
    int width = 0;
    const size_t length_at = OpenField(kSpacePlane, static_cast<size_t>(plane.end - plane.begin), &width);
    if (counters) Append(reinterpret_cast<Ptr>(counters_.head.data()),
                         reinterpret_cast<Ptr>(counters_.head.data() + counters_.head.size()));
    size_t line = plane.first_line;
    for (Ptr p = plane.begin; p < plane.end;) {
      const Ptr field = p;
      uint32_t tag = 0;
      if (!ReadTag(p, plane.end, &tag)) return Fail("malformed wire data");
      if (tag == kPlaneLine) {
        size_t n = 0;
        if (!ReadLen(p, plane.end, &n) || !EmitLine(lines_[line++], p, p + n)) return false;
        p += n;
        continue;
      }
      if (!SkipField(p, plane.end, tag & 7)) return Fail("malformed wire data");
      if (!counters) Append(field, p);  // the counters plane's are in its head and tail
    }
    if (counters) {
      AppendField(kPlaneLine, counters_.new_line);
      counters_line_at_ = out_->size() - counters_.new_line.size();
      counters_slot_ = meant_.ReserveLine();
      Append(reinterpret_cast<Ptr>(counters_.tail.data()),
             reinterpret_cast<Ptr>(counters_.tail.data() + counters_.tail.size()));
    }
    const ptrdiff_t moved = CloseField(length_at, width);
    if (counters) counters_line_at_ += moved;  // patched there on a predicted plan (TakeFoundSpan)
    return true;
  }

  size_t FirstTaskEnv() const {
    for (size_t i = 0; i < planes_.size(); ++i) {
      if (planes_[i].task_env) return i;
    }
    return SIZE_MAX;
  }

  void PutTimestamp(int64_t ts) {
    char* w = out_->Reserve(12);
    *w++ = static_cast<char>(kLineTimestamp);
    out_->Resize(static_cast<size_t>(PutVarint(w, static_cast<uint64_t>(ts)) - out_->data()));
  }

  // One line: its start and duration mapped as the model maps them, then
  // every event in it.
  bool EmitLine(const LineInfo& info, Ptr begin, Ptr end) {
    int64_t new_ts = 0;
    TraceInstant start, mapped_start;
    std::optional<int64_t> empty_duration;  // an empty line's, as the model re-bases it
    if (!info.nonempty) {
      const auto times = EmptyLineTimes(map_, base_ns_, info.timestamp_ns, info.duration_ps, result_.origin_ns);
      if (!times) return Fail("an empty line's start cannot be re-based on the common origin");
      new_ts = times->timestamp_ns;
      empty_duration = times->duration_ps;
    } else {
      if (__builtin_add_overflow(base_ns_, info.timestamp_ns, &start.ns)) return Fail("a line's start overflows");
      const auto mapped = cursor_.Map(start);
      if (!mapped || __builtin_sub_overflow(mapped->cluster.ns, result_.origin_ns, &new_ts)) {
        return Fail("a line's start cannot be mapped");
      }
      mapped_start = mapped->cluster;
      line_start_ = start;
      new_base_ = TraceInstant{mapped->cluster.ns, 0};  // origin + new_ts
    }
    meant_.BeginLine(info.id, new_ts, 0);
    int width = 0;
    const size_t length_at = OpenField(kPlaneLine, static_cast<size_t>(end - begin), &width);
    bool timestamp_pending = !info.has_timestamp && new_ts != 0;
    bool after_event = false, has_duration = false;
    for (Ptr p = begin; p < end;) {
      const Ptr field = p;
      uint32_t tag = 0;
      if (!ReadTag(p, end, &tag)) return Fail("malformed wire data");
      if (timestamp_pending && (tag >> 3) > 3) {
        PutTimestamp(new_ts);
        timestamp_pending = false;
      }
      if (tag == kLineEvent) {
        size_t n = 0;
        if (!ReadLen(p, end, &n) || !EmitEvent(field, p, p + n)) return Fail("malformed event");
        p += n;
        after_event = true;
        continue;
      }
      if (after_event && (tag == kLineTimestamp || tag == kLineId || tag == kLineName)) {
        return Fail("a line's id, name or timestamp after its events");
      }
      if (tag == kLineDuration) {
        uint64_t duration = 0;
        if (has_duration || !ReadVarint(p, end, &duration)) return Fail("a line's duration twice, or malformed");
        has_duration = true;
        if (empty_duration) {
          PutDuration(*empty_duration);
        } else if (duration != 0 && !PutLineDuration(start, mapped_start, static_cast<int64_t>(duration))) {
          return false;
        }
        continue;
      }
      if (tag == kLineDisplayName) {
        std::string_view ignored;
        if (!ReadString(p, end, &ignored)) return Fail("a line name is not UTF-8 or malformed");
        Append(field, p);
        continue;
      }
      if (!SkipField(p, end, tag & 7)) return Fail("malformed wire data");
      if (tag == kLineTimestamp) {
        if (new_ts != 0) PutTimestamp(new_ts);
      } else {
        Append(field, p);
      }
    }
    if (timestamp_pending) PutTimestamp(new_ts);
    CloseField(length_at, width);
    return true;
  }

  // A line's duration mapped as the model maps it: its end's instant, less
  // its mapped start; written unless 0, as proto3 writes it.
  bool PutLineDuration(const TraceInstant& start, const TraceInstant& mapped_start, int64_t duration_ps) {
    const auto line_end = AddPs(start, duration_ps);
    const auto mapped_end = line_end ? cursor_.Map(*line_end) : std::nullopt;
    const auto d = mapped_end ? DiffPs(mapped_end->cluster, mapped_start) : std::nullopt;
    if (!d) return Fail("a line's duration cannot be mapped");
    PutDuration(*d);
    return true;
  }

  // A line's new duration: written unless 0, as proto3 writes it.
  void PutDuration(int64_t duration_ps) {
    meant_.SetLineDuration(duration_ps);
    if (duration_ps == 0) return;
    char* w = out_->Reserve(12);
    *w++ = static_cast<char>(kLineDuration);
    out_->Resize(static_cast<size_t>(PutVarint(w, static_cast<uint64_t>(duration_ps)) - out_->data()));
  }

  // One replaced or inserted field of an event: [begin, end) of the input
  // gives way to `bytes` (begin == end: an insertion).
  struct Edit {
    Ptr begin;
    Ptr end;
    char bytes[12];
    int size;
  };

  static void MakeEdit(Ptr begin, Ptr end, uint32_t tag, int64_t value, bool write, Edit* e) {
    e->begin = begin;
    e->end = end;
    e->size = 0;
    if (!write) return;
    e->bytes[0] = static_cast<char>(tag);
    e->size = static_cast<int>(PutVarint(e->bytes + 1, static_cast<uint64_t>(value)) - e->bytes);
  }

  // Where an event's time fields are, and what they hold.
  struct EventFields {
    uint64_t offset = 0;
    uint64_t duration = 0;
    Ptr offset_at = nullptr;  // the field's bytes, when present
    Ptr offset_end = nullptr;
    Ptr duration_at = nullptr;
    Ptr duration_end = nullptr;
    Ptr after2 = nullptr;  // the first field numbered above 2 (where an offset goes in)
    Ptr after3 = nullptr;  // ... above 3 (a duration)
    bool occurrences = false;
    uint64_t occurrences_value = 0;
  };

  // The usual event, read straight: metadata_id, offset_ps and duration_ps,
  // each with its one-byte tag, in field order, then stats alone, each
  // the usual one (UsualStat). What it fills is what DecodeEvent fills for
  // the same bytes. False for anything else (*f then partly filled), which
  // DecodeEvent reads field by field and decides on.
  static bool DecodeUsualEvent(Ptr begin, Ptr end, EventFields* f) {
    Ptr p = begin;
    uint64_t ignored = 0;
    if (p == end || *p != kEventMetadata || !ReadVarint(++p, end, &ignored)) return false;
    if (p == end || *p != kEventOffset) return false;
    f->offset_at = p;
    if (!ReadVarint(++p, end, &f->offset)) return false;
    f->offset_end = p;
    if (p == end || *p != kEventDuration) return false;
    f->duration_at = f->after2 = p;
    if (!ReadVarint(++p, end, &f->duration)) return false;
    f->duration_end = f->after3 = p;  // the first stat, or the end
    while (p < end) {
      size_t n = 0;
      if (*p != kEventStat || !ReadLen(++p, end, &n) || !UsualStat(p, p + n)) return false;
      p += n;
    }
    return true;
  }

  bool DecodeEvent(Ptr begin, Ptr end, EventFields* f) {
    uint64_t ignored = 0;
    for (Ptr p = begin; p < end;) {
      const Ptr at = p;
      uint32_t tag = 0;
      if (!ReadTag(p, end, &tag)) return Fail(kMalformedEvent);
      if (f->after3 == nullptr && (tag >> 3) > 2) {
        if (f->after2 == nullptr) f->after2 = at;
        if ((tag >> 3) > 3) f->after3 = at;
      }
      switch (tag) {
        case kEventMetadata:
          if (!ReadVarint(p, end, &ignored)) return Fail(kMalformedEvent);
          break;
        case kEventOffset:
          if (f->offset_at != nullptr || f->occurrences) return Fail(kMergedEvent);
          if (!ReadVarint(p, end, &f->offset)) return Fail(kMalformedEvent);
          f->offset_at = at, f->offset_end = p;
          break;
        case kEventDuration:
          if (f->duration_at != nullptr) return Fail(kMergedEvent);
          if (!ReadVarint(p, end, &f->duration)) return Fail(kMalformedEvent);
          f->duration_at = at, f->duration_end = p;
          break;
        case kEventStat: {
          size_t n = 0;
          if (!ReadLen(p, end, &n)) return Fail(kMalformedEvent);
          if (!ValidStat(p, p + n)) return Fail("an event's stat is malformed or its string is not UTF-8");
          p += n;
          break;
        }
        case kEventOccurrences:
          if (f->occurrences || f->offset_at != nullptr) return Fail(kMergedEvent);
          if (!ReadVarint(p, end, &f->occurrences_value)) return Fail(kMalformedEvent);
          f->occurrences = true;
          break;
        default:
          if (!SkipField(p, end, tag & 7)) return Fail(kMalformedEvent);
      }
    }
    if (f->after2 == nullptr) f->after2 = end;
    if (f->after3 == nullptr) f->after3 = end;
    return true;
  }

  // One event field ([field, end), its content from `begin`): a timed
  // event's start and end mapped as the model maps them.
  bool EmitEvent(Ptr field, Ptr begin, Ptr end) {
    EventFields f;
    if (!DecodeUsualEvent(begin, end, &f)) {
      f = EventFields{};
      if (!DecodeEvent(begin, end, &f)) return false;
    }
    if (f.occurrences) {  // not timed: unchanged
      Append(field, end);
      meant_.AddCountedEvent(static_cast<int64_t>(f.occurrences_value), static_cast<int64_t>(f.duration));
      return true;
    }
    const auto start = AddPs(line_start_, static_cast<int64_t>(f.offset));
    const auto stop = start ? AddPs(*start, static_cast<int64_t>(f.duration)) : std::nullopt;
    if (!stop) return Fail("an event lies outside int64 ns");
    TakeInstant(*start, &span_, &any_);
    TakeInstant(*stop, &span_, &any_);
    const auto ms = cursor_.Map(*start);
    const auto me = cursor_.Cluster(*stop);  // its bound only matters with annotate_events
    if (!ms || !me) return Fail("an event cannot be mapped");
    const auto new_offset = DiffPs(ms->cluster, new_base_);
    const auto new_duration = DiffPs(*me, ms->cluster);
    if (!new_offset || !new_duration) return Fail("an event overflows int64 ps on the common origin");
    if (counted_) CountMappedEvent(*ms, stats_, &uncertainty_sum_);
    WriteEvent(field, begin, end, f, *new_offset, *new_duration);
    meant_.AddTimedEvent(*new_offset, *new_duration);
    return true;
  }

  // The event's bytes with its offset (always: a oneof member is written
  // even when 0) and duration (unless 0, as proto3 writes it) replaced, or
  // put where protobuf's field order has them when they were absent.
  // The usual case: both fields there, their tags one byte, the new values
  // as wide as the old ones, and the length written as protobuf writes it:
  // the field ([field, end)) copied at once and the two values overwritten
  // in place, the same bytes as the edits below would write.
  void WriteEvent(Ptr field, Ptr begin, Ptr end, const EventFields& f, int64_t new_offset, int64_t new_duration) {
    const int offset_width = static_cast<int>(f.offset_end - f.offset_at) - 1;
    const int duration_width = static_cast<int>(f.duration_end - f.duration_at) - 1;
    if (f.offset_at != nullptr && f.duration_at != nullptr && new_duration != 0 && *f.offset_at == kEventOffset &&
        *f.duration_at == kEventDuration && offset_width <= 8 && duration_width <= 8 &&
        VarintSize(static_cast<uint64_t>(new_offset)) == offset_width &&
        VarintSize(static_cast<uint64_t>(new_duration)) == duration_width &&
        begin - field == 1 + VarintSize(static_cast<uint64_t>(end - begin))) {
      const size_t size = static_cast<size_t>(end - field);
      char* w = out_->Reserve(size + 8);  // + 8: PatchVarint's store
      std::memcpy(w, field, size);
      PatchVarint(w + (f.offset_at + 1 - field), static_cast<uint64_t>(new_offset), offset_width);
      PatchVarint(w + (f.duration_at + 1 - field), static_cast<uint64_t>(new_duration), duration_width);
      out_->Resize(out_->size() + size);
      return;
    }
    Edit edits[2];
    MakeEdit(f.offset_at ? f.offset_at : f.after2, f.offset_at ? f.offset_end : f.after2, kEventOffset, new_offset,
             true, &edits[0]);
    MakeEdit(f.duration_at ? f.duration_at : f.after3, f.duration_at ? f.duration_end : f.after3, kEventDuration,
             new_duration, new_duration != 0, &edits[1]);
    if (edits[1].begin < edits[0].begin) std::swap(edits[0], edits[1]);
    const size_t length = static_cast<size_t>(end - begin) - static_cast<size_t>(edits[0].end - edits[0].begin) -
                          static_cast<size_t>(edits[1].end - edits[1].begin) +
                          static_cast<size_t>(edits[0].size + edits[1].size);
    char* w = out_->Reserve(length + 16);
    *w++ = static_cast<char>(kLineEvent);
    w = PutVarint(w, length);
    w = PutBytes(w, begin, edits[0].begin);
    std::memcpy(w, edits[0].bytes, static_cast<size_t>(edits[0].size));
    w += edits[0].size;
    w = PutBytes(w, edits[0].end, edits[1].begin);
    std::memcpy(w, edits[1].bytes, static_cast<size_t>(edits[1].size));
    w += edits[1].size;
    w = PutBytes(w, edits[1].end, end);
    out_->Resize(static_cast<size_t>(w - out_->data()));
  }

  // The output walked as protobuf parses it, against what was meant: any
  // difference is a bug here, and the host goes through the model instead.
  bool CheckOutput() {
    if (task_env_slot_ != SIZE_MAX) meant_.FillPlane(task_env_slot_, task_env_plane_);
    if (counters_line_at_ != SIZE_MAX) meant_.FillLine(counters_slot_, counters_line_);
    std::string why;
    if (!CheckXSpaceWire(out_->bytes(), meant_.summary(), &why)) return Fail(std::string(kWireCheckFailed) + ": " + why);
    return true;
  }

  // The span the plan was made on must be this file's (AlignPlannedHost's check).
  bool CheckSpan() {
    if (!any_ || span_.first != stats_->first_host || span_.last != stats_->last_host) {
      return Fail("the span differs from the planned one");
    }
    return true;
  }

  void AddParsedLines(const xspace::XPlane& plane) {
    for (const auto& line : plane.lines()) {
      for (const auto& event : line.events()) {
        if (event.data_case() == xspace::XEvent::kNumOccurrences) continue;
        const auto s = EventStart(base_ns_, line, event);
        const auto e = s ? AddPs(*s, event.duration_ps()) : std::nullopt;
        if (!s || !e) {
          span_overflow_ = true;
          continue;
        }
        TakeInstant(*s, &span_, &any_);
        TakeInstant(*e, &span_, &any_);
      }
    }
  }

  // The record plane, made by the model's code on the final stats, goes
  // after the last plane.
  bool EmitRecordPlaneAtEnd() {
    xspace::XPlane* record = GetOrCreatePlane(&stubs_, kCorrectionPlane);
    RecordCorrectionPlane(map_, *stats_, result_, options_, record);
    SerializeDeterministic(*record, &record_bytes_);
    meant_.AddPlane(*record);
    const size_t tail = out_->size() - record_at_;
    const size_t header = 1 + static_cast<size_t>(VarintSize(record_bytes_.size()));
    const size_t insert = header + record_bytes_.size();
    out_->Reserve(insert);
    char* base = out_->data();
    std::memmove(base + record_at_ + insert, base + record_at_, tail);
    char* w = PutVarint(base + record_at_, kSpacePlane);
    w = PutVarint(w, record_bytes_.size());
    std::memcpy(w, record_bytes_.data(), record_bytes_.size());
    out_->Resize(out_->size() + insert);
    return true;
  }

  Ptr begin_;
  Ptr end_;
  const HostClockMap& map_;
  MapCursor cursor_;
  const AlignOptions& options_;
  const AlignResult& result_;
  const bool predicted_;
  HostAlignment* stats_;
  WireOutput* out_;
  std::string reason_;
  bool mispredicted_ = false;

  std::vector<PlaneInfo> planes_;
  std::vector<LineInfo> lines_;
  std::string_view hostname0_;
  int64_t base_ns_ = 0;
  xspace::XSpace task_env_;  // the first Task Environment plane, as parsed
  xspace::XSpace stubs_;     // every plane's id and name
  xspace::XPlane scratch_plane_;
  std::string skeleton_bytes_;
  std::string task_env_bytes_;
  std::string record_bytes_;
  CountersPlane counters_;
  size_t record_at_ = 0;
  size_t task_env_at_ = SIZE_MAX;  // where the span planes' bytes went, to patch
  size_t counters_line_at_ = SIZE_MAX;

  // What the output should say once parsed (xspace_wire_check.h), and the
  // final messages of the planes and line that went in whole.
  WireSummaryBuilder meant_;
  std::vector<xspace::XPlane> later_task_envs_;  // the Task Environment planes after the first, as parsed
  size_t later_task_env_index_ = 0;
  xspace::XPlane task_env_plane_;
  xspace::XLine counters_line_;
  size_t task_env_slot_ = SIZE_MAX;
  WireSummaryBuilder::LineSlot counters_slot_;

  TraceInstant line_start_;
  TraceInstant new_base_;
  double uncertainty_sum_ = 0;
  bool counted_ = true;  // the current plane's events count in stats_ (CountsInAlignmentStats)
  HostSpanInstants span_;
  bool any_ = false;
  bool span_overflow_ = false;
};

}  // namespace

constexpr std::align_val_t kOutputAlign{4096};

void WireOutput::AlignedFree::operator()(char* p) const { ::operator delete[](p, kOutputAlign); }

void WireOutput::Grow(size_t needed) {
  const size_t capacity = std::max(needed, capacity_ + capacity_ / 2 + 4096);
  std::unique_ptr<char[], AlignedFree> data(static_cast<char*>(::operator new[](capacity, kOutputAlign)));
  if (size_ > 0) std::memcpy(data.get(), data_.get(), size_);
  data_ = std::move(data);
  capacity_ = capacity;
}

namespace {

WireAlignOutcome AlignHost(std::string_view bytes, std::string_view file_name, const std::string& file_host,
                           size_t index, const HostClockMap& map, const AlignOptions& options, bool predicted,
                           AlignResult* result, WireOutput* out, std::vector<std::string>* notes,
                           std::string* why) {
  if (options.annotate_events) {
    *why = "--annotate-events adds a stat to every event (left to the model)";
    return WireAlignOutcome::kDeclined;
  }
  if (file_host.empty()) {
    *why = "no file name to name the host";
    return WireAlignOutcome::kDeclined;
  }
  if (index >= result->hosts.size() || bytes.size() > kMaxMessageBytes) {
    *why = index >= result->hosts.size() ? "not in the plan" : "over protobuf's 2 GiB limit";
    return WireAlignOutcome::kDeclined;
  }
  HostAlignment stats = result->hosts[index];
  WireAligner aligner(bytes, map, options, *result, predicted, &stats, out);
  std::string hostname0;
  if (!aligner.Run(&hostname0)) {
    *why = aligner.reason().empty() ? "declined" : aligner.reason();
    out->Clear();
    return aligner.mispredicted() ? WireAlignOutcome::kMispredicted : WireAlignOutcome::kDeclined;
  }
  result->hosts[index] = stats;
  if (std::string w = HostnameWarning(file_name, file_host, hostname0); !w.empty()) notes->push_back(std::move(w));
  return WireAlignOutcome::kAligned;
}

}  // namespace

bool WireAlignHost(std::string_view bytes, std::string_view file_name, const std::string& file_host,
                   size_t index, const HostClockMap& map, const AlignOptions& options, AlignResult* result,
                   WireOutput* out, std::vector<std::string>* notes, std::string* why) {
  return AlignHost(bytes, file_name, file_host, index, map, options, /*predicted=*/false, result, out, notes,
                   why) == WireAlignOutcome::kAligned;
}

WireAlignOutcome WireAlignPredictedHost(std::string_view bytes, std::string_view file_name,
                                        const std::string& file_host, size_t index, const HostClockMap& map,
                                        const AlignOptions& options, AlignResult* result, WireOutput* out,
                                        std::vector<std::string>* notes, std::string* why) {
  return AlignHost(bytes, file_name, file_host, index, map, options, /*predicted=*/true, result, out, notes, why);
}

}  // namespace chronolink::trace
