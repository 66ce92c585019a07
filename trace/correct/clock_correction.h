// The cluster's clock correction: every node's map from its clock to
// cluster time (trace/correct/node_correction.h), built from solved offsets
// (trace/correct/offsets_file.h) and optionally the agents' edges.jsonl
// (trace/correct/edge_coverage.h), with a description of where it came from
// for the provenance an aligned trace carries. docs/trace-correction.md
// describes the model, the bound and its coverage claim.
//
// Building checks what the map needs beyond each line's own sanity: every
// node's solved instants must be strictly increasing on its own clock too
// (T + offset_ns), or events would change order; instants more than 100 days
// apart are refused (their picosecond distance does not fit int64).
//
// Immutable once built; const calls are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trace/correct/discipline_knots.h"
#include "trace/correct/edge_coverage.h"
#include "trace/correct/node_correction.h"
#include "trace/correct/offsets_file.h"
#include "trace/correct/stalled_instants.h"

namespace chronolink::trace {

// Where a correction came from.
struct CorrectionSource {
  std::vector<std::string> offsets_files;
  std::vector<std::string> edges_files;  // empty when no edges.jsonl was given
  ClockReference reference;
  size_t instants = 0;       // distinct t_ns
  int64_t first_t_ns = 0;
  int64_t last_t_ns = 0;
  int64_t period_ns = 0;     // median spacing of the instants (0: one instant)
  uint64_t lines_read = 0;
  uint64_t solutions_read = 0;  // a row line holds one, a columns line one per node
  uint64_t lines_replaced = 0;  // solutions replaced by later ones of the same (node, t_ns)
  uint64_t lines_skipped = 0;
  size_t stalled_set_aside = 0;  // solved instants set aside as a stalled agent's (stalled_instants.h)
  // With the nodes' timebase.jsonl: the files, and what following their
  // discipline between solved instants added (discipline_knots.h).
  std::vector<std::string> timebase_files;
  DisciplineStats discipline;
};

class ClusterCorrection {
 public:
  // False with `*error` naming file:line when the offsets cannot make a
  // monotonic map. `edges` (finished) is optional; so are `timebases`, with
  // which the map follows each node's and the reference's clock discipline
  // between solved instants (`timebase_files` names them for the provenance).
  struct Timebases {
    std::map<uint32_t, NodeTimebase> nodes;
    std::vector<std::string> files;
  };
  static bool FromOffsets(const OffsetsInput& records, ClusterCorrection* out, std::string* error,
                          const CorrectionOptions& options = {}, const EdgeCoverage* edges = nullptr,
                          const Timebases* timebases = nullptr);

  // nullptr for a node no line named.
  const NodeCorrection* Node(uint32_t id) const;
  std::vector<uint32_t> Nodes() const;
  const ClockReference& reference() const { return source_.reference; }
  const CorrectionSource& source() const { return source_; }
  const CorrectionOptions& options() const { return options_; }

  // One line: files, reference, instants, span, period, nodes.
  std::string Describe() const;
  // The same as JSON, for an output's provenance record.
  nlohmann::json ProvenanceJson() const;

 private:
  bool AddNode(const OffsetsInput& input, size_t begin, size_t end, const std::vector<int64_t>& instants,
               const EdgeCoverage* edges, std::string* error);

  CorrectionOptions options_;
  CorrectionSource source_;
  std::map<uint32_t, NodeCorrection> nodes_;
};

}  // namespace chronolink::trace
