#include "trace/report/pixel_decimation.h"

#include <algorithm>
#include <cmath>

namespace chronolink::trace::report {
namespace {

// Appends points[first, last) reduced to first, min, max, last.
void AppendColumn(std::span<const PlotPoint> column, std::vector<PlotPoint>* out) {
  size_t low = 0, high = 0;
  for (size_t i = 1; i < column.size(); ++i) {
    if (column[i].y < column[low].y) low = i;
    if (column[i].y > column[high].y) high = i;
  }
  size_t keep[] = {0, low, high, column.size() - 1};
  std::sort(std::begin(keep), std::end(keep));
  const size_t* end = std::unique(std::begin(keep), std::end(keep));
  for (const size_t* k = keep; k != end; ++k) out->push_back(column[*k]);
}

}  // namespace

std::vector<PlotPoint> DecimateMinMax(std::span<const PlotPoint> points) {
  std::vector<PlotPoint> out;
  size_t start = 0;
  for (size_t i = 1; i <= points.size(); ++i) {
    if (i == points.size() || std::floor(points[i].x) != std::floor(points[start].x)) {
      AppendColumn(points.subspan(start, i - start), &out);
      start = i;
    }
  }
  return out;
}

std::vector<PixelSpan> MergeSpans(std::vector<PixelSpan> spans, double min_width) {
  for (PixelSpan& span : spans) {
    if (span.x1 < span.x0) std::swap(span.x0, span.x1);
    const double missing = min_width - (span.x1 - span.x0);
    if (missing > 0) {
      span.x0 -= missing / 2;
      span.x1 += missing / 2;
    }
  }
  std::sort(spans.begin(), spans.end(), [](const PixelSpan& a, const PixelSpan& b) { return a.x0 < b.x0; });
  std::vector<PixelSpan> merged;
  for (const PixelSpan& span : spans) {
    if (!merged.empty() && span.x0 <= merged.back().x1) {
      merged.back().x1 = std::max(merged.back().x1, span.x1);
    } else {
      merged.push_back(span);
    }
  }
  return merged;
}

}  // namespace chronolink::trace::report
