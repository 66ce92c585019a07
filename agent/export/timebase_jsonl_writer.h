// timebase.jsonl: this node's REALTIME over its MONOTONIC_RAW as knots
// (clock/timebase_knots.h), one line per knot as the agent decides it, so
// that a trace can follow the node's clock discipline between solved
// instants (docs/clocks.md "Disciplined clocks", docs/formats.md).
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "agent/cluster/timebase_knot_relay.h"
#include "agent/export/timebase_columns.h"
#include "clock/timebase_knots.h"
#include "common/rotating_file.h"

namespace chronolink {

constexpr const char* kTimebaseSchema = "chronolink.timebase.v1";
// The leader's: every node's knots as the summaries brought them.
constexpr const char* kClusterTimebaseFile = "cluster-timebase.jsonl";

class TimebaseJsonlWriter {
 public:
  TimebaseJsonlWriter() = default;
  ~TimebaseJsonlWriter();
  TimebaseJsonlWriter(const TimebaseJsonlWriter&) = delete;
  TimebaseJsonlWriter& operator=(const TimebaseJsonlWriter&) = delete;

  // Opens <dir>/<file_name> for append (the directory exists: the edges
  // writer made it). `node` and `session` are WriteNew's. The leader's
  // cluster-timebase.jsonl grows with the cluster and is rotated as
  // offsets.jsonl is (common/rotating_file.h); an agent's own is not.
  bool Open(const std::string& dir, uint32_t node, uint64_t session, std::string* error,
            const std::string& file_name = "timebase.jsonl", FileRotation rotation = {.max_bytes = 0});
  // This node's knots not written yet (the caller drops old ones from the
  // map when it no longer needs them), then flushes.
  bool WriteNew(const TimebaseKnots& knots, std::string* error);
  // Any node's knot, as the leader gathers them from the summaries (the
  // cluster's timebase beside offsets.jsonl); `after_gap`: the knots before
  // it in this session were not all received, nothing is known between.
  bool WriteKnot(const TimebaseKnot& k, uint32_t node, uint64_t session, bool after_gap, std::string* error);
  // The knots the leader gathered since its last turn: a line each, or, as
  // `columns`, one columns line (timebase_columns.h); then Flush.
  bool WriteKnots(std::span<const RelayedKnot> knots, bool columns, std::string* error);
  // Flushes, then rotates a full file: a file ends at a knot, and readers
  // take the rotated set as one.
  bool Flush(std::string* error);
  void Close();

  bool is_open() const { return file_.is_open(); }
  const std::string& path() const { return file_.path(); }
  uint64_t lines_written() const { return lines_; }

 private:
  bool WriteLine(const std::string& json, std::string* error);

  RotatingFile file_;
  TimebaseColumnsEncoder columns_;
  uint64_t columns_rotations_ = 0;  // the file's rotations when the encoder last started again
  uint32_t node_ = 0;
  uint64_t session_ = 0;
  uint64_t lines_ = 0;
  int64_t last_written_raw_ns_ = std::numeric_limits<int64_t>::min();
};

// The JSON text of one knot (no newline).
std::string TimebaseKnotToJson(const TimebaseKnot& k, uint32_t node, uint64_t session, bool after_gap = false);

}  // namespace chronolink
