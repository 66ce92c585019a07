#include "trace/report/corrections_table.h"

#include <optional>
#include <string>
#include <vector>

#include "trace/report/report_json.h"
#include "trace/report/report_style.h"
#include "trace/report/svg_text.h"

namespace chronolink::trace::report {
namespace {

using nlohmann::json;

constexpr size_t kMaxRows = 256;
constexpr double kRowHeight = 34;
constexpr double kHeaderHeight = 34;

struct Column {
  const char* header1;
  const char* header2;
  double x;
  Anchor anchor;
};

// Where each column's text is anchored; right-aligned columns hold numbers.
enum ColumnIndex { kHost, kNode, kRule, kEvents, kFirst, kLast, kChange, kBound, kGaps, kExtrapolated, kColumns };
constexpr Column kTable[kColumns] = {
    {"trace (host)", "correction model", kMargin + 8, Anchor::kStart},
    {"node", "", 330, Anchor::kStart},
    {"matched by", "", 372, Anchor::kStart},
    {"events", "re-timed", 572, Anchor::kEnd},
    {"correction at", "trace start", 700, Anchor::kEnd},
    {"correction at", "trace end", 828, Anchor::kEnd},
    {"change over", "the trace", 920, Anchor::kEnd},
    {"bound", "min / mean / max", 1096, Anchor::kEnd},
    {"events", "in gaps", 1160, Anchor::kEnd},
    {"events", "extrapolated", kContentRight - 4, Anchor::kEnd},
};

std::string Or(const std::optional<std::string>& text) { return text ? *text : "–"; }

std::string Duration(const json& host, const char* key) {
  const auto v = NumberField(host, key);
  return v ? FormatDurationNs(*v) : "–";
}

std::string Correction(const json& host, const char* key) {
  const auto v = NumberField(host, key);
  return v ? FormatMsPrecise(*v) : "–";
}

std::string Change(const json& host) {
  const auto first = NumberField(host, "correction_first_ns");
  const auto last = NumberField(host, "correction_last_ns");
  if (!first || !last) return "–";
  const std::string text = FormatDurationNs(*last - *first);
  return *last > *first ? "+" + text : text;
}

std::string Count(const json& host, const char* key) {
  const auto v = IntField(host, key);
  return v ? FormatCount(*v) : "–";
}

void DrawHeader(double top, SvgDocument* doc) {
  doc->Rect(kMargin, top, kContentRight - kMargin, kHeaderHeight, "header-band");
  for (const Column& c : kTable) {
    doc->Text(c.x, top + 14, c.header1, "small strong", c.anchor);
    if (*c.header2 != '\0') doc->Text(c.x, top + 28, c.header2, "small muted", c.anchor);
  }
}

void DrawRow(const json& host, size_t index, double top, SvgDocument* doc) {
  const std::string name = Or(StringField(host, "host"));
  doc->OpenGroup("host-row", {{{"host", name}}});
  if (index % 2 == 1) doc->Rect(kMargin, top, kContentRight - kMargin, kRowHeight, "row-band");
  const double y = top + 14;
  const auto cell = [&](ColumnIndex column, const std::string& text, const char* css) {
    doc->Text(kTable[column].x, y, text, css, kTable[column].anchor);
  };
  const std::string model = Or(StringField(host, "correction"));
  doc->Tooltip(name + ": " + model);
  cell(kHost, Ellipsize(name, 36), "strong");
  doc->Text(kTable[kHost].x, y + 14, Ellipsize(model, 46), "small muted");
  const auto node = IntField(host, "node");
  cell(kNode, node ? std::to_string(*node) : "–", "");
  cell(kRule, Ellipsize(Or(StringField(host, "rule")), 28), "small");
  cell(kEvents, Count(host, "events"), "");
  cell(kFirst, Correction(host, "correction_first_ns"), "");
  cell(kLast, Correction(host, "correction_last_ns"), "");
  cell(kChange, Change(host), "");
  cell(kBound,
       Duration(host, "uncertainty_min_ns") + " / " + Duration(host, "uncertainty_mean_ns") + " / " +
           Duration(host, "uncertainty_max_ns"),
       "");
  const int64_t gaps = IntField(host, "events_in_gaps").value_or(0);
  const int64_t extrapolated = IntField(host, "events_extrapolated").value_or(0);
  cell(kGaps, Count(host, "events_in_gaps"), gaps > 0 ? "warn" : "");
  cell(kExtrapolated, Count(host, "events_extrapolated"), extrapolated > 0 ? "warn" : "");
  if (extrapolated > 0) {
    doc->Text(kTable[kExtrapolated].x, y + 14, "up to " + Duration(host, "max_beyond_span_ns") + " out",
              "small muted", Anchor::kEnd);
  }
  doc->CloseGroup();
}

double DrawExplanation(double top, SvgDocument* doc) {
  doc->Text(kMargin, top, "2  Correction applied to each trace", "section");
  doc->Text(kMargin, top + 20,
            "Correction = cluster time − the host's clock, applied to every event at its own instant, so it changes "
            "along a trace as the node's clock drifts.",
            "explain");
  doc->Text(kMargin, top + 35,
            "Bound: how far a corrected time may be from the truth (solved sigmas plus interpolation terms). "
            "Events in gaps or extrapolated beyond the solved span have wider bounds.",
            "explain");
  return top + 50;
}

}  // namespace

double DrawCorrectionsTable(const json& align_summary, double top, SvgDocument* doc) {
  double y = DrawExplanation(top, doc);
  const json& hosts = ArrayField(align_summary, "hosts");
  if (hosts.empty()) {
    doc->Text(kMargin, y + 6,
              "Not given: no alignment summary (chronolink-trace align --summary-json) was passed to the report.",
              "explain warn");
    return y + 30;
  }
  DrawHeader(y, doc);
  y += kHeaderHeight;
  for (size_t i = 0; i < hosts.size() && i < kMaxRows; ++i) {
    DrawRow(hosts[i], i, y, doc);
    y += kRowHeight;
  }
  doc->Line(kMargin, y, kContentRight, y, "rule");
  y += 16;
  if (hosts.size() > kMaxRows) {
    doc->Text(kMargin, y, "… and " + FormatCount(static_cast<int64_t>(hosts.size() - kMaxRows)) + " more traces",
              "explain");
    y += 16;
  }
  std::string provenance = "Corrections from " + Or(StringField(align_summary, "offsets"));
  if (const auto origin = IntField(align_summary, "origin_ns")) {
    provenance += "; the aligned traces' common origin is " + FormatUtc(*origin) + " (cluster time).";
  }
  return doc->Paragraph(kMargin, y, provenance, 200, 14, "explain small") + 10;
}

}  // namespace chronolink::trace::report
