// chronolink-trace validate: happens-before checks on matched collectives and
// transfers across hosts (docs/validate.md), on the traces as recorded and,
// with --offsets, after alignment, so the two can be compared.
#include <cstdio>

#include "common/atomic_output_file.h"
#include "tools/trace/trace_cli_common.h"
#include "tools/trace/trace_commands.h"
#include "trace/validate/validate.h"
#include "trace/validate/validate_report.h"

namespace chronolink::trace::cli {
namespace {

constexpr int kExitViolations = 2;

ValidationResult Check(const TraceInputs& in, const ValidateFlags& f, const char* title) {
  ValidateOptions options;
  options.tolerance_ns = f.tolerance_ns;
  ValidationResult r = ValidateTraces(ConstHosts(in), options);
  ValidateReportOptions text;
  text.title = title;
  std::fputs(ValidationText(r, text).c_str(), stdout);
  return r;
}

}  // namespace

int RunValidate(const ValidateFlags& f) {
  std::string error;
  TraceInputs in;
  if (!f.in.Load(&in, &error)) return Fail("validate", error);
  nlohmann::json out = nlohmann::json::object();
  std::string ignored;
  const bool already_aligned = MarkAligned(&in, &ignored);
  ValidationResult last;
  if (already_aligned || !f.correction.Given()) {
    last = Check(in, f, already_aligned ? "validate (aligned traces)" : "validate (as recorded)");
    out[already_aligned ? "after" : "before"] = ValidationJson(last);
  } else {
    const ValidationResult before = Check(in, f, "validate (before align: each host on its own clock)");
    out["before"] = ValidationJson(before);
    HostMaps maps;
    AlignResult aligned;
    if (!BuildHostMaps(f.correction, in.hosts, &maps, &error) ||
        !AlignInputs(f.correction, maps, &in, &aligned, &error)) {
      return Fail("validate", error);
    }
    std::printf("\n");
    last = Check(in, f, "validate (after align: cluster time)");
    out["after"] = ValidationJson(last);
    out["align"] = AlignSummaryJson(maps, aligned);
    std::printf("\nviolations: %lld before, %lld after; collective start skew p99: %s before, %s after\n",
                static_cast<long long>(before.violations_total), static_cast<long long>(last.violations_total),
                FormatDurationPs(before.start_skew.p99_ps).c_str(),
                FormatDurationPs(last.start_skew.p99_ps).c_str());
  }
  if (!f.json.empty()) {
    std::string error;
    if (!WriteFileAtomically(f.json, out.dump(1) + "\n", &error)) return Fail("validate", error);
  }
  return f.strict && last.violations_total > 0 ? kExitViolations : 0;
}

}  // namespace chronolink::trace::cli
