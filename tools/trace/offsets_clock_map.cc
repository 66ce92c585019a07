#include "tools/trace/offsets_clock_map.h"

#include "trace/correct/node_clock_map.h"

namespace chronolink::trace::cli {

std::string OffsetsMaps::Describe() const { return correction->Describe(); }

std::unique_ptr<HostClockMap> OffsetsMaps::ForNode(uint32_t node, std::string* error) const {
  const NodeCorrection* n = correction->Node(node);
  if (n == nullptr || !n->reachable()) {
    *error = "node " + std::to_string(node) +
             (n == nullptr ? " appears in no offsets line" : " was never reachable in the offsets") +
             " (" + correction->Describe() + ")";
    return nullptr;
  }
  return MakeNodeClockMap(correction, n);
}

bool LoadOffsetsMaps(const std::vector<std::string>& offsets, const std::vector<std::string>& edges,
                     const std::vector<std::string>& timebases, bool skip_bad_lines, const CorrectionOptions& options,
                     OffsetsMaps* out, std::string* error) {
  OffsetsReadOptions read;
  read.skip_bad_lines = skip_bad_lines;
  OffsetsInput input;
  if (!ReadOffsetsFiles(offsets, read, &input, error)) return false;
  EdgeCoverage coverage(skip_bad_lines);
  for (const auto& path : edges) {
    if (!coverage.AddFile(path, error)) return false;
  }
  coverage.Finish();
  ClusterCorrection::Timebases shapes;
  if (!timebases.empty()) {
    TimebaseReader reader;
    for (const auto& path : timebases) {
      if (!reader.AddFile(path, error)) return false;
    }
    if (!reader.Finish(&shapes.nodes, error)) {
      *error += " in " + std::to_string(timebases.size()) + " --timebase file(s)";
      return false;
    }
    shapes.files = timebases;
  }
  auto correction = std::make_shared<ClusterCorrection>();
  if (!ClusterCorrection::FromOffsets(input, correction.get(), error, options, edges.empty() ? nullptr : &coverage,
                                      timebases.empty() ? nullptr : &shapes)) {
    return false;
  }
  out->correction = std::move(correction);
  out->warnings = input.warnings;
  if (input.lines_skipped > input.warnings.size()) {
    out->warnings.push_back(std::to_string(input.lines_skipped) + " bad offsets lines skipped in all");
  }
  return true;
}

}  // namespace chronolink::trace::cli
