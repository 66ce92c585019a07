#include "trace/wire/xspace_span_scan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "proto/xplane.pb.h"
#include "trace/model/xplane_edit.h"
#include "trace/wire/protobuf_wire_type.h"

namespace chronolink::trace {
namespace {

// XSpace field numbers (REFERENCE §2, proto/xplane.proto).
constexpr uint32_t kSpacePlanesField = 1;
constexpr uint32_t kPlaneNameField = 2, kPlaneLinesField = 3;
constexpr uint32_t kLineTimestampNsField = 3, kLineEventsField = 4;
constexpr uint32_t kEventOffsetPsField = 2, kEventDurationPsField = 3, kEventNumOccurrencesField = 5;

// A forward reader over one message's bytes. Fails (returns false) on what
// protobuf would reject and on groups, which the scan leaves to the parser.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())), end_(p_ + bytes.size()) {}

  bool done() const { return p_ == end_; }
  size_t consumed(std::string_view from) const {
    return static_cast<size_t>(p_ - reinterpret_cast<const uint8_t*>(from.data()));
  }

  bool Varint(uint64_t* out) {
    if (p_ != end_ && *p_ < 0x80) {  // one byte: most tags, lengths and small values
      *out = *p_++;
      return true;
    }
    uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      if (p_ == end_) return false;
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);  // bits past 64 are dropped, as protobuf does
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;  // an eleventh byte: malformed
  }

  bool Tag(uint32_t* field, uint32_t* wire_type) {
    uint64_t tag = 0;
    if (!Varint(&tag) || tag > std::numeric_limits<uint32_t>::max() || (tag >> 3) == 0) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<uint32_t>(tag & 7);
    return true;
  }

