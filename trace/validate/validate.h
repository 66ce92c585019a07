// `chronolink-trace validate` as a library call: recognise the collectives
// in every host's trace, match them across hosts, check happens-before and
// measure skew (docs/validate.md). All traces must be on one clock: run it
// once on the original traces (each host on its own clock: violations show
// the clock error) and once on the aligned ones. Reads the traces only;
// one call per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "trace/model/host_trace.h"
#include "trace/validate/validation_result.h"

namespace chronolink::trace {

struct ValidateOptions {
  // A violation must exceed this (ns, >= 0; negative counts as 0): the CLI
  // may pass the alignment's own uncertainty.
  int64_t tolerance_ns = 0;
  // ranks[i]: trace i's rank in the job, for matching sends with receives;
  // when absent or nullopt, what the trace says (TraceRank), else unknown.
  std::vector<std::optional<int64_t>> ranks;
};

ValidationResult ValidateTraces(const std::vector<const HostTrace*>& traces, const ValidateOptions& options);

}  // namespace chronolink::trace
