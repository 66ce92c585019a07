// offsets.jsonl: the solved offsets, written by the leader as each instant
// is solved (and by chronolink-solve offline), flushed after each instant so
// a crash loses at most the instant being written. Rows (a JSON object per
// node and instant) or columns (one per instant); schemas in
// docs/formats.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/cluster/cluster_messages.h"
#include "agent/cluster/offsets_form.h"
#include "agent/solve/global_solver.h"
#include "common/rotating_file.h"

namespace chronolink {

constexpr const char* kOffsetSchema = "chronolink.offset.v1";
// One line per instant, one column per field (docs/formats.md): what a large
// cluster's leader writes, for the storage it saves.
constexpr const char* kOffsetColumnsSchema = "chronolink.offset_columns.v1";

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

// The JSON text of one instant's columns line (no newline): offsets,
// uncertainties and residuals in integer picoseconds, drift in integer ps/s
// (1e-12), node ids as differences from the previous one. nullopt when a
// number does not fit (not finite, or beyond 2^62 ps): then write rows.
std::optional<std::string> OffsetColumnsJson(const std::vector<NodeSolution>& nodes,
                                             const OffsetLineContext& context);

// One solved instant as offsets.jsonl holds it in `form`: its rows, or its
// columns line (rows where columns cannot hold it), each ending in a
// newline. *lines (optional) gets the number of lines.
std::string OffsetsInstantText(const std::vector<NodeSolution>& nodes, const OffsetLineContext& context,
                               OffsetsForm form, size_t* lines = nullptr);

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
  bool Open(const std::string& dir, std::string* error, FileRotation rotation = {},
            OffsetsForm form = OffsetsForm::kAuto);
  // The snapshot as rows (a line per node) or one columns line, then a
  // flush; then the rotation when the file is full. False on a write error,
  // or a compression that failed.
  bool Write(const OffsetsSnapshot& snapshot, std::string* error);
  // Closes, and waits for the compressions queued.
  void Close();

  bool is_open() const { return file_.is_open(); }
  const std::string& path() const { return file_.path(); }
  uint64_t lines_written() const { return lines_; }
  uint64_t rotations() const { return file_.rotations(); }

 private:
  RotatingFile file_;
  OffsetsForm form_ = OffsetsForm::kAuto;
  uint64_t lines_ = 0;
};

}  // namespace chronolink
