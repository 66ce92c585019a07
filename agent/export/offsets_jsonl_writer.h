// offsets.jsonl: one JSON object per node and reference instant, written by
// the leader as each instant is solved (and by chronolink-solve offline),
// flushed line by line so a crash loses at most the instant being written.
// Schema in docs/formats.md.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "agent/cluster/cluster_messages.h"
#include "agent/solve/global_solver.h"
#include "common/gzip_file.h"

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
// 2 s): it is renamed offsets.<N>.jsonl (N = 000001, 000002, ...) and a
// new one started, and the full one gzip-compressed in the background
// (offsets.<N>.jsonl.gz). Readers take the set as one (docs/formats.md).
struct OffsetsRotation {
  int64_t max_bytes = 256LL << 20;  // 0: never rotated
  bool compress = true;
};

// offsets.<N>.jsonl for rotation N of `current` (dir/offsets.jsonl).
std::string RotatedOffsetsName(const std::string& current, uint64_t n);

class OffsetsJsonlWriter {
 public:
  OffsetsJsonlWriter();
  ~OffsetsJsonlWriter();
  OffsetsJsonlWriter(const OffsetsJsonlWriter&) = delete;
  OffsetsJsonlWriter& operator=(const OffsetsJsonlWriter&) = delete;

  // Creates the directory if needed and opens <dir>/offsets.jsonl for
  // append; rotated files a crash left uncompressed are compressed now.
  bool Open(const std::string& dir, std::string* error, OffsetsRotation rotation = {});
  // One line per node of the snapshot, then a flush; then the rotation when
  // the file is full. False on a write error, or a compression that failed.
  bool Write(const OffsetsSnapshot& snapshot, std::string* error);
  // Closes, and waits for the compressions queued.
  void Close();

  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }
  uint64_t lines_written() const { return lines_; }
  uint64_t rotations() const { return rotated_; }

 private:
  bool Rotate(std::string* error);

  std::FILE* file_ = nullptr;
  std::string path_;
  OffsetsRotation rotation_;
  int64_t bytes_ = 0;        // in the current file
  uint64_t lines_ = 0;
  uint64_t last_index_ = 0;  // the newest rotated file's N
  uint64_t rotated_ = 0;
  std::unique_ptr<BackgroundGzip> gzip_;
};

}  // namespace chronolink
