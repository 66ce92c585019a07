// Reducing a long series to what a plot of a given pixel width can show:
// 100k solved instants drawn as 100k polyline points would make a 10 MB
// picture that looks the same as one point per pixel column, but keeping
// one sample per column would drop the one spike the reader needs to see.
// So each pixel column keeps its first, lowest, highest and last point (the
// "M4" reduction), which draws the same line as the full series, and
// marked stretches (gaps) are merged into at most one box per column.
// Pure functions; thread-safe.
#pragma once

#include <span>
#include <vector>

namespace chronolink::trace::report {

struct PlotPoint {
  double x = 0;  // pixels, non-decreasing along a series
  double y = 0;  // data units
};

// Per run of consecutive points in one pixel column (floor(x)): the first,
// the minimum, the maximum and the last, in series order, each once.
std::vector<PlotPoint> DecimateMinMax(std::span<const PlotPoint> points);

struct PixelSpan {
  double x0 = 0;
  double x1 = 0;
};

// Each span widened to at least `min_width` about its centre, then spans
// that overlap or touch merged; the result is sorted and disjoint.
std::vector<PixelSpan> MergeSpans(std::vector<PixelSpan> spans, double min_width);

}  // namespace chronolink::trace::report
