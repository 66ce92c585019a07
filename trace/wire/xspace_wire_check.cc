#include "trace/wire/xspace_wire_check.h"

#include <google/protobuf/stubs/common.h>
#include <google/protobuf/wire_format_lite.h>

#include <bit>
#include <limits>

namespace chronolink::trace {
namespace {

using WireFormat = google::protobuf::internal::WireFormatLite;

// One word into the digest: xor, then a multiply and a rotation, so that
// every bit of every word moves many bits of the result. Not a defence
// against a forger (there is none here), a catch for a value written wrong.
inline uint64_t Mix(uint64_t digest, uint64_t word) {
  return std::rotl((digest ^ word) * 0x9e3779b97f4a7c15ULL, 29);
}

enum class EventData : uint64_t { kOffset = 1, kOccurrences = 2, kNone = 3 };

// One event into a line's digest: which oneof member, its value, the duration.
inline uint64_t DigestEvent(uint64_t digest, EventData data, int64_t value, int64_t duration_ps) {
  digest = Mix(digest, static_cast<uint64_t>(data));
  digest = Mix(digest, static_cast<uint64_t>(value));
  return Mix(digest, static_cast<uint64_t>(duration_ps));
}

EventData DataOf(const xspace::XEvent& event) {
  switch (event.data_case()) {
    case xspace::XEvent::kOffsetPs: return EventData::kOffset;
    case xspace::XEvent::kNumOccurrences: return EventData::kOccurrences;
    default: return EventData::kNone;
  }
}

WireLineSummary SummaryOf(const xspace::XLine& line) {
  WireLineSummary s{line.id(), line.timestamp_ns(), line.duration_ps(), 0, 0};
  for (const auto& event : line.events()) {
    const int64_t value = event.data_case() == xspace::XEvent::kNumOccurrences ? event.num_occurrences()
                                                                                : event.offset_ps();
    s.event_digest = DigestEvent(s.event_digest, DataOf(event), value, event.duration_ps());
    ++s.events;
  }
  return s;
}

WirePlaneSummary SummaryOf(const xspace::XPlane& plane) {
  WirePlaneSummary s{plane.id(), {}};
  for (const auto& line : plane.lines()) s.lines.push_back(SummaryOf(line));
  return s;
}

// ---- The bytes, read as protobuf's parser reads them (parse_context.h):
// tags and lengths of at most 5 bytes, values of at most 10 (the bits past
// 64 dropped), every read within the message it is in. Plain pointer
// code: protobuf's CodedInputStream made the walk cost four times the
// rewrite it checks; tests hold it to protobuf's own parse.

class WireCursor {
 public:
  WireCursor(const uint8_t* begin, const uint8_t* end) : begin_(begin), p_(begin), end_(end) {}

  size_t Left() const { return static_cast<size_t>(end_ - p_); }
  size_t Position() const { return static_cast<size_t>(p_ - begin_); }
  const uint8_t* Here() const { return p_; }

  // A varint of at most `max_bytes`, within the current message.
  bool Varint(uint64_t* out, int max_bytes = 10) {
    uint64_t v = 0;
    for (int i = 0; i < max_bytes && p_ < end_; ++i) {
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);  // a tenth byte's bits past 64 drop, as protobuf's do
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;
  }
  bool Skip(size_t n) {
    if (n > Left()) return false;
    p_ += n;
    return true;
  }
  // Enters a nested message of `length` bytes (within what is left); Leave
  // restores the outer end.
  const uint8_t* Enter(size_t length) {
    const uint8_t* outer = end_;
    end_ = p_ + length;
    return outer;
  }
  void Leave(const uint8_t* outer) { end_ = outer; }

 private:
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
};

// ---- The walk: each message of the schema, as protobuf's parser reads it.

class XSpaceWalk {
 public:
  explicit XSpaceWalk(std::string_view bytes)
      : in_(reinterpret_cast<const uint8_t*>(bytes.data()), reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size()) {}

