// Section 3 of the report: what `chronolink-trace validate` found on the
// traces before and after alignment (chronolink.validate/1,
// trace/validate/validate_report.h): the violation counts side by side, a
// paired bar chart of the collective start and end skew percentiles on a
// log scale (skews shrink by orders of magnitude), a per-family table and
// the worst violations. Either side may be absent; with neither, a note
// says so. Not thread-safe (draws into one document).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "trace/report/svg_document.h"

namespace chronolink::trace::report {

// Draws the section with its heading at `top`; returns the y below it.
double DrawValidatePanel(const std::optional<nlohmann::json>& before, const std::optional<nlohmann::json>& after,
                         double top, SvgDocument* doc);

}  // namespace chronolink::trace::report
