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

}  // namespace

int RunReport(const ReportFlags& f) {
  std::string error;
  ReportData data;
  data.title = f.title;
  data.stalled.sigma_factor = f.correction.stalled_sigma_factor;
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

}  // namespace chronolink::trace::cli