  bool Space(WireSpaceSummary* out) {
    while (NextField()) {
      switch (Field()) {
        case 1:
          if (Kind() != WireFormat::WIRETYPE_LENGTH_DELIMITED) break;
          if (!Nested([&] { return Plane(&out->planes.emplace_back()); })) return false;
          continue;
        case 2: case 3: case 4:
          if (Kind() != WireFormat::WIRETYPE_LENGTH_DELIMITED) break;
          if (!Utf8String()) return false;
          continue;
      }
      if (!Unknown()) return false;
    }
    return End();
  }

  const std::string& why() const { return why_; }

 private:
  bool Plane(WirePlaneSummary* out) {
    while (NextField()) {
      if (Kind() == WireFormat::WIRETYPE_VARINT && Field() == 1) {
        if (!Int64(&out->id)) return false;
        continue;
      }
      if (Kind() == WireFormat::WIRETYPE_LENGTH_DELIMITED) {
        bool ok = true;
        switch (Field()) {
          case 2: ok = Utf8String(); break;
          case 3: ok = Nested([&] { return Line(&out->lines.emplace_back()); }); break;
          case 4: ok = Nested([&] { return MapEntry(&XSpaceWalk::EventMetadata); }); break;
          case 5: ok = Nested([&] { return MapEntry(&XSpaceWalk::StatMetadata); }); break;
          case 6: ok = StatField(); break;
          default: ok = Unknown();
        }
        if (!ok) return false;
        continue;
      }
      if (!Unknown()) return false;
    }
    return End();
  }

  bool Line(WireLineSummary* out) {
    while (NextField()) {
      if (Kind() == WireFormat::WIRETYPE_VARINT) {
        int64_t* target = Field() == 1 ? &out->id : Field() == 3 ? &out->timestamp_ns
                          : Field() == 9 ? &out->duration_ps : nullptr;
        int64_t ignored = 0;
        if (!Int64(target != nullptr ? target : &ignored)) return false;  // 10 display_id, or unknown
        continue;
      }
      if (Kind() == WireFormat::WIRETYPE_LENGTH_DELIMITED) {
        bool ok = true;
        switch (Field()) {
          case 2: case 11: ok = Utf8String(); break;
          case 4: ok = Nested([&] { return Event(out); }); break;
          default: ok = Unknown();
        }
        if (!ok) return false;
        continue;
      }
      if (!Unknown()) return false;
    }
    return End();
  }

  bool Event(WireLineSummary* line) {
    EventData data = EventData::kNone;
    int64_t value = 0, duration = 0, ignored = 0;
    while (NextField()) {
      if (Kind() == WireFormat::WIRETYPE_VARINT) {
        const uint32_t field = Field();
        int64_t* target = field == 2 || field == 5 ? &value : field == 3 ? &duration : &ignored;
        if (!Int64(target)) return false;
        if (field == 2) data = EventData::kOffset;  // a oneof: the last member read wins
        if (field == 5) data = EventData::kOccurrences;
        continue;
      }
      if (Kind() == WireFormat::WIRETYPE_LENGTH_DELIMITED && Field() == 4) {
        if (!StatField()) return false;
        continue;
      }
      if (!Unknown()) return false;
    }
    line->event_digest = DigestEvent(line->event_digest, data, value, duration);
    ++line->events;
    return End();
  }

  // A stat field: the usual shapes (metadata_id of one byte, then one
  // double, one varint value or one short ASCII string that ends the stat)
  // decided with a few loads; anything else walked field by field.
  bool StatField() {
    size_t length = 0;
    if (!Length(&length)) return false;
    const uint8_t* p = in_.Here();
    if (length >= 4 && p[0] == 0x08 && p[1] < 0x80) {
      const uint8_t tag = p[2];
      if (tag == (2 << 3 | WireFormat::WIRETYPE_FIXED64) && length == 11) return in_.Skip(length);
      const bool varint_value = tag == (3 << 3) || tag == (4 << 3) || tag == (7 << 3);
      if (varint_value && length <= 13 && p[length - 1] < 0x80) {
        size_t i = 3;
        while (i < length - 1 && p[i] >= 0x80) ++i;
        if (i == length - 1) return in_.Skip(length);  // one varint, ending the stat
      }
      if (tag == (5 << 3 | WireFormat::WIRETYPE_LENGTH_DELIMITED) && p[3] < 0x80 && p[3] + 4u == length) {
        uint8_t high = 0;  // an ASCII str_value (UTF-8 by construction) ending the stat
        for (size_t i = 4; i < length; ++i) high |= p[i];
        if (high < 0x80) return in_.Skip(length);
      }
    }
    const uint8_t* outer = in_.Enter(length);
    if (!Stat()) return false;
    in_.Leave(outer);
    return true;
  }