  bool Bytes(std::string_view* out) {
    uint64_t len = 0;
    if (!Varint(&len) || len > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) ||
        len > static_cast<uint64_t>(end_ - p_)) {
      return false;
    }
    *out = std::string_view(reinterpret_cast<const char*>(p_), len);
    p_ += len;
    return true;
  }

  bool Skip(uint32_t wire_type) {
    uint64_t ignored = 0;
    std::string_view ignored_bytes;
    switch (wire_type) {
      case kVarint: return Varint(&ignored);
      case kFixed64: return Advance(8);
      case kFixed32: return Advance(4);
      case kLen:
        return Bytes(&ignored_bytes);
      default: return false;  // groups (3, 4) and invalid types
    }
  }

 private:
  bool Advance(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

// One line as the span needs it: its timestamp, whether it has events, and
// the extremes of its timed events' starts and ends relative to it (ps).
struct LineSummary {
  int64_t timestamp_ns = 0;
  bool nonempty = false;
  bool timed = false;
  __int128 min_ps = 0;
  __int128 max_ps = 0;
};

bool ScanEvent(std::string_view bytes, LineSummary* line) {
  WireReader in(bytes);
  bool timed = true;  // data_case NOT_SET counts as timed (offset 0)
  int64_t offset = 0, duration = 0;
  while (!in.done()) {
    uint32_t field = 0, wt = 0;
    if (!in.Tag(&field, &wt)) return false;
    uint64_t v = 0;
    if (wt == kVarint &&
        (field == kEventOffsetPsField || field == kEventDurationPsField || field == kEventNumOccurrencesField)) {
      if (!in.Varint(&v)) return false;
      if (field == kEventOffsetPsField) offset = static_cast<int64_t>(v), timed = true;
      if (field == kEventDurationPsField) duration = static_cast<int64_t>(v);
      if (field == kEventNumOccurrencesField) timed = false;  // the oneof's last member wins
    } else if (!in.Skip(wt)) {
      return false;
    }
  }
  if (!timed) return true;
  const __int128 start = offset, end = static_cast<__int128>(offset) + duration;
  const __int128 lo = start < end ? start : end, hi = start < end ? end : start;
  if (!line->timed || lo < line->min_ps) line->min_ps = lo;
  if (!line->timed || hi > line->max_ps) line->max_ps = hi;
  line->timed = true;
  return true;
}

bool ScanLine(std::string_view bytes, std::vector<LineSummary>* lines) {
  WireReader in(bytes);
  LineSummary line;
  while (!in.done()) {
    uint32_t field = 0, wt = 0;
    if (!in.Tag(&field, &wt)) return false;
    if (field == kLineTimestampNsField && wt == kVarint) {
      uint64_t v = 0;
      if (!in.Varint(&v)) return false;
      line.timestamp_ns = static_cast<int64_t>(v);
    } else if (field == kLineEventsField && wt == kLen) {
      std::string_view event;
      if (!in.Bytes(&event) || !ScanEvent(event, &line)) return false;
      line.nonempty = true;
    } else if (!in.Skip(wt)) {
      return false;
    }
  }
  lines->push_back(line);
  return true;
}

// Scans a plane's lines; *name is its (last) name field.
bool ScanPlane(std::string_view bytes, std::string_view* name, std::vector<LineSummary>* lines) {
  WireReader in(bytes);
  *name = {};
  while (!in.done()) {
    uint32_t field = 0, wt = 0;
    if (!in.Tag(&field, &wt)) return false;
    if (field == kPlaneNameField && wt == kLen) {
      if (!in.Bytes(name)) return false;
    } else if (field == kPlaneLinesField && wt == kLen) {
      std::string_view line;
      if (!in.Bytes(&line) || !ScanLine(line, lines)) return false;
    } else if (!in.Skip(wt)) {
      return false;
    }
  }
  return true;
}

// base + line timestamp (ns) + ps, or nullopt outside int64 ns.
std::optional<TraceInstant> InstantAt(int64_t base_ns, int64_t timestamp_ns, __int128 ps) {
  int64_t line_ns = 0;
  if (__builtin_add_overflow(base_ns, timestamp_ns, &line_ns)) return std::nullopt;
  const __int128 total = static_cast<__int128>(line_ns) * 1000 + ps;
  __int128 ns = total / 1000, rem = total % 1000;
  if (rem < 0) rem += 1000, ns -= 1;
  if (ns < std::numeric_limits<int64_t>::min() || ns > std::numeric_limits<int64_t>::max()) return std::nullopt;
  return TraceInstant{static_cast<int64_t>(ns), static_cast<int32_t>(rem)};
}

std::optional<XSpaceSpan> Fail(std::string* why, const char* reason) {
  *why = reason;
  return std::nullopt;
}

std::optional<XSpaceSpan> SpanOfLines(const std::vector<LineSummary>& lines, const xspace::XSpace& task_env,
                                      std::string* why);

}  // namespace

std::optional<XSpaceSpan> ScanXSpaceSpan(std::string_view bytes, std::string* why) {
  std::vector<LineSummary> lines;
  xspace::XSpace task_env;  // the first `Task Environment` plane, parsed
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wt = 0;
    if (!in.Tag(&field, &wt)) return Fail(why, "malformed wire data or a group");
    if (field != kSpacePlanesField || wt != kLen) {
      if (!in.Skip(wt)) return Fail(why, "malformed wire data or a group");
      continue;
    }
    std::string_view plane, name;
    if (!in.Bytes(&plane) || !ScanPlane(plane, &name, &lines)) {
      return Fail(why, "malformed wire data or a group in a plane");
    }
    if (name == kTaskEnvPlaneName && task_env.planes().empty() &&
        !task_env.add_planes()->ParseFromArray(plane.data(), static_cast<int>(plane.size()))) {
      return Fail(why, "the Task Environment plane does not parse");
    }
  }
  return SpanOfLines(lines, task_env, why);
}

