#include "trace/report/svg_report.h"

#include <algorithm>

#include "trace/report/corrections_table.h"
#include "trace/report/offsets_panel.h"
#include "trace/report/report_json.h"
#include "trace/report/report_style.h"
#include "trace/report/svg_document.h"
#include "trace/report/svg_text.h"
#include "trace/report/validate_panel.h"

namespace chronolink::trace {
namespace {

using report::Anchor;
using report::kContentRight;
using report::kMargin;
using report::SvgDocument;

constexpr double kSectionGap = 22;

std::string TitleOf(const ReportData& data) {
  return data.title.empty() ? "chronolink clock report" : data.title;
}

// The offsets' nodes and span in one line, under the title.
std::string Subtitle(const ReportData& data) {
  const OffsetsInput& o = data.offsets;
  if (o.records.empty()) return "No solved instant in the offsets.";
  int64_t first = o.records.front().t_ns, last = first;
  size_t nodes = 0;
  for (size_t i = 0; i < o.records.size(); ++i) {
    first = std::min(first, o.records[i].t_ns);
    last = std::max(last, o.records[i].t_ns);
    if (i == 0 || o.records[i].node != o.records[i - 1].node) ++nodes;
  }
  std::string text = std::to_string(nodes) + (nodes == 1 ? " node" : " nodes") + " from " +
                     report::FormatUtc(first) + " to " + report::FormatUtc(last) + " · reference: " +
                     o.reference.ToString();
  const size_t traces = report::ArrayField(data.align_summary, "hosts").size();
  if (traces > 0) text += " · " + std::to_string(traces) + (traces == 1 ? " trace aligned" : " traces aligned");
  return text;
}

double DrawPageHeader(const ReportData& data, SvgDocument* doc) {
  doc->Text(kMargin, 42, TitleOf(data), "title");
  doc->Text(kMargin, 64, Subtitle(data), "subtitle");
  doc->Line(kMargin, 78, kContentRight, 78, "rule");
  return 108;
}

double DrawFooter(const ReportData& data, double top, SvgDocument* doc) {
  const OffsetsInput& o = data.offsets;
  doc->Line(kMargin, top, kContentRight, top, "rule");
  std::string files;
  for (const std::string& f : o.files) files += (files.empty() ? "" : ", ") + f;
  std::string source = "Offsets source: " + (files.empty() ? std::string("(not named)") : files) + " — " +
                       report::FormatCount(static_cast<int64_t>(o.lines_read)) + " lines read (" +
                       report::FormatCount(static_cast<int64_t>(o.solutions_read)) + " solutions), " +
                       report::FormatCount(static_cast<int64_t>(o.lines_replaced)) + " replaced by later ones";
  if (o.lines_skipped > 0) {
    source += ", " + report::FormatCount(static_cast<int64_t>(o.lines_skipped)) + " bad lines skipped";
  }
  double y = doc->Paragraph(kMargin, top + 18, source, 200, 14, "footer");
  const auto when = data.generated_at.value_or(std::chrono::system_clock::now());
  doc->Text(kMargin, y,
            "Generated " + report::FormatUtc(when) +
                " by chronolink-trace report. Offsets are node clock − reference clock; corrections are "
                "cluster time − host clock.",
            "footer");
  return y + 14;
}

// Records sorted by (node, t_ns), as OffsetsReader leaves them; a copy is
// sorted only when a caller built the input by hand out of order.
const OffsetsInput& SortedOffsets(const OffsetsInput& in, OffsetsInput* copy) {
  const auto before = [](const OffsetRecord& a, const OffsetRecord& b) {
    return a.node != b.node ? a.node < b.node : a.t_ns < b.t_ns;
  };
  if (std::is_sorted(in.records.begin(), in.records.end(), before)) return in;
  *copy = in;
  std::stable_sort(copy->records.begin(), copy->records.end(), before);
  return *copy;
}

report::OffsetsPanelInput PanelInput(const ReportData& data, const OffsetsInput& offsets) {
  report::OffsetsPanelInput input;
  input.offsets = &offsets;
  for (const nlohmann::json& host : report::ArrayField(data.align_summary, "hosts")) {
    const auto node = report::IntField(host, "node");
    const auto name = report::StringField(host, "host");
    if (!node || !name || *node < 0 || *node > UINT32_MAX) continue;
    input.hosts_by_node[static_cast<uint32_t>(*node)].push_back(*name);
    input.hosts_known = true;
  }
  input.trace_origin_ns = report::IntField(data.align_summary, "origin_ns");
  input.set_aside = FindStalledInstants(offsets.records, data.stalled);
  return input;
}

}  // namespace

std::string RenderSvgReport(const ReportData& data) {
  OffsetsInput sorted_copy;
  const OffsetsInput& offsets = SortedOffsets(data.offsets, &sorted_copy);
  SvgDocument doc;
  doc.Definition(report::kHatchPatterns);
  double y = DrawPageHeader(data, &doc);
  y = report::DrawOffsetsPanel(PanelInput(data, offsets), y, &doc) + kSectionGap;
  y = report::DrawCorrectionsTable(data.align_summary, y, &doc) + kSectionGap;
  y = report::DrawValidatePanel(data.validate_before, data.validate_after, y, &doc) + kSectionGap;
  y = DrawFooter(data, y, &doc);
  return doc.Finish(report::kPageWidth, y + 8, TitleOf(data), report::kStyleSheet);
}

}  // namespace chronolink::trace
