#include "trace/report/legend.h"

#include "trace/report/report_style.h"

namespace chronolink::trace::report {
namespace {

constexpr double kSwatchWidth = 24;
constexpr double kCharWidth = 6.4;  // average of the 12px system sans, for laying out only
constexpr double kItemGap = 22;
constexpr double kLineHeight = 18;

void DrawSwatch(const LegendItem& item, double x, double y, SvgDocument* doc) {
  const double mid = y - 4;
  switch (item.swatch) {
    case LegendSwatch::kLine:
    case LegendSwatch::kDashed:
      doc->Line(x, mid, x + kSwatchWidth, mid, item.css_class);
      break;
    case LegendSwatch::kArea:
      doc->Rect(x, mid - 5, kSwatchWidth, 10, item.css_class);
      break;
    case LegendSwatch::kBox:
      doc->Rect(x, mid - 6, kSwatchWidth, 12, item.css_class);
      break;
    case LegendSwatch::kBar:
      doc->Rect(x, mid - 4, kSwatchWidth, 8, item.css_class);
      break;
  }
}

}  // namespace

double DrawLegend(const std::vector<LegendItem>& items, double x, double y, SvgDocument* doc) {
  double cursor = x;
  for (const LegendItem& item : items) {
    const double width = kSwatchWidth + 6 + static_cast<double>(item.label.size()) * kCharWidth;
    if (cursor > x && cursor + width > kContentRight) {
      cursor = x;
      y += kLineHeight;
    }
    DrawSwatch(item, cursor, y, doc);
    doc->Text(cursor + kSwatchWidth + 6, y, item.label, "small");
    cursor += width + kItemGap;
  }
  return y;
}

}  // namespace chronolink::trace::report
