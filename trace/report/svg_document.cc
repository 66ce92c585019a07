#include "trace/report/svg_document.h"

#include <cmath>

#include "trace/report/svg_text.h"

namespace chronolink::trace::report {
namespace {

const char* AnchorName(Anchor anchor) {
  switch (anchor) {
    case Anchor::kMiddle: return "middle";
    case Anchor::kEnd: return "end";
    case Anchor::kStart: break;
  }
  return "start";
}

std::string Points(std::span<const Point> points) {
  std::string out;
  out.reserve(points.size() * 12);
  for (const Point& p : points) {
    if (!out.empty()) out.push_back(' ');
    out += Coord(p.x);
    out.push_back(',');
    out += Coord(p.y);
  }
  return out;
}

std::string ClassAttribute(std::string_view css_class) {
  return css_class.empty() ? std::string() : " class=\"" + XmlText(css_class) + "\"";
}

}  // namespace

std::string Coord(double value) {
  if (!std::isfinite(value)) return "0";
  const double rounded = std::round(value * 10) / 10;
  if (rounded == std::floor(rounded)) return Printf("%.0f", rounded == 0 ? 0.0 : rounded);
  return Printf("%.1f", rounded);
}

void SvgDocument::Rect(double x, double y, double width, double height, std::string_view css_class) {
  body_ += "<rect x=\"" + Coord(x) + "\" y=\"" + Coord(y) + "\" width=\"" + Coord(std::max(width, 0.0)) +
           "\" height=\"" + Coord(std::max(height, 0.0)) + "\"" + ClassAttribute(css_class) + "/>\n";
}

void SvgDocument::Line(double x1, double y1, double x2, double y2, std::string_view css_class) {
  body_ += "<line x1=\"" + Coord(x1) + "\" y1=\"" + Coord(y1) + "\" x2=\"" + Coord(x2) + "\" y2=\"" +
           Coord(y2) + "\"" + ClassAttribute(css_class) + "/>\n";
}

void SvgDocument::Polyline(std::span<const Point> points, std::string_view css_class) {
  if (points.empty()) return;
  body_ += "<polyline points=\"" + Points(points) + "\"" + ClassAttribute(css_class) + "/>\n";
}

void SvgDocument::Polygon(std::span<const Point> points, std::string_view css_class) {
  if (points.empty()) return;
  body_ += "<polygon points=\"" + Points(points) + "\"" + ClassAttribute(css_class) + "/>\n";
}

void SvgDocument::Circle(double x, double y, double r, std::string_view css_class) {
  body_ += "<circle cx=\"" + Coord(x) + "\" cy=\"" + Coord(y) + "\" r=\"" + Coord(r) + "\"" +
           ClassAttribute(css_class) + "/>\n";
}

void SvgDocument::OpenText(double x, double y, std::string_view css_class, Anchor anchor, bool preserve_space) {
  body_ += "<text x=\"" + Coord(x) + "\" y=\"" + Coord(y) + "\"" + ClassAttribute(css_class);
  if (anchor != Anchor::kStart) body_ += std::string(" text-anchor=\"") + AnchorName(anchor) + "\"";
  if (preserve_space) body_ += " xml:space=\"preserve\"";
  body_ += ">";
}

void SvgDocument::Text(double x, double y, std::string_view text, std::string_view css_class,
                       Anchor anchor) {
  OpenText(x, y, css_class, anchor, /*preserve_space=*/false);
  body_ += XmlText(text) + "</text>\n";
}

void SvgDocument::Text(double x, double y, std::span<const TextRun> runs, std::string_view css_class,
                       Anchor anchor) {
  // The spaces between runs are part of the text: without xml:space, rsvg
  // (following SVG's default) drops those at a run's ends.
  OpenText(x, y, css_class, anchor, /*preserve_space=*/true);
  for (const TextRun& run : runs) {
    if (run.css_class.empty()) {
      body_ += XmlText(run.text);
    } else {
      body_ += "<tspan" + ClassAttribute(run.css_class) + ">" + XmlText(run.text) + "</tspan>";
    }
  }
  body_ += "</text>\n";
}

double SvgDocument::Paragraph(double x, double y, std::string_view text, size_t max_chars, double line_height,
                              std::string_view css_class) {
  for (const std::string& line : WrapText(text, max_chars)) {
    Text(x, y, line, css_class);
    y += line_height;
  }
  return y;
}

void SvgDocument::OpenGroup(std::string_view css_class,
                            std::span<const std::pair<std::string, std::string>> data) {
  body_ += "<g" + ClassAttribute(css_class);
  for (const auto& [name, value] : data) body_ += " data-" + XmlText(name) + "=\"" + XmlText(value) + "\"";
  body_ += ">\n";
  ++open_groups_;
}

void SvgDocument::CloseGroup() {
  if (open_groups_ == 0) return;
  body_ += "</g>\n";
  --open_groups_;
}

void SvgDocument::Tooltip(std::string_view text) { body_ += "<title>" + XmlText(text) + "</title>\n"; }

std::string SvgDocument::Finish(double width, double height, std::string_view title,
                                std::string_view style_sheet) const {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Coord(width) + "\" height=\"" +
         Coord(height) + "\" viewBox=\"0 0 " + Coord(width) + " " + Coord(height) + "\">\n";
  out += "<title>" + XmlText(title) + "</title>\n";
  out += "<style>\n" + std::string(style_sheet) + "</style>\n";
  out += "<defs>\n" + defs_ + "</defs>\n";
  // Opaque: a PNG made from it, or a dark viewer, shows the same page.
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  out += body_;
  for (int i = 0; i < open_groups_; ++i) out += "</g>\n";
  out += "</svg>\n";
  return out;
}

}  // namespace chronolink::trace::report
