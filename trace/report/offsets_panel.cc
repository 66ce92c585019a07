#include "trace/report/offsets_panel.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "trace/report/axis_scale.h"
#include "trace/report/legend.h"
#include "trace/report/node_series.h"
#include "trace/report/pixel_decimation.h"
#include "trace/report/report_style.h"
#include "trace/report/svg_text.h"

namespace chronolink::trace::report {
namespace {

constexpr double kLabelX = kMargin;
constexpr double kOffsetX0 = 300, kOffsetX1 = 940;
constexpr double kSigmaX0 = 1016, kSigmaX1 = kContentRight;
constexpr double kPad = 3;             // px between a frame and the data inside it
constexpr double kMinGapWidth = 3;     // px: a one-instant gap among 100k still shows
constexpr double kLabelSpacing = 13;   // px between tick labels, or the later one is dropped
constexpr size_t kDotsUpTo = 40;       // solved instants per node drawn as dots as well
constexpr size_t kHostNameChars = 30;

struct RowLayout {
  double height = 0;
  double gap = 0;
  int text_lines = 0;
  int y_ticks = 0;
};

RowLayout LayoutFor(size_t rows) {
  if (rows <= 6) return {72, 12, 3, 3};
  if (rows <= 12) return {58, 10, 3, 3};
  if (rows <= 24) return {44, 8, 3, 2};
  return {30, 6, 2, 2};
}

struct Axes {
  const RunTimeline* timeline;
  LinearScale offset_x;
  LinearScale sigma_x;
  double sigma_max_ns;  // top of the shared σ scale's data
};

// Points of records[range] as pixels: x by time, y by `value` through `y`,
// reduced to first/min/max/last per pixel column.
template <typename Value>
std::vector<Point> StretchPoints(const NodeSeries& s, IndexRange range, const RunTimeline& timeline,
                                 const LinearScale& x, const LinearScale& y, Value value) {
  std::vector<PlotPoint> raw;
  raw.reserve(range.last - range.first + 1);
  for (size_t i = range.first; i <= range.last; ++i) {
    raw.push_back({x(timeline.SecondsSinceFirst(s.records[i].t_ns)), value(s.records[i])});
  }
  std::vector<Point> out;
  for (const PlotPoint& p : DecimateMinMax(raw)) out.push_back({p.x, y(p.y)});
  return out;
}

// Labelled ticks on a y axis, at least kLabelSpacing apart, ends first.
void DrawYTicks(const LinearScale& y, double plot_x0, double plot_x1, bool label, SvgDocument* doc) {
  const std::vector<double>& ticks = y.ticks();
  std::vector<double> labelled_px;
  for (size_t k = 0; k < ticks.size(); ++k) {
    const double py = y(ticks[k]);
    if (k > 0 && k + 1 < ticks.size()) doc->Line(plot_x0, py, plot_x1, py, "grid");
  }
  if (!label) return;
  std::vector<size_t> order = {0, ticks.size() - 1};
  for (size_t k = 1; k + 1 < ticks.size(); ++k) order.push_back(k);
  for (size_t k : order) {
    const double py = y(ticks[k]);
    const bool crowded = std::any_of(labelled_px.begin(), labelled_px.end(),
                                     [&](double other) { return std::fabs(other - py) < kLabelSpacing; });
    if (crowded) continue;
    labelled_px.push_back(py);
    doc->Text(plot_x0 - 5, py + 3.5, FormatNumber(ticks[k], y.decimals()), "tick", Anchor::kEnd);
  }
}

// Vertical grid lines at the time ticks, except on the frame's own edges.
void DrawXGrid(const LinearScale& x, double top, double height, SvgDocument* doc) {
  for (double tick : x.ticks()) {
    if (tick > x.lo() && tick < x.hi()) doc->Line(x(tick), top, x(tick), top + height, "grid");
  }
}

// Hatched boxes where the node was unreachable (red, with a tick under the
// frame) or has no line (grey), on one plot.
void DrawGaps(const NodeSeries& s, const RunTimeline& timeline, const LinearScale& x, double top,
              double height, SvgDocument* doc) {
  const double half_period_px = (x(timeline.period_ns * 0.5e-9) - x(0));
  const double plot_x0 = x(x.lo()), plot_x1 = x(x.hi());
  const auto spans = [&](const std::vector<IndexRange>& runs, auto instant) {
    std::vector<PixelSpan> out;
    for (const IndexRange& run : runs) {
      out.push_back({x(timeline.SecondsSinceFirst(instant(run.first))) - half_period_px,
                     x(timeline.SecondsSinceFirst(instant(run.last))) + half_period_px});
    }
    out = MergeSpans(std::move(out), kMinGapWidth);
    for (PixelSpan& span : out) {
      span.x0 = std::clamp(span.x0, plot_x0, plot_x1);
      span.x1 = std::clamp(span.x1, plot_x0, plot_x1);
    }
    return out;
  };
  for (const PixelSpan& span : spans(s.missing_runs, [&](size_t j) { return timeline.instants[j]; })) {
    doc->Rect(span.x0, top, span.x1 - span.x0, height, "missing");
  }
  for (const PixelSpan& span : spans(s.unreachable_runs, [&](size_t i) { return s.records[i].t_ns; })) {
    doc->Rect(span.x0, top, span.x1 - span.x0, height, "unreachable");
    doc->Line(span.x0, top + height + 2.5, span.x1, top + height + 2.5, "gap-tick");
  }
  for (const PixelSpan& span : spans(s.set_aside_runs, [&](size_t i) { return s.records[i].t_ns; })) {
    doc->Rect(span.x0, top, span.x1 - span.x0, height, "set-aside");
  }
}

// Each set-aside instant's value as a hollow mark: a circle where it lies
// on the row's scale, else a triangle on the frame's edge pointing the way
// it lies. One mark per pixel, so a file of stalls stays small.
template <typename Value>
void DrawSetAsideMarks(const NodeSeries& s, const RunTimeline& timeline, const LinearScale& x, const LinearScale& y,
                       double top, double height, Value value, SvgDocument* doc) {
  const double upper = top + kPad, lower = top + height - kPad;
  std::set<std::pair<long, long>> drawn;
  for (const IndexRange& run : s.set_aside_runs) {
    for (size_t i = run.first; i <= run.last; ++i) {
      const double px = x(timeline.SecondsSinceFirst(s.records[i].t_ns));
      const double py = std::clamp(y(value(s.records[i])), upper - 1, lower + 1);
      if (!drawn.insert({std::lround(px), std::lround(py)}).second) continue;
      if (py >= upper && py <= lower) {
        doc->Circle(px, py, 2.6, "set-aside-mark");
        continue;
      }
      const double tip = py < upper ? top + 1.5 : top + height - 1.5;
      const double base = py < upper ? top + 8 : top + height - 8;
      const std::vector<Point> triangle = {{px, tip}, {px - 4, base}, {px + 4, base}};
      doc->Polygon(triangle, "set-aside-mark");
    }
  }
}

void DrawOffsetPlot(const NodeSeries& s, const Axes& axes, const RowLayout& row, double top,
                    SvgDocument* doc) {
  doc->Rect(kOffsetX0, top, kOffsetX1 - kOffsetX0, row.height, "frame");
  const LinearScale y(s.offset_min_ns / 1e6, s.offset_max_ns / 1e6, top + row.height - kPad, top + kPad,
                      row.y_ticks);
  DrawXGrid(axes.offset_x, top, row.height, doc);
  DrawYTicks(y, kOffsetX0, kOffsetX1, s.reachable > 0, doc);
  DrawGaps(s, *axes.timeline, axes.offset_x, top, row.height, doc);
  const auto offset_ms = [](const OffsetRecord& r) { return r.offset_ns / 1e6; };
  for (const IndexRange& stretch : s.solved_stretches) {
    const auto points = StretchPoints(s, stretch, *axes.timeline, axes.offset_x, y, offset_ms);
    doc->Polyline(points, "offset-line");
    if (s.reachable <= kDotsUpTo || points.size() == 1) {
      for (const Point& p : points) doc->Circle(p.x, p.y, 2.2, "offset-dot");
    }
  }
  DrawSetAsideMarks(s, *axes.timeline, axes.offset_x, y, top, row.height, offset_ms, doc);
}

void DrawSigmaPlot(const NodeSeries& s, const Axes& axes, const RowLayout& row, double top,
                   SvgDocument* doc) {
  doc->Rect(kSigmaX0, top, kSigmaX1 - kSigmaX0, row.height, "frame");
  const LinearScale y(0, axes.sigma_max_ns, top + row.height - kPad, top + kPad, row.y_ticks);
  DrawXGrid(axes.sigma_x, top, row.height, doc);
  DrawYTicks(y, kSigmaX0, kSigmaX1, true, doc);
  DrawGaps(s, *axes.timeline, axes.sigma_x, top, row.height, doc);
  const auto sigma = [](const OffsetRecord& r) { return r.uncertainty_ns; };
  for (const IndexRange& stretch : s.solved_stretches) {
    std::vector<Point> points = StretchPoints(s, stretch, *axes.timeline, axes.sigma_x, y, sigma);
    if (points.size() == 1 || s.reachable <= kDotsUpTo) {
      for (const Point& p : points) doc->Circle(p.x, p.y, 2, "sigma-dot");
    }
    std::vector<Point> area = points;
    area.push_back({points.back().x, y(0)});
    area.push_back({points.front().x, y(0)});
    doc->Polygon(area, "sigma-area");
    doc->Polyline(points, "sigma-line");
  }
  DrawSetAsideMarks(s, *axes.timeline, axes.sigma_x, y, top, row.height, sigma, doc);
}

std::string HostsLine(const OffsetsPanelInput& input, uint32_t node) {
  const auto it = input.hosts_by_node.find(node);
  if (it == input.hosts_by_node.end() || it->second.empty()) return "no trace";
  const std::vector<std::string>& hosts = it->second;
  std::string line = hosts.size() == 1 ? "trace " : std::to_string(hosts.size()) + " traces: ";
  for (size_t i = 0; i < hosts.size() && i < 3; ++i) line += (i ? ", " : "") + hosts[i];
  if (hosts.size() > 3) line += ", …";
  return Ellipsize(line, kHostNameChars + 8);
}

std::vector<TextRun> StatsLine(const NodeSeries& s, bool is_reference) {
  if (s.reachable == 0) return {{"never reachable", "bad"}};
  if (is_reference && s.offset_min_ns == 0 && s.offset_max_ns == 0) {
    return {{"offset 0 by definition", "muted"}};
  }
  std::vector<TextRun> runs;
  runs.push_back({"σ " + FormatDurationNs(s.sigma_min_ns) + " – " + FormatDurationNs(s.sigma_max_ns), "muted"});
  if (s.unreachable > 0) runs.push_back({" · " + FormatCount(s.unreachable) + " unreachable", "bad"});
  if (s.missing > 0) runs.push_back({" · " + FormatCount(s.missing) + " missing", "warn"});
  if (s.set_aside > 0) runs.push_back({" · " + FormatCount(s.set_aside) + " set aside", "warn"});
  return runs;
}

std::string RowTooltip(const NodeSeries& s) {
  std::string text = "node " + std::to_string(s.node) + ": " + FormatCount(s.records.size()) + " instants, " +
                     FormatCount(s.reachable) + " solved";
  if (s.reachable > 0) {
    text += "; offset " + FormatMsPrecise(s.offset_min_ns) + " to " + FormatMsPrecise(s.offset_max_ns) +
            "; 1σ " + FormatDurationNs(s.sigma_min_ns) + " to " + FormatDurationNs(s.sigma_max_ns);
  }
  if (s.unreachable > 0) text += "; unreachable at " + FormatCount(s.unreachable) + " instants";
  if (s.missing > 0) text += "; no line at " + FormatCount(s.missing) + " instants of the run";
  if (s.set_aside > 0) {
    text += "; " + FormatCount(s.set_aside) + " set aside as a stalled agent's (1σ up to " +
            FormatDurationNs(s.set_aside_sigma_max_ns) + "): the correction maps across them as missed";
  }
  return text;
}

void DrawRowLabel(const OffsetsPanelInput& input, const NodeSeries& s, const RowLayout& row, double top,
                  SvgDocument* doc) {
  const ClockReference& reference = input.offsets->reference;
  const bool is_reference = !reference.is_mean && reference.node == s.node;
  std::vector<TextRun> name = {{"node " + std::to_string(s.node), "strong"}};
  if (is_reference) name.push_back({"  REFERENCE", "tag"});
  const bool hosts_line = input.hosts_known && row.text_lines >= 3;
  if (input.hosts_known && !hosts_line) {  // short rows: the hosts after the name
    name.push_back({"  " + Ellipsize(HostsLine(input, s.node), 24), "small muted"});
  }
  double y = top + 13;
  doc->Text(kLabelX, y, name, "");
  if (hosts_line) {
    y += 14;
    doc->Text(kLabelX, y, HostsLine(input, s.node), "small muted");
  }
  if (row.text_lines >= 2) {
    y += 14;
    doc->Text(kLabelX, y, StatsLine(s, is_reference), "small");
  }
}

void DrawNodeRow(const OffsetsPanelInput& input, const NodeSeries& s, const Axes& axes, const RowLayout& row,
                 double top, SvgDocument* doc) {
  doc->OpenGroup("node-row", {{{"node", std::to_string(s.node)}}});
  doc->Tooltip(RowTooltip(s));
  DrawRowLabel(input, s, row, top, doc);
  DrawOffsetPlot(s, axes, row, top, doc);
  DrawSigmaPlot(s, axes, row, top, doc);
  doc->CloseGroup();
}

// Every how many ticks to label so that at most `max_labels` show.
size_t LabelEvery(size_t ticks, size_t max_labels) {
  return ticks <= max_labels ? 1 : (ticks - 1 + max_labels - 2) / (max_labels - 1);
}

void DrawTimeAxis(const LinearScale& x, size_t label_every, double top, SvgDocument* doc) {
  const std::vector<double>& ticks = x.ticks();
  for (size_t k = 0; k < ticks.size(); ++k) {
    const double px = x(ticks[k]);
    doc->Line(px, top, px, top + 4, "rule");
    if (k % label_every == 0) {
      doc->Text(px, top + 15, FormatNumber(ticks[k], x.decimals()), "tick", Anchor::kMiddle);
    }
  }
}

// The dashed line at the traces' common origin; a note instead when it lies
// outside the solved run.
double DrawOrigin(const OffsetsPanelInput& input, const Axes& axes, double rows_top, double rows_bottom,
                  double note_y, SvgDocument* doc) {
  if (!input.trace_origin_ns) return note_y;
  const RunTimeline& timeline = *axes.timeline;
  const double seconds = timeline.SecondsSinceFirst(*input.trace_origin_ns);
  if (seconds >= axes.offset_x.lo() && seconds <= axes.offset_x.hi()) {
    for (const LinearScale* x : {&axes.offset_x, &axes.sigma_x}) {
      doc->Line((*x)(seconds), rows_top - 4, (*x)(seconds), rows_bottom, "origin");
    }
    doc->Text(axes.offset_x(seconds) + 3, rows_top - 6, "trace origin", "origin-label");
    return note_y;
  }
  const double span_s = timeline.SecondsSinceFirst(timeline.last_ns());
  const std::string where = seconds < 0 ? FormatDurationNs(-seconds * 1e9) + " before the first solved instant"
                                        : FormatDurationNs((seconds - span_s) * 1e9) + " after the last solved instant";
  doc->Text(kOffsetX0, note_y, "The traces' common origin lies " + where + ": their corrections are extrapolated (see 2).",
            "explain warn");
  return note_y + 16;
}

double DrawHeading(const OffsetsPanelInput& input, const RunTimeline& timeline, size_t nodes, size_t set_aside,
                   double top, SvgDocument* doc) {
  doc->Text(kMargin, top, "1  Clock offset of each node to the reference", "section");
  const std::string reference = input.offsets->reference.is_mean
                                    ? "the mean clock of the reference component's nodes"
                                    : "node " + std::to_string(input.offsets->reference.node) + "'s clock";
  doc->Text(kMargin, top + 20,
            "Each row is one node: its clock minus the reference clock (" + reference + ") at each solved instant, " +
                FormatCount(timeline.instants.size()) + " instants over " +
                FormatDurationNs(timeline.SecondsSinceFirst(timeline.last_ns()) * 1e9) + " for " +
                std::to_string(nodes) + (nodes == 1 ? " node." : " nodes."),
            "explain");
  doc->Text(kMargin, top + 35,
            "Left: the offset in ms, each row on its own scale (rows differ by far more than they move). Right: the "
            "solver's one-sigma uncertainty of it in ns, one scale for all rows.",
            "explain");
  std::vector<LegendItem> legend = {{LegendSwatch::kLine, "offset-line", "offset (node − reference)"},
                                    {LegendSwatch::kArea, "sigma-area", "1σ uncertainty"},
                                    {LegendSwatch::kBox, "unreachable", "unreachable: no offset solved"},
                                    {LegendSwatch::kBox, "missing", "no line for the node at that instant"}};
  if (set_aside > 0) {
    legend.push_back({LegendSwatch::kBox, "set-aside",
                      "set aside as a stalled agent's: mapped across as missed (hollow mark: its value; ▲▼ off "
                      "the row's scale)"});
  }
  legend.push_back({LegendSwatch::kDashed, "origin", "the traces' common origin"});
  return DrawLegend(legend, kMargin, top + 58, doc) + 30;
}

}  // namespace

double DrawOffsetsPanel(const OffsetsPanelInput& input, double top, SvgDocument* doc) {
  const RunTimeline timeline = BuildTimeline(*input.offsets);
  if (timeline.empty()) {
    doc->Text(kMargin, top, "1  Clock offset of each node to the reference", "section");
    doc->Text(kMargin, top + 20, "The offsets hold no solved instant: nothing to draw.", "explain warn");
    return top + 40;
  }
  const std::vector<NodeSeries> series = BuildNodeSeries(*input.offsets, timeline, input.set_aside);
  size_t set_aside = 0;
  for (const NodeSeries& s : series) set_aside += s.set_aside;
  double y = DrawHeading(input, timeline, series.size(), set_aside, top, doc);

  const double span_s = timeline.SecondsSinceFirst(timeline.last_ns());
  const LinearScale offset_x(0, span_s, kOffsetX0 + kPad, kOffsetX1 - kPad, 9, LinearScale::Domain::kExact);
  double sigma_max = 0;
  for (const NodeSeries& s : series) sigma_max = std::max(sigma_max, s.sigma_max_ns);
  const Axes axes{&timeline, offset_x, offset_x.OnPixels(kSigmaX0 + kPad, kSigmaX1 - kPad),
                  sigma_max > 0 ? sigma_max : 1};

  doc->Text(kLabelX, y, "node", "axis-label strong");
  doc->Text(kOffsetX0, y, "offset to the reference (ms)", "axis-label strong");
  doc->Text(kSigmaX0, y, "1σ uncertainty (ns)", "axis-label strong");
  y += 20;
  const RowLayout row = LayoutFor(series.size());
  const double rows_top = y;
  for (const NodeSeries& s : series) {
    DrawNodeRow(input, s, axes, row, y, doc);
    y += row.height + row.gap;
  }
  const double rows_bottom = y - row.gap;
  DrawTimeAxis(axes.offset_x, 1, rows_bottom + 4, doc);
  DrawTimeAxis(axes.sigma_x, LabelEvery(axes.sigma_x.ticks().size(), 5), rows_bottom + 4, doc);
  doc->Text((kOffsetX0 + kSigmaX1) / 2, rows_bottom + 36,
            "time on the reference clock: seconds since " + FormatUtc(timeline.first_ns()) +
                " (the first solved instant)",
            "axis-label", Anchor::kMiddle);
  return DrawOrigin(input, axes, rows_top, rows_bottom, rows_bottom + 56, doc);
}

}  // namespace chronolink::trace::report
