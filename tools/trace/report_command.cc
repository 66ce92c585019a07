// chronolink-trace report: one SVG picture of a run — each node's offset and
// uncertainty over time, the correction applied to each trace, and the
// validate results before and after alignment (docs/report.md).
#include <cstdio>

#include "common/atomic_output_file.h"
#include "tools/trace/offsets_clock_map.h"
#include "tools/trace/trace_cli_common.h"
#include "tools/trace/trace_commands.h"
#include "trace/report/png_convert.h"
#include "trace/report/svg_report.h"
#include "trace/validate/validate.h"
#include "trace/validate/validate_report.h"

namespace chronolink::trace::cli {
namespace {

struct ReportFlags {
  std::vector<std::string> inputs;
  std::vector<std::string> origins;
  std::string run;
  CorrectionFlags correction;
  std::string out;
  std::string png;
  std::string title = "chronolink: clocks and traces of one run";
};

// Aligns the traces (when given) to fill the correction table and the
// before/after validate panels.
bool AddTraces(const ReportFlags& f, ReportData* data, std::string* error) {
  InputFlags in_flags{f.inputs, f.run, f.origins};
  TraceInputs in;
  if (!in_flags.Load(&in, error)) return false;
  data->validate_before = ValidationJson(ValidateTraces(ConstHosts(in), ValidateOptions{}));
  HostMaps maps;
  AlignResult result;
  if (!BuildHostMaps(f.correction, in.hosts, &maps, error) ||
      !AlignInputs(f.correction, maps, &in, &result, error)) {
    return false;
  }
  data->align_summary = AlignSummaryJson(maps, result);
  data->validate_after = ValidationJson(ValidateTraces(ConstHosts(in), ValidateOptions{}));
  return true;
}

int RunReport(const ReportFlags& f) {
  std::string error;
  ReportData data;
  data.title = f.title;
  OffsetsReadOptions read;
  read.skip_bad_lines = f.correction.skip_bad_lines;
  if (!ReadOffsetsFiles(f.correction.offsets, read, &data.offsets, &error)) return Fail("report", error);
  if (!f.inputs.empty() && !AddTraces(f, &data, &error)) return Fail("report", error);
  const std::string svg = RenderSvgReport(data);
  // Not through "<out>.tmp": a link planted there was followed.
  if (!WriteFileAtomically(f.out, svg, &error)) return Fail("report", error);
  std::printf("wrote %s\n", f.out.c_str());
  if (!f.png.empty()) {
    if (!ConvertSvgToPng(f.out, f.png, 1.0, &error)) return Fail("report", error);
    std::printf("wrote %s\n", f.png.c_str());
  }
  return 0;
}

}  // namespace

void AddReportCommand(CLI::App& app, std::function<void(int)> done) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Draw a run's clocks, the corrections applied and the checks in one SVG picture");
  cmd->add_option("inputs", flags->inputs, "the run's traces (optional: without them only the clocks)");
  cmd->add_option("--run", flags->run, "run name inside a logdir (default: the latest YYYY_MM_DD_HH_MM_SS run, or the only run)");
  cmd->add_option("--origin", flags->origins, "HOST=NS for relative Chrome traces (see align)");
  flags->correction.Add(cmd, /*required=*/true);
  cmd->add_option("--out", flags->out, "the SVG file to write")->required();
  cmd->add_option("--png", flags->png, "also write a PNG (needs rsvg-convert, Debian librsvg2-bin)");
  cmd->add_option("--title", flags->title, "the picture's title");
  cmd->callback([flags, done] { done(RunReport(*flags)); });
}

}  // namespace chronolink::trace::cli
