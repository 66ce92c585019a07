#include "trace/correct/node_clock_map.h"

namespace chronolink::trace {
namespace {

class NodeClockMap : public HostClockMap {
 public:
  NodeClockMap(std::shared_ptr<const ClusterCorrection> owner, const NodeCorrection* node)
      : owner_(std::move(owner)), node_(node) {}

  // Through the piece's formula alone (MapInPiece reads only its index):
  // building the whole piece, its inline bound included, is for callers
  // that keep it (MapCursor), not for one instant.
  std::optional<MappedInstant> Map(const TraceInstant& host_time) const override {
    MapPiece piece;
    piece.index = node_->PieceAt(host_time).knots_before;
    return MapInPiece(piece, host_time);
  }

  MapPiece PieceAt(const TraceInstant& host_time) const override {
    const NodeCorrection::Piece p = node_->PieceAt(host_time);
    MapPiece piece;
    piece.from = p.from;
    piece.to = p.to;
    piece.index = p.knots_before;
    if (node_->reachable()) {
      piece.linear_known = true;
      piece.linear = node_->LinearAt(p.knots_before);
      piece.bound_known = node_->InterpolationBoundAt(p.knots_before, &piece.bound);
    }
    return piece;
  }

  std::optional<MappedInstant> MapInPiece(const MapPiece& piece, const TraceInstant& host_time) const override {
    const auto c = node_->ToClusterIn(piece.index, host_time);
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

std::unique_ptr<HostClockMap> MakeNodeClockMap(std::shared_ptr<const ClusterCorrection> owner,
                                               const NodeCorrection* node) {
  return std::make_unique<NodeClockMap>(std::move(owner), node);
}

}  // namespace chronolink::trace
