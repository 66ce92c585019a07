#include "tools/trace/offsets_clock_map.h"

namespace chronolink::trace::cli {
namespace {

class NodeClockMap : public HostClockMap {
 public:
  NodeClockMap(std::shared_ptr<const ClusterCorrection> owner, const NodeCorrection* node)
      : owner_(std::move(owner)), node_(node) {}

  std::optional<MappedInstant> Map(const TraceInstant& host_time) const override {
    const auto c = node_->ToCluster(host_time);
    if (!c || c->quality == CorrectionQuality::kUnreachable) return std::nullopt;
    MappedInstant m;
    m.cluster = c->cluster;
    m.uncertainty_ns = c->uncertainty_ns;
    m.quality = c->quality == CorrectionQuality::kGap            ? MapQuality::kGap
                : c->quality == CorrectionQuality::kExtrapolated ? MapQuality::kExtrapolated
                                                                 : MapQuality::kSolved;
    m.beyond_span_ns = c->beyond_span_ns;
    m.correction_ns = static_cast<double>(c->correction_ps) / 1000.0;
    return m;
  }

  std::string Describe() const override { return node_->Describe(); }

 private:
  std::shared_ptr<const ClusterCorrection> owner_;  // keeps node_ alive
  const NodeCorrection* node_;
};

}  // namespace

std::string OffsetsMaps::Describe() const { return correction->Describe(); }

std::unique_ptr<HostClockMap> OffsetsMaps::ForNode(uint32_t node, std::string* error) const {
  const NodeCorrection* n = correction->Node(node);
  if (n == nullptr || !n->reachable()) {
    *error = "node " + std::to_string(node) +
             (n == nullptr ? " appears in no offsets line" : " was never reachable in the offsets") +
             " (" + correction->Describe() + ")";
    return nullptr;
  }
  return std::make_unique<NodeClockMap>(correction, n);
}

bool LoadOffsetsMaps(const std::vector<std::string>& offsets, const std::vector<std::string>& edges,
                     bool skip_bad_lines, OffsetsMaps* out, std::string* error) {
  OffsetsReadOptions read;
  read.skip_bad_lines = skip_bad_lines;
  OffsetsInput input;
  if (!ReadOffsetsFiles(offsets, read, &input, error)) return false;
  EdgeCoverage coverage(skip_bad_lines);
  for (const auto& path : edges) {
    if (!coverage.AddFile(path, error)) return false;
  }
  coverage.Finish();
  auto correction = std::make_shared<ClusterCorrection>();
  if (!ClusterCorrection::FromOffsets(input, correction.get(), error, CorrectionOptions{},
                                      edges.empty() ? nullptr : &coverage)) {
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
