// offsets.jsonl: one JSON object per node and reference instant, written by
// the leader as each instant is solved (and by chronolink-solve offline),
// flushed line by line so a crash loses at most the instant being written.
// Schema in docs/formats.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "agent/cluster/cluster_messages.h"
#include "agent/solve/global_solver.h"
#include "common/rotating_file.h"

namespace chronolink {

constexpr const char* kOffsetSchema = "chronolink.offset.v1";

// Who produced a line, beyond the solution itself.
struct OffsetLineContext {
  int64_t reference_instant_ns = 0;
  std::optional<uint32_t> reference_node;  // nullopt: "mean"
  std::optional<uint32_t> leader;          // absent for offline solves
  bool recomputed = false;                 // a re-solve of an instant after late windows
  std::string method;                      // "global" (default, omitted) or "spanning_tree"
};

// The JSON text of one line (no newline).
std::string OffsetLineJson(const NodeSolution& s, const OffsetLineContext& context);

// When offsets.jsonl is full (a 10 000-node cluster writes 2.6 MB every
// 2 s) it is rotated after a whole instant and the full one compressed
// (common/rotating_file.h); readers take the set as one (docs/formats.md).
class OffsetsJsonlWriter {
 public:
  OffsetsJsonlWriter() = default;
  ~OffsetsJsonlWriter();
  OffsetsJsonlWriter(const OffsetsJsonlWriter&) = delete;
  OffsetsJsonlWriter& operator=(const OffsetsJsonlWriter&) = delete;

  // Creates the directory if needed and opens <dir>/offsets.jsonl for append.
  bool Open(const std::string& dir, std::string* error, FileRotation rotation = {});
  // One line per node of the snapshot, then a flush; then the rotation when
  // the file is full. False on a write error, or a compression that failed.
  bool Write(const OffsetsSnapshot& snapshot, std::string* error);
  // Closes, and waits for the compressions queued.
  void Close();

  bool is_open() const { return file_.is_open(); }
  const std::string& path() const { return file_.path(); }
  uint64_t lines_written() const { return lines_; }
  uint64_t rotations() const { return file_.rotations(); }

 private:
  RotatingFile file_;
  uint64_t lines_ = 0;
};

}  // namespace chronolink