  bool Stat() {
    while (NextField()) {
      uint64_t ignored = 0;
      switch (Kind()) {  // the usual kinds first, without a call
        case WireFormat::WIRETYPE_VARINT:
          if (!in_.Varint(&ignored)) return Fail("a malformed varint");
          continue;
        case WireFormat::WIRETYPE_FIXED64:
          if (!in_.Skip(8)) return Fail("a fixed64 past the end");
          continue;
        case WireFormat::WIRETYPE_LENGTH_DELIMITED:
          if (Field() == 5) {
            if (!Utf8String()) return false;
            continue;
          }
          break;
        default: break;
      }
      // The rest (bytes and compressed bytes, unknown fields) read as any
      // field of their wire type does.
      if (!Unknown()) return false;
    }
    return End();
  }

  bool EventMetadata() {
    while (NextField()) {
      if (Kind() == WireFormat::WIRETYPE_LENGTH_DELIMITED) {
        bool ok = true;
        switch (Field()) {
          case 2: case 4: ok = Utf8String(); break;
          case 5: ok = StatField(); break;
          case 6: ok = PackedVarints(); break;
          default: ok = Unknown();  // 3: metadata bytes
        }
        if (!ok) return false;
        continue;
      }
      if (!Unknown()) return false;
    }
    return End();
  }

  bool StatMetadata() {
    while (NextField()) {
      if (Kind() == WireFormat::WIRETYPE_LENGTH_DELIMITED && (Field() == 2 || Field() == 3)) {
        if (!Utf8String()) return false;
        continue;
      }
      if (!Unknown()) return false;
    }
    return End();
  }

  // A map<int64, Value> entry: key 1, value 2.
  bool MapEntry(bool (XSpaceWalk::*value)()) {
    while (NextField()) {
      if (Kind() == WireFormat::WIRETYPE_LENGTH_DELIMITED && Field() == 2) {
        if (!Nested([&] { return (this->*value)(); })) return false;
        continue;
      }
      if (!Unknown()) return false;
    }
    return End();
  }

  // ---- Fields.

  // The next tag, or false at the end of the current message (or on a bad
  // tag, which End() then reports). protobuf's parser reads a tag of at
  // most 5 bytes below 2^32 (CodedInputStream::ReadTag would take 10).
  bool NextField() {
    tag_ = 0;
    if (in_.Left() == 0) {
      stop_ = Stop::kEnd;
      return false;
    }
    uint64_t tag = 0;
    if (!ShortVarint(&tag) || tag > std::numeric_limits<uint32_t>::max()) {
      stop_ = Stop::kMalformedTag;
      return false;
    }
    tag_ = static_cast<uint32_t>(tag);
    if (Field() != 0) return true;
    stop_ = Stop::kFieldZero;
    return false;
  }

  // A varint of at most 5 bytes, as protobuf reads tags and lengths.
  bool ShortVarint(uint64_t* out) { return in_.Varint(out, 5); }

  uint32_t Field() const { return WireFormat::GetTagFieldNumber(tag_); }
  WireFormat::WireType Kind() const { return WireFormat::GetTagWireType(tag_); }

  // Whether the field loop stopped at the message's end.
  bool End() {
    if (stop_ == Stop::kEnd) return true;
    return Fail(stop_ == Stop::kMalformedTag ? "a malformed tag" : "field number 0");
  }

