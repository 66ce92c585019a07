// chronolink-trace: profiles of several hosts put on one timeline
// (docs/traces.md). One binary, one subcommand per job: align, combine,
// export-chrome, validate, report. This file is the command line: every
// subcommand's flags, bound here to the runners in <command>_command.cc, so
// that CLI11 (header-only and slow to compile) is compiled once.
#include <CLI/CLI.hpp>
#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <functional>
#include <memory>

#include "tools/trace/trace_commands.h"

namespace chronolink::trace::cli {
namespace {

using Done = std::function<void(int)>;

void AddInputFlags(CLI::App* app, InputFlags* f) {
  app->add_option("inputs", f->inputs,
                  "TensorBoard logdir, run directory, <host>.xplane.pb or Chrome/Kineto .json files")
      ->required();
  app->add_option("--run", f->run,
                  "run name inside a logdir (default: the latest YYYY_MM_DD_HH_MM_SS run, or the only run)");
  app->add_option("--origin", f->origins,
                  "HOST=NS: epoch ns that ts = 0 stands for in HOST's relative Chrome trace "
                  "(default: its .chronolink-origin.json sidecar)");
}

void AddCorrectionFlags(CLI::App* app, CorrectionFlags* f, bool required) {
  auto* o = app->add_option("--offsets", f->offsets,
                            "offsets.jsonl of the run (the leader's, or chronolink-solve's); "
                            "several files are merged, the later winning");
  if (required) o->required();
  app->add_option("--edges", f->edges,
                  "the nodes' edges.jsonl: stretches without a usable edge count as gaps");
  app->add_option("--timebase", f->timebases,
                  "the nodes' timebase.jsonl (the reference's too): between solved instants the correction "
                  "follows each clock's discipline (its daemon's rate changes) instead of a straight line; "
                  "needs a named reference")
      ->check(CLI::ExistingFile);
  app->add_option("--cluster-file", f->cluster_file,
                  "the agents' cluster file: nodes' \"hostname\" and addresses name hosts");
  app->add_option("--host", f->hosts, "NODE=HOST: the trace of HOST (a glob) was recorded on NODE");
  app->add_option("--host-map", f->host_map, "JSON file {\"HOST\": NODE, ...}");
  app->add_flag("--skip-bad-lines", f->skip_bad_lines,
                "skip malformed offsets lines (counted) instead of failing");
  app->add_option("--stalled-sigma-factor", f->stalled_sigma_factor,
                  "set aside a solved instant whose sigma exceeds this many times its node's around it and "
                  "its nearest ordinary neighbours' (a stalled agent's), mapping across it as across a missed "
                  "one; 0 keeps every instant (docs/trace-correction.md)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app->add_option("--max-extrapolation-s", f->max_extrapolation_s,
                  "refuse traces reaching further than this outside the solved offsets")
      ->check(CLI::PositiveNumber);
  app->add_option("--max-bound-us", f->max_bound_us,
                  "refuse a host whose events' bound would exceed this (gaps in the offsets)")
      ->check(CLI::PositiveNumber);
  app->add_flag("--no-counters", f->no_counters, "do not add the _counters_ line drawing the correction");
  app->add_flag("--annotate-events", f->annotate_events,
                "give every event a chronolink_bound_ns stat (arg): its correction's bound");
}

// --recorded-mapping, for the commands that can correct without offsets.
void AddRecordedMappingFlag(CLI::App* app, CorrectionFlags* f) {
  app->add_flag("--recorded-mapping", f->recorded_mapping,
                "without offsets files: correct each host by the clock page mapping its GPU collector "
                "recorded (chronolink-collect: every mapping its agent's page showed, docs/collector.md)");
}

// The inputs and their correction, for the commands that align: by
// offsets files (--offsets is optional) or by the recorded mapping.
void AddAlignedInputFlags(CLI::App* app, InputFlags* in, CorrectionFlags* correction) {
  AddInputFlags(app, in);
  AddCorrectionFlags(app, correction, /*required=*/false);
  AddRecordedMappingFlag(app, correction);
}

void AddAlignCommand(CLI::App& app, Done done) {
  auto flags = std::make_shared<AlignFlags>();
  CLI::App* cmd = app.add_subcommand(
      "align", "Rewrite every host's trace onto cluster time with one common origin");
  AddAlignedInputFlags(cmd, &flags->in, &flags->correction);
  cmd->add_option("--out", flags->out,
                  "XSpace inputs: a logdir to write <out>/plugins/profile/<run>/ into; JSON inputs: a "
                  "new directory for the rewritten files")
      ->required();
  cmd->add_option("--summary-json", flags->summary_json, "also write the summary as JSON here");
  cmd->add_flag("--hold-all", flags->hold_all,
                "XSpace: read every host before aligning any (as JSON inputs are) instead of one host at a "
                "time; same output, the whole run's memory");
  cmd->add_flag("--no-wire-rewrite", flags->no_wire_rewrite,
                "XSpace: align every host through the protobuf model instead of rewriting its wire bytes "
                "(same output, slower; for comparison)");
  cmd->add_flag("--timings", flags->timings,
                "print each phase's wall and CPU seconds and the peak RSS to stderr, and which path each "
                "host took (benchmarks)");
  cmd->callback([flags, done] { done(RunAlign(*flags)); });
}

void AddCombineCommand(CLI::App& app, Done done) {
  auto flags = std::make_shared<CombineFlags>();
  CLI::App* cmd = app.add_subcommand(
      "combine", "Put all hosts of a run into one XSpace or one Chrome JSON, aligned");
  AddAlignedInputFlags(cmd, &flags->in, &flags->correction);
  cmd->add_option("--out", flags->out, "output file: NAME.xplane.pb or NAME.json")->required();
  cmd->add_option("--name", flags->name, "host name of the combined XSpace (hostnames lists all)");
  cmd->footer(
      "Without --offsets the inputs must already be aligned (written by chronolink-trace align).");
  cmd->callback([flags, done] { done(RunCombine(*flags)); });
}

void AddExportChromeCommand(CLI::App& app, Done done) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export-chrome", "Write XSpace traces as Chrome trace-event JSON (Perfetto, chrome://tracing)");
  AddInputFlags(cmd, &flags->in);
  cmd->add_option("--out", flags->out, "output .json file")->required();
  cmd->callback([flags, done] { done(RunExport(*flags)); });
}

void AddValidateCommand(CLI::App& app, Done done) {
  auto flags = std::make_shared<ValidateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Check happens-before on matched collectives and transfers across hosts");
  AddAlignedInputFlags(cmd, &flags->in, &flags->correction);
  cmd->add_option("--tolerance-ns", flags->tolerance_ns,
                  "a violation must exceed this (e.g. the alignment's bound)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--strict", flags->strict,
                "exit 2 when violations remain (after alignment when --offsets is given)");
  cmd->add_option("--json", flags->json, "also write the results (before/after) as JSON here");
  cmd->footer("With --offsets the traces are checked as recorded and again after alignment.");
  cmd->callback([flags, done] { done(RunValidate(*flags)); });
}

void AddReportCommand(CLI::App& app, Done done) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Draw a run's clocks, the corrections applied and the checks in one SVG picture");
  cmd->add_option("inputs", flags->inputs, "the run's traces (optional: without them only the clocks)");
  cmd->add_option("--run", flags->run, "run name inside a logdir (default: the latest YYYY_MM_DD_HH_MM_SS run, or the only run)");
  cmd->add_option("--origin", flags->origins, "HOST=NS for relative Chrome traces (see align)");
  AddCorrectionFlags(cmd, &flags->correction, /*required=*/true);
  cmd->add_option("--out", flags->out, "the SVG file to write")->required();
  cmd->add_option("--png", flags->png, "also write a PNG (needs rsvg-convert, Debian librsvg2-bin)");
  cmd->add_option("--title", flags->title, "the picture's title");
  cmd->callback([flags, done] { done(RunReport(*flags)); });
}

}  // namespace
}  // namespace chronolink::trace::cli

// The readers report bad input in one message of their own; protobuf's own
// log lines about the same bytes would only repeat it less clearly.
void QuietProtobufLog(google::protobuf::LogLevel, const char*, int, const std::string&) {}

int main(int argc, char** argv) {
  google::protobuf::SetLogHandler(&QuietProtobufLog);
  CLI::App app{
      "chronolink-trace: rewrite per-host XSpace and Chrome/Kineto traces onto the cluster time "
      "chronolink's agents measured, and check them (docs/traces.md)"};
  app.set_version_flag("--version", "chronolink-trace 0.1.0");
  app.require_subcommand(1);
  int exit_code = 0;
  auto done = [&exit_code](int code) { exit_code = code; };
  chronolink::trace::cli::AddAlignCommand(app, done);
  chronolink::trace::cli::AddCombineCommand(app, done);
  chronolink::trace::cli::AddExportChromeCommand(app, done);
  chronolink::trace::cli::AddValidateCommand(app, done);
  chronolink::trace::cli::AddReportCommand(app, done);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