namespace {

std::optional<XSpaceSpan> SpanOfLines(const std::vector<LineSummary>& lines, const xspace::XSpace& task_env,
                                      std::string* why) {
  std::vector<int64_t> nonempty;
  for (const auto& l : lines) {
    if (l.nonempty) nonempty.push_back(l.timestamp_ns);
  }
  XSpaceSpan out;
  size_t abs_i = 0, rel_i = 0;
  if (DecideLineBase(ProfileStartTime(task_env), nonempty, &out.base, &abs_i, &rel_i) != LineBaseVerdict::kOk) {
    return Fail(why, "no single line base");
  }
  if (!out.base.known) return Fail(why, "relative line times with no start");
  bool any = false;
  for (const auto& l : lines) {
    if (!l.timed) continue;
    const auto first = InstantAt(out.base.base_ns, l.timestamp_ns, l.min_ps);
    const auto last = InstantAt(out.base.base_ns, l.timestamp_ns, l.max_ps);
    if (!first || !last) return Fail(why, "an instant outside int64 ns");
    TakeInstant(*first, &out.span, &any);
    TakeInstant(*last, &out.span, &any);
  }
  TakeSessionBounds(task_env, &out.span, &any);
  if (!any) return Fail(why, "no timed event");
  return out;
}

}  // namespace

char* ScanBuffer::Reserve(size_t bytes) {
  if (bytes > capacity_) {
    data_ = std::make_unique_for_overwrite<char[]>(bytes);
    capacity_ = bytes;
  }
  return data_.get();
}

std::optional<std::string_view> ReadXSpaceFileBytes(const std::filesystem::path& path, ScanBuffer* buffer,
                                                    std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = "cannot open";
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
      st.st_size > std::numeric_limits<int32_t>::max()) {
    ::close(fd);
    *why = "not a regular file of a size the reader accepts";
    return std::nullopt;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  char* data = buffer->Reserve(size);
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, data + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got != size) {
    *why = "the file changed while it was read";
    return std::nullopt;
  }
  return std::string_view(data, size);
}

std::optional<XSpaceSpan> ScanXSpaceFileSpan(const std::filesystem::path& path, ScanBuffer* buffer,
                                             std::string* why) {
  const auto bytes = ReadXSpaceFileBytes(path, buffer, why);
  if (!bytes) return std::nullopt;
  return ScanXSpaceSpan(*bytes, why);
}

namespace {

// A file read at chosen offsets through one window (pread): the predicted
// span reads the headers of planes and lines and each line's first event,
// a few kilobytes of a file of any size.
class FileWindow {
 public:
  FileWindow(int fd, uint64_t size) : fd_(fd), size_(size) {}

