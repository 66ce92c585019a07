// The agents' timebase.jsonl files, or the leader's cluster-timebase.jsonl
// with every node's (docs/formats.md): each node's REALTIME
// as a function of its MONOTONIC_RAW, as knots. What the trace correction
// needs of them is the shape of REALTIME − RAW over REALTIME between two
// solved instants, where a clock daemon bent it (trace/correct/
// discipline_knots.h). Every line is checked (schema, types, order); a bad
// line is an error naming file:line.
//
// A file may hold several agent runs (sessions) of its node, and several
// files may be given for one node (one per run, or every leader's
// cluster-timebase.jsonl): each session of each file is a polyline of its
// own, and nothing is assumed between two of them, nor across an
// `after_step` or `after_gap` knot.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chronolink::trace {

inline constexpr char kTimebaseSchema[] = "chronolink.timebase.v1";
// A large cluster's leader writes its cluster-timebase.jsonl as columns:
// each line a turn's knots, each knot as steps from its node's last one in
// the same file (docs/formats.md).
inline constexpr char kTimebaseColumnsSchema[] = "chronolink.timebase_columns.v1";

struct TimebasePoint {
  int64_t realtime_ns = 0;
  int64_t raw_ns = 0;
  friend bool operator==(const TimebasePoint&, const TimebasePoint&) = default;
};

// One stretch of REALTIME over RAW with no step or restart inside:
// straight between consecutive knots, known from the first knot to the last.
struct TimebaseStretch {
  std::vector<TimebasePoint> knots;  // increasing in both clocks
  friend bool operator==(const TimebaseStretch&, const TimebaseStretch&) = default;

  int64_t first_realtime_ns() const { return knots.front().realtime_ns; }
  int64_t last_realtime_ns() const { return knots.back().realtime_ns; }
  // RAW(to) − RAW(from) for REALTIMEs within [first, last]: straight
  // between knots, in ns (fractional), without the epoch's magnitude.
  long double RawSince(int64_t from_realtime_ns, int64_t to_realtime_ns) const;
  // The knots strictly inside (from, to).
  std::vector<TimebasePoint> KnotsWithin(int64_t from_realtime_ns, int64_t to_realtime_ns) const;
};

// One node's stretches, ordered by REALTIME.
struct NodeTimebase {
  uint32_t node = 0;
  std::vector<TimebaseStretch> stretches;
  friend bool operator==(const NodeTimebase&, const NodeTimebase&) = default;

  // The stretch holding the whole of [from, to] on REALTIME, if one does.
  const TimebaseStretch* Covering(int64_t from_realtime_ns, int64_t to_realtime_ns) const;
};

class TimebaseReader {
 public:
  // Reads one file; false with *error = "file:line: what" (or "file: why").
  bool AddFile(const std::string& path, std::string* error);
  bool AddText(std::string_view text, const std::string& name, std::string* error);
  // Every node read, its stretches sorted; false when no knot was read.
  bool Finish(std::map<uint32_t, NodeTimebase>* out, std::string* error);

 private:
  // Per file too: every leader's cluster-timebase.jsonl holds the knots of
  // the same nodes and sessions, each from when it took office.
  struct Key {
    size_t source;
    uint32_t node;
    std::string session;
    auto operator<=>(const Key&) const = default;
  };
  bool AddLine(std::string_view line, const std::string& where, std::string* error);
  bool AddColumnsLine(const nlohmann::json& j, const std::string& where, std::string* error);
  bool AddKnot(uint32_t node, const std::string& session, const TimebasePoint& p, bool after_step, bool after_gap,
               const std::string& where, std::string* error);

  // Per (file, node, session): its stretches, the last one open.
  std::map<Key, std::vector<TimebaseStretch>> runs_;
  size_t source_ = 0;
  // The columns lines' last knot of each node in the file being read: what
  // a group that states no start goes on from. Empty at each file's start.
  struct ColumnsLast {
    std::string session;
    int64_t raw_ns = 0;
    int64_t offset_ns = 0;  // REALTIME − RAW
  };
  std::map<uint32_t, ColumnsLast> columns_last_;
};

}  // namespace chronolink::trace
