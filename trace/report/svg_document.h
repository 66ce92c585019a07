// A minimal SVG builder for the report: elements appended in drawing order
// to one string, every piece of text escaped on the way in (svg_text.h), so
// a panel cannot produce ill-formed XML whatever the input files hold. The
// look lives in the report's style sheet (report_style.h): elements carry a
// CSS class, not inline styles. Not thread-safe; one document per thread.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chronolink::trace::report {

struct Point {
  double x = 0;
  double y = 0;
};

enum class Anchor { kStart, kMiddle, kEnd };

// A piece of a text line with its own class (<tspan>).
struct TextRun {
  std::string text;
  std::string css_class;  // may be empty
};

class SvgDocument {
 public:
  void Rect(double x, double y, double width, double height, std::string_view css_class);
  void Line(double x1, double y1, double x2, double y2, std::string_view css_class);
  void Polyline(std::span<const Point> points, std::string_view css_class);
  void Polygon(std::span<const Point> points, std::string_view css_class);
  void Circle(double x, double y, double r, std::string_view css_class);
  void Text(double x, double y, std::string_view text, std::string_view css_class,
            Anchor anchor = Anchor::kStart);
  void Text(double x, double y, std::span<const TextRun> runs, std::string_view css_class,
            Anchor anchor = Anchor::kStart);

  // `text` wrapped at `max_chars` (svg_text.h WrapText), one <text> per
  // line from baseline `y`; returns the baseline after the last line.
  double Paragraph(double x, double y, std::string_view text, size_t max_chars, double line_height,
                   std::string_view css_class);

  // <g class="..." data-NAME="VALUE"...>; names are ours, values are escaped.
  void OpenGroup(std::string_view css_class,
                 std::span<const std::pair<std::string, std::string>> data = {});
  void CloseGroup();
  // A tooltip for the enclosing group (viewers show it on hover).
  void Tooltip(std::string_view text);
  // Pattern, gradient and marker definitions (ours, not input text).
  void Definition(std::string_view markup) { defs_ += markup; }

  // The whole file: XML declaration, <svg> with its size, the title, the
  // style sheet, the definitions and the body.
  std::string Finish(double width, double height, std::string_view title,
                     std::string_view style_sheet) const;

 private:
  void OpenText(double x, double y, std::string_view css_class, Anchor anchor, bool preserve_space);

  std::string body_;
  std::string defs_;
  int open_groups_ = 0;
};

// A pixel coordinate with at most one decimal ("12", "12.5").
std::string Coord(double value);

}  // namespace chronolink::trace::report