  // The bytes at [offset, offset + n), n clipped to the file's end; nullopt
  // when they cannot be read (or n is over the window's limit).
  std::optional<std::string_view> At(uint64_t offset, uint64_t n) {
    if (offset > size_) return std::nullopt;
    n = std::min(n, size_ - offset);
    if (offset >= at_ && offset + n <= at_ + len_) return std::string_view(buf_.data() + (offset - at_), n);
    if (n > kMaxWindow) return std::nullopt;
    const uint64_t want = std::min(std::max<uint64_t>(n, kWindow), size_ - offset);
    if (buf_.size() < want) buf_.resize(want);
    size_t got = 0;
    while (got < want) {
      const ssize_t r = ::pread(fd_, buf_.data() + got, want - got, static_cast<off_t>(offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    at_ = offset;
    len_ = got;
    if (got < n) return std::nullopt;  // the file shrank
    return std::string_view(buf_.data(), n);
  }

 private:
  static constexpr uint64_t kWindow = 64 << 10;
  static constexpr uint64_t kMaxWindow = 64 << 20;  // a Task Environment plane, a first event
  int fd_;
  uint64_t size_;
  std::vector<char> buf_;
  uint64_t at_ = 0;
  size_t len_ = 0;
};

// One field's tag and, for a varint, its value; `body` is where the bytes
// after the tag (and length) start, `next` where the field ends.
struct FieldHead {
  uint32_t field = 0;
  uint32_t wire_type = 0;
  uint64_t value = 0;
  uint64_t body = 0;
  uint64_t next = 0;
};

bool ReadFieldHead(FileWindow* file, uint64_t at, uint64_t end, FieldHead* f) {
  const auto head = file->At(at, std::min<uint64_t>(16, end - at));
  if (!head) return false;
  WireReader in(*head);
  if (!in.Tag(&f->field, &f->wire_type)) return false;
  uint64_t length = 0;
  switch (f->wire_type) {
    case kVarint:
      if (!in.Varint(&f->value)) return false;
      break;
    case kFixed64: length = 8; break;
    case kFixed32: length = 4; break;
    case kLen:
      if (!in.Varint(&length) || length > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return false;
      break;
    default: return false;
  }
  f->body = at + in.consumed(*head);
  if (length > end - f->body) return false;
  f->next = f->body + length;
  return true;
}

// A line's timestamp and its first event alone.
bool PredictLine(FileWindow* file, uint64_t at, uint64_t end, std::vector<LineSummary>* lines) {
  LineSummary line;
  while (at < end) {
    FieldHead f;
    if (!ReadFieldHead(file, at, end, &f)) return false;
    if (f.field == kLineTimestampNsField && f.wire_type == kVarint) {
      line.timestamp_ns = static_cast<int64_t>(f.value);
    } else if (f.field == kLineEventsField && f.wire_type == kLen) {
      const auto event = file->At(f.body, f.next - f.body);
      if (!event || !ScanEvent(*event, &line)) return false;
      line.nonempty = true;
      break;  // the line's other events are the rewrite's to check
    }
    at = f.next;
  }
  lines->push_back(line);
  return true;
}

}  // namespace

std::optional<XSpaceSpan> PredictXSpaceFileSpan(const std::filesystem::path& path, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail(why, "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
    ::close(fd);
    return Fail(why, "not a regular file");
  }
  FileWindow file(fd, static_cast<uint64_t>(st.st_size));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::vector<LineSummary> lines;
  xspace::XSpace task_env;
  const char* failure = nullptr;
  for (uint64_t at = 0; at < size && failure == nullptr;) {
    FieldHead plane;
    if (!ReadFieldHead(&file, at, size, &plane)) {
      failure = "malformed wire data or a group";
      break;
    }
    at = plane.next;
    if (plane.field != kSpacePlanesField || plane.wire_type != kLen) continue;
    bool named = false, lined = false;
    for (uint64_t p = plane.body; p < plane.next;) {
      FieldHead f;
      if (!ReadFieldHead(&file, p, plane.next, &f)) {
        failure = "malformed wire data or a group in a plane";
        break;
      }
      p = f.next;
      if (f.field == kPlaneNameField && f.wire_type == kLen) {
        if (named || lined) {  // the last name is the plane's: not known when its lines were read
          failure = "a plane's name after its lines, or twice";
          break;
        }
        named = true;
        const auto name = file.At(f.body, f.next - f.body);
        if (!name) {
          failure = "unreadable";
        } else if (*name == kTaskEnvPlaneName) {  // small: read whole, as the exact scan reads it
          const auto bytes = file.At(plane.body, plane.next - plane.body);
          std::string_view ignored;
          if (!bytes || !ScanPlane(*bytes, &ignored, &lines) ||
              (task_env.planes().empty() &&
               !task_env.add_planes()->ParseFromArray(bytes->data(), static_cast<int>(bytes->size())))) {
            failure = "a Task Environment plane that does not read";
          }
          break;
        }
      } else if (f.field == kPlaneLinesField && f.wire_type == kLen) {
        lined = true;
        if (!PredictLine(&file, f.body, f.next, &lines)) failure = "malformed wire data or a group in a line";
      }
      if (failure != nullptr) break;
    }
  }
  ::close(fd);
  if (failure != nullptr) return Fail(why, failure);
  return SpanOfLines(lines, task_env, why);
}

}  // namespace chronolink::trace
