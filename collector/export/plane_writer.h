// Writes events into one XPlane for the collector's exporters: event and
// stat metadata resolved once per name (the plane's maps are scanned only
// the first time), and lines filled in start order against the space's line
// base, so every offset is non-negative and every time is exact integer
// picoseconds. Instants are ns on the space's clock (node CLOCK_REALTIME
// here); the picosecond forms are checked for int64 overflow before they
// are written.
//
// One writer per plane; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "proto/xplane.pb.h"

namespace chronolink::collector {

// Longest span a line can hold in int64 picoseconds (about 106 days).
inline constexpr int64_t kMaxLineSpanNs = INT64_MAX / 1000;

class PlaneWriter {
 public:
  // `line_base_ns`: what line timestamps are relative to (0: absolute).
  PlaneWriter(xspace::XPlane* plane, int64_t line_base_ns);

  xspace::XPlane* plane() const { return plane_; }

  // Appends [start_ns, end_ns] to `line`. Events must come in start order
  // per line; the first sets the line's timestamp. nullptr (nothing
  // written) when end < start or the event does not fit the line's
  // picosecond range.
  xspace::XEvent* AddEvent(xspace::XLine* line, std::string_view name, int64_t start_ns, int64_t end_ns);

  // Whether AddEvent would accept [start_ns, end_ns] on a line whose first
  // event starts at line_first_ns.
  static bool Fits(int64_t line_first_ns, int64_t start_ns, int64_t end_ns);

  void AddUint(xspace::XEvent* event, std::string_view stat, uint64_t value);
  void AddInt(xspace::XEvent* event, std::string_view stat, int64_t value);
  void AddStr(xspace::XEvent* event, std::string_view stat, std::string_view value);

  int64_t StatId(std::string_view name);
  int64_t EventId(std::string_view name);

 private:
  xspace::XPlane* plane_;
  int64_t line_base_ns_;
  std::unordered_map<std::string, int64_t> stat_ids_;
  std::unordered_map<std::string, int64_t> event_ids_;
};

}  // namespace chronolink::collector
