// Section 1 of the report: one row per node with its offset to the
// reference over the run (ms, the row's own scale: offsets are tens of ms
// apart while a row's drift moves it by µs to ms) and, on the right, the
// solver's 1σ uncertainty (ns, one scale for every row, so nodes compare).
// Instants where the node was unreachable are hatched red (with a red tick
// under the frame, visible even when the stretch is one pixel wide);
// instants of the run for which the offsets hold no line for the node are
// hatched grey. Lines break at both. Instants the trace correction sets aside
// as a stalled agent's (stalled_instants.h) are hatched amber with a hollow
// mark at their value (a triangle at the frame's edge when it lies off the
// row's scale, which leaves them out). A dashed line marks the traces' common
// origin when it falls inside the run. Not thread-safe (draws into one
// document).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trace/correct/offsets_file.h"
#include "trace/report/svg_document.h"

namespace chronolink::trace::report {

struct OffsetsPanelInput {
  const OffsetsInput* offsets = nullptr;
  // The traces each node recorded (from align's summary); empty when unknown.
  std::map<uint32_t, std::vector<std::string>> hosts_by_node;
  bool hosts_known = false;
  std::optional<int64_t> trace_origin_ns;  // reference (cluster) clock
  // One flag per record of `offsets`: set aside as a stalled agent's
  // (FindStalledInstants); empty: none.
  std::vector<bool> set_aside;
};

// Draws the section with its heading at `top`; returns the y below it.
double DrawOffsetsPanel(const OffsetsPanelInput& input, double top, SvgDocument* doc);

}  // namespace chronolink::trace::report
