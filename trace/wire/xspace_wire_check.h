// The check the wire-level rewrite (xspace_wire_align.h) runs on its own
// output before anyone sees it: a walk of the bytes, by protobuf's parsing
// rules (its code is its own, not the rewrite's, and tests hold it to
// protobuf's parser), through every message of the XSpace schema (every
// length prefix within its parent, every tag and wire type, every proto3
// string valid UTF-8, packed fields whole: what protobuf's parser would
// refuse), that also sums up what the bytes say (planes, lines, each line's
// id, timestamp, duration and event count, and a digest of every event's
// time fields as protobuf would read them: the last value of a field wins,
// a oneof's last member wins) and compares that with what the rewrite meant
// to write. A mismatch or anything the walk cannot vouch for is a failure
// with a reason: the host then goes through the model. No model is built; the walk costs about what reading the events
// once costs.
//
// Pure functions and a small value type; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "proto/xplane.pb.h"

namespace chronolink::trace {

// One line as it should read once parsed.
struct WireLineSummary {
  int64_t id = 0;
  int64_t timestamp_ns = 0;
  int64_t duration_ps = 0;
  uint64_t events = 0;
  uint64_t event_digest = 0;  // over every event's time fields, in order (WireSummaryBuilder)
  bool operator==(const WireLineSummary&) const = default;
};

struct WirePlaneSummary {
  int64_t id = 0;
  std::vector<WireLineSummary> lines;
  bool operator==(const WirePlaneSummary&) const = default;
};

// A whole XSpace: its planes in order.
struct WireSpaceSummary {
  std::vector<WirePlaneSummary> planes;
  bool operator==(const WireSpaceSummary&) const = default;
};

// Builds the summary of what a writer means to write, as it writes it:
// planes and lines in output order, each event as it goes. Planes and lines
// that exist as messages are added whole (AddPlane, AddLine); a slot can be
// kept for one whose final content is known only later (Reserve*, Fill*).
class WireSummaryBuilder {
 public:
  void Clear() { summary_ = {}; }
  void BeginPlane(int64_t id);
  void BeginLine(int64_t id, int64_t timestamp_ns, int64_t duration_ps);
  void SetLineDuration(int64_t duration_ps) { summary_.planes.back().lines.back().duration_ps = duration_ps; }
  void AddTimedEvent(int64_t offset_ps, int64_t duration_ps);
  void AddCountedEvent(int64_t num_occurrences, int64_t duration_ps);
  void AddLine(const xspace::XLine& line);
  void AddPlane(const xspace::XPlane& plane);
  // Slots, filled later: a plane (its index), or a line of the current plane.
  size_t ReservePlane();
  void FillPlane(size_t plane, const xspace::XPlane& message);
  struct LineSlot {
    size_t plane = 0;
    size_t line = 0;
  };
  LineSlot ReserveLine();
  void FillLine(LineSlot slot, const xspace::XLine& message);
  const WireSpaceSummary& summary() const { return summary_; }

 private:
  WireSpaceSummary summary_;
};

// Walks `bytes` as protobuf parses an XSpace: true with *summary filled when
// every part would parse; false with *why naming where and what otherwise.
bool SummarizeXSpaceWire(std::string_view bytes, WireSpaceSummary* summary, std::string* why);

// The check itself: the bytes parse and say what `expected` says. False with
// the first difference in *why.
bool CheckXSpaceWire(std::string_view bytes, const WireSpaceSummary& expected, std::string* why);

}  // namespace chronolink::trace
