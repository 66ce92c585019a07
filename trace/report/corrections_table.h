// Section 2 of the report: the correction chronolink-trace align applied to
// each trace, one table row per host from its summary
// (chronolink.align_summary.v1, tools/trace/align_command.cc): the node it
// was mapped to and by which rule, the correction (cluster − host clock) at
// the trace's first and last instant and its change in between, the bound
// on the corrected times, and how many events fell in gaps or beyond the
// solved span (highlighted: their times are less certain). A note replaces
// the table when no summary was given. Not thread-safe (draws into one
// document).
#pragma once

#include <nlohmann/json.hpp>

#include "trace/report/svg_document.h"

namespace chronolink::trace::report {

// Draws the section with its heading at `top`; returns the y below it.
double DrawCorrectionsTable(const nlohmann::json& align_summary, double top, SvgDocument* doc);

}  // namespace chronolink::trace::report
