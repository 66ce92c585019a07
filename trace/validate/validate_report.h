// Presents a ValidationResult: one screen of text for the terminal (totals,
// a table per family, the skew figures, the worst violations, notes and
// warnings) and a JSON object for the CLI's --json output and the SVG
// report (docs/validate.md, "Output"). Pure formatting; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "trace/validate/validation_result.h"

namespace chronolink::trace {

struct ValidateReportOptions {
  size_t listed_violations = 10;      // in the text, worst first
  size_t json_violations = 1000;      // in the JSON (violations_total counts them all)
  std::string title = "validate";     // first word of the text, e.g. "validate (before align)"
};

std::string ValidationText(const ValidationResult& result, const ValidateReportOptions& options = {});
nlohmann::json ValidationJson(const ValidationResult& result, const ValidateReportOptions& options = {});

// "0 ns", "850 ps", "12.3 us", "4.57 ms", "1.20 s": a duration for people.
std::string FormatDurationPs(int64_t ps);

}  // namespace chronolink::trace
