// The bridge from the offsets a run recorded to alignment: reads the
// offsets.jsonl files (and, optionally, the nodes' edges.jsonl) into one
// ClusterCorrection and hands out a HostClockMap per node.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trace/correct/clock_correction.h"
#include "trace/correct/host_clock_map.h"

namespace chronolink::trace::cli {

class OffsetsMaps {
 public:
  // One line for outputs and the summary: files, instants, nodes, reference.
  std::string Describe() const;
  // nullptr with *error when the node has no solved instant at all.
  std::unique_ptr<HostClockMap> ForNode(uint32_t node, std::string* error) const;

  std::shared_ptr<const ClusterCorrection> correction;
  std::vector<std::string> warnings;  // skipped lines, empty files: for the summary
};

bool LoadOffsetsMaps(const std::vector<std::string>& offsets, const std::vector<std::string>& edges,
                     const std::vector<std::string>& timebases, bool skip_bad_lines, const CorrectionOptions& options,
                     OffsetsMaps* out, std::string* error);

}  // namespace chronolink::trace::cli
