// The chronolink-trace subcommands, one file each: what each takes and the
// function that runs it, returning its exit code. chronolink_trace.cc binds
// these flags to the command line, so that CLI11 (header-only, about 10 s of
// compile in every file that includes it) is compiled once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/trace/trace_cli_common.h"

namespace chronolink::trace::cli {

struct AlignFlags {  // align_command.cc
  InputFlags in;
  CorrectionFlags correction;
  std::string out;
  std::string summary_json;
  bool timings = false;
  bool hold_all = false;
  bool no_wire_rewrite = false;
};
int RunAlign(const AlignFlags& f);

struct CombineFlags {  // combine_command.cc
  InputFlags in;
  CorrectionFlags correction;
  std::string out;
  std::string name = "combined";
};
int RunCombine(const CombineFlags& f);

struct ExportFlags {  // export_chrome_command.cc
  InputFlags in;
  std::string out;
};
int RunExport(const ExportFlags& f);

struct ValidateFlags {  // validate_command.cc
  InputFlags in;
  CorrectionFlags correction;
  int64_t tolerance_ns = 0;
  bool strict = false;
  std::string json;
};
int RunValidate(const ValidateFlags& f);

struct ReportFlags {  // report_command.cc
  std::vector<std::string> inputs;
  std::vector<std::string> origins;
  std::string run;
  CorrectionFlags correction;
  std::string out;
  std::string png;
  std::string title = "chronolink: clocks and traces of one run";
};
int RunReport(const ReportFlags& f);

}  // namespace chronolink::trace::cli