  bool Fail(const char* what) {
    if (why_.empty()) why_ = std::string(what) + " at byte " + std::to_string(in_.Position());
    return false;
  }

  bool Int64(int64_t* out) {
    uint64_t v = 0;
    if (!in_.Varint(&v)) return Fail("a malformed varint");
    *out = static_cast<int64_t>(v);
    return true;
  }

  // A length prefix, within the bytes its parent has left.
  bool Length(size_t* length) {
    uint64_t n = 0;
    if (!ShortVarint(&n)) return Fail("a malformed length");
    if (n > in_.Left()) return Fail("a length past the end of its message");
    *length = static_cast<size_t>(n);
    return true;
  }

  template <typename Walk>
  bool Nested(Walk walk) {
    size_t length = 0;
    if (!Length(&length)) return false;
    const uint8_t* outer = in_.Enter(length);
    if (!walk()) return false;
    in_.Leave(outer);
    return true;
  }

  bool Utf8String() {
    size_t length = 0;
    if (!Length(&length)) return false;
    if (!google::protobuf::internal::IsStructurallyValidUTF8(reinterpret_cast<const char*>(in_.Here()),
                                                             static_cast<int>(length))) {
      return Fail("a string that is not UTF-8");
    }
    return in_.Skip(length) || Fail("a string past the end");
  }

  bool PackedVarints() {
    return Nested([&] {
      uint64_t ignored = 0;
      while (in_.Left() > 0) {
        if (!in_.Varint(&ignored)) return Fail("a malformed packed varint");
      }
      return true;
    });
  }

  // Any other field of its wire type. An unknown group (a newer or older
  // producer's) parses when its end tag matches and what is inside is well
  // formed, to protobuf's depth limit.
  bool Unknown(int depth = 0) {
    uint64_t u64 = 0;
    size_t length = 0;
    switch (Kind()) {
      case WireFormat::WIRETYPE_VARINT: return in_.Varint(&u64) || Fail("a malformed varint");
      case WireFormat::WIRETYPE_FIXED64: return in_.Skip(8) || Fail("a fixed64 past the end");
      case WireFormat::WIRETYPE_FIXED32: return in_.Skip(4) || Fail("a fixed32 past the end");
      case WireFormat::WIRETYPE_LENGTH_DELIMITED:
        return Length(&length) && (in_.Skip(length) || Fail("a field past the end"));
      case WireFormat::WIRETYPE_START_GROUP: return Group(Field(), depth + 1);
      case WireFormat::WIRETYPE_END_GROUP: return Fail("a group's end without its start");
      default: return Fail("an invalid wire type");
    }
  }

  bool Group(uint32_t field, int depth) {
    if (depth > kMaxGroupDepth) return Fail("groups nested past protobuf's limit");
    while (NextField()) {
      if (Kind() == WireFormat::WIRETYPE_END_GROUP) {
        return Field() == field || Fail("a group's end that is not its start's");
      }
      if (!Unknown(depth)) return false;
    }
    return Fail(stop_ == Stop::kEnd ? "a group without its end" : "a malformed tag in a group");
  }

  // protobuf's default recursion limit, less the nesting of the schema's own
  // messages around an unknown field.
  static constexpr int kMaxGroupDepth = 90;

