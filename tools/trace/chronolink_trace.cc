// chronolink-trace: profiles of several hosts put on one timeline
// (docs/traces.md). One binary, one subcommand per job: align, combine,
// export-chrome, validate, report.
#include <CLI/CLI.hpp>
#include <google/protobuf/stubs/logging.h>

#include <cstdio>

#include "tools/trace/trace_commands.h"

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
