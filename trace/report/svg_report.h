// `chronolink-trace report`'s picture: one self-contained SVG of a run's
// clocks, the corrections applied to its traces and the collective checks
// before and after alignment (docs/report.md says how to read it):
//   1. per node, its offset to the reference over the run (ms, each row its
//      own scale) beside the solver's 1σ uncertainty (ns, one scale for all
//      rows), unreachable and missing instants hatched, and the instants the
//      trace correction sets aside as a stalled agent's drawn apart;
//   2. a table of each trace's correction (chronolink.align_summary.v1);
//   3. validate's results before vs after alignment (chronolink.validate/1),
//      or a note saying they were not given.
// No scripts, no external files or fonts; every text from an input file is
// escaped. Long runs are decimated per pixel column keeping the minimum and
// maximum, so 100k instants × 64 nodes stay a few MB and spikes survive.
// Pure function of its input (the generation time aside); thread-safe.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "trace/correct/offsets_file.h"
#include "trace/correct/stalled_instants.h"

namespace chronolink::trace {

struct ReportData {
  OffsetsInput offsets;
  // chronolink-trace align --summary-json; null or without "hosts": the
  // corrections table is replaced by a note.
  nlohmann::json align_summary;
  // chronolink-trace validate --json on the traces before and after align.
  std::optional<nlohmann::json> validate_before, validate_after;
  // The rule the trace correction sets stalled instants aside by (align's
  // --stalled-sigma-factor): section 1 marks the same instants.
  StalledInstantOptions stalled;
  std::string title;  // empty: "chronolink clock report"
  // Printed in the footer; unset: now. Set it for reproducible output.
  std::optional<std::chrono::system_clock::time_point> generated_at;
};

std::string RenderSvgReport(const ReportData& data);

}  // namespace chronolink::trace
