// A legend line: a swatch drawn with the same CSS class as the marks it
// explains, then its label; items wrap onto a new line at the page's right
// margin. Not thread-safe (draws into one document).
#pragma once

#include <string>
#include <vector>

#include "trace/report/svg_document.h"

namespace chronolink::trace::report {

enum class LegendSwatch { kLine, kDashed, kArea, kBox, kBar };

struct LegendItem {
  LegendSwatch swatch = LegendSwatch::kBox;
  std::string css_class;  // the class the explained marks are drawn with
  std::string label;
};

// Draws the items with their text baseline at `y`; returns the y of the
// baseline of the last line.
double DrawLegend(const std::vector<LegendItem>& items, double x, double y, SvgDocument* doc);

}  // namespace chronolink::trace::report
