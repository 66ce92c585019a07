// offsets.jsonl: one JSON object per node and reference instant, written by
// the leader as each instant is solved (and by chronolink-solve offline),
// flushed line by line so a crash loses at most the instant being written.
// Schema in docs/formats.md.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "agent/cluster/cluster_messages.h"
#include "agent/solve/global_solver.h"

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

class OffsetsJsonlWriter {
 public:
  OffsetsJsonlWriter() = default;
  ~OffsetsJsonlWriter();
  OffsetsJsonlWriter(const OffsetsJsonlWriter&) = delete;
  OffsetsJsonlWriter& operator=(const OffsetsJsonlWriter&) = delete;

  // Creates the directory if needed and opens <dir>/offsets.jsonl for append.
  bool Open(const std::string& dir, std::string* error);
  // One line per node of the snapshot, then a flush.
  bool Write(const OffsetsSnapshot& snapshot, std::string* error);
  void Close();

  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }
  uint64_t lines_written() const { return lines_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  uint64_t lines_ = 0;
};

}  // namespace chronolink
