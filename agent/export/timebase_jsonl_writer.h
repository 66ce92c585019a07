// timebase.jsonl: this node's REALTIME over its MONOTONIC_RAW as knots
// (clock/timebase_knots.h), one line per knot as the agent decides it, so
// that a trace can follow the node's clock discipline between solved
// instants (docs/clocks.md "Disciplined clocks", docs/formats.md).
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "clock/timebase_knots.h"

namespace chronolink {

constexpr const char* kTimebaseSchema = "chronolink.timebase.v1";

class TimebaseJsonlWriter {
 public:
  TimebaseJsonlWriter() = default;
  ~TimebaseJsonlWriter();
  TimebaseJsonlWriter(const TimebaseJsonlWriter&) = delete;
  TimebaseJsonlWriter& operator=(const TimebaseJsonlWriter&) = delete;

  // Opens <dir>/timebase.jsonl for append (the directory exists: the edges
  // writer made it).
  bool Open(const std::string& dir, uint32_t node, uint64_t session, std::string* error);
  // Writes the knots not written yet, drops those the map no longer needs
  // (all but the open segment's start), and flushes.
  bool WriteNew(TimebaseKnots* knots, std::string* error);
  void Close();

  const std::string& path() const { return path_; }
  uint64_t lines_written() const { return lines_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  uint32_t node_ = 0;
  uint64_t session_ = 0;
  uint64_t lines_ = 0;
  int64_t last_written_raw_ns_ = std::numeric_limits<int64_t>::min();
};

// The JSON text of one knot (no newline).
std::string TimebaseKnotToJson(const TimebaseKnot& k, uint32_t node, uint64_t session);

}  // namespace chronolink