  WireCursor in_;
  uint32_t tag_ = 0;
  enum class Stop { kEnd, kMalformedTag, kFieldZero };
  Stop stop_ = Stop::kEnd;  // why the last field loop stopped
  std::string why_;
};

std::string LineName(size_t plane, size_t line, const WireLineSummary& s) {
  return "plane #" + std::to_string(plane) + " line #" + std::to_string(line) + " (id " + std::to_string(s.id) + ")";
}

// The first difference, said.
std::string Difference(const WireSpaceSummary& got, const WireSpaceSummary& want) {
  if (got.planes.size() != want.planes.size()) {
    return std::to_string(got.planes.size()) + " planes, meant " + std::to_string(want.planes.size());
  }
  for (size_t p = 0; p < got.planes.size(); ++p) {
    const WirePlaneSummary& g = got.planes[p];
    const WirePlaneSummary& w = want.planes[p];
    const std::string plane = "plane #" + std::to_string(p);
    if (g.id != w.id) return plane + ": id " + std::to_string(g.id) + ", meant " + std::to_string(w.id);
    if (g.lines.size() != w.lines.size()) {
      return plane + ": " + std::to_string(g.lines.size()) + " lines, meant " + std::to_string(w.lines.size());
    }
    for (size_t l = 0; l < g.lines.size(); ++l) {
      const WireLineSummary& a = g.lines[l];
      const WireLineSummary& b = w.lines[l];
      if (a == b) continue;
      const std::string line = LineName(p, l, b);
      if (a.events != b.events) {
        return line + ": " + std::to_string(a.events) + " events, meant " + std::to_string(b.events);
      }
      if (a.id != b.id || a.timestamp_ns != b.timestamp_ns || a.duration_ps != b.duration_ps) {
        return line + ": id, timestamp or duration differ from what was meant";
      }
      return line + ": its events' times differ from what was meant";
    }
  }
  return "the summaries differ";
}

}  // namespace

void WireSummaryBuilder::BeginPlane(int64_t id) { summary_.planes.push_back({id, {}}); }

void WireSummaryBuilder::BeginLine(int64_t id, int64_t timestamp_ns, int64_t duration_ps) {
  summary_.planes.back().lines.push_back({id, timestamp_ns, duration_ps, 0, 0});
}

void WireSummaryBuilder::AddTimedEvent(int64_t offset_ps, int64_t duration_ps) {
  WireLineSummary& line = summary_.planes.back().lines.back();
  line.event_digest = DigestEvent(line.event_digest, EventData::kOffset, offset_ps, duration_ps);
  ++line.events;
}

void WireSummaryBuilder::AddCountedEvent(int64_t num_occurrences, int64_t duration_ps) {
  WireLineSummary& line = summary_.planes.back().lines.back();
  line.event_digest = DigestEvent(line.event_digest, EventData::kOccurrences, num_occurrences, duration_ps);
  ++line.events;
}

void WireSummaryBuilder::AddLine(const xspace::XLine& line) {
  summary_.planes.back().lines.push_back(SummaryOf(line));
}

void WireSummaryBuilder::AddPlane(const xspace::XPlane& plane) { summary_.planes.push_back(SummaryOf(plane)); }

size_t WireSummaryBuilder::ReservePlane() {
  summary_.planes.emplace_back();
  return summary_.planes.size() - 1;
}

void WireSummaryBuilder::FillPlane(size_t plane, const xspace::XPlane& message) {
  summary_.planes.at(plane) = SummaryOf(message);
}

WireSummaryBuilder::LineSlot WireSummaryBuilder::ReserveLine() {
  summary_.planes.back().lines.emplace_back();
  return {summary_.planes.size() - 1, summary_.planes.back().lines.size() - 1};
}

void WireSummaryBuilder::FillLine(LineSlot slot, const xspace::XLine& message) {
  summary_.planes.at(slot.plane).lines.at(slot.line) = SummaryOf(message);
}

bool SummarizeXSpaceWire(std::string_view bytes, WireSpaceSummary* summary, std::string* why) {
  *summary = {};
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    *why = "over protobuf's 2 GiB limit";
    return false;
  }
  XSpaceWalk walk(bytes);
  if (!walk.Space(summary)) {
    *why = walk.why();
    return false;
  }
  return true;
}

bool CheckXSpaceWire(std::string_view bytes, const WireSpaceSummary& expected, std::string* why) {
  WireSpaceSummary got;
  if (!SummarizeXSpaceWire(bytes, &got, why)) {
    *why = "does not parse: " + *why;
    return false;
  }
  if (got == expected) return true;
  *why = "says other than was meant: " + Difference(got, expected);
  return false;
}

}  // namespace chronolink::trace
