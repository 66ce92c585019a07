// chronolink-collect: GPU timelines onto the node's host clock, with a
// measured bound (docs/collector.md). One binary, one subcommand per job:
// devices, run, import-rocprof, host-clocks.
#include <CLI/CLI.hpp>
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include "collector/cli/collect_commands.h"

// Readers report bad input in one message of their own.
void QuietProtobufLog(google::protobuf::LogLevel, const char*, int, const std::string&) {}

int main(int argc, char** argv) {
  google::protobuf::SetLogHandler(&QuietProtobufLog);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  CLI::App app{"chronolink-collect: link GPU timelines to the host clock with a measured bound and write "
               "them as XSpace device planes that chronolink-trace aligns (docs/collector.md)"};
  app.set_version_flag("--version", "chronolink-collect 0.1.0");
  app.require_subcommand(1);
  int exit_code = 0;
  auto done = [&exit_code](int code) { exit_code = code; };
  chronolink::collector::cli::AddDevicesCommand(app, done);
  chronolink::collector::cli::AddRunCommand(app, done);
  chronolink::collector::cli::AddImportRocprofCommand(app, done);
  chronolink::collector::cli::AddHostClocksCommand(app, done);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
