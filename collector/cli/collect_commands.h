// The chronolink-collect subcommands, one file each. Each registers itself on
// the app and reports its exit code through `done` when it has run.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace chronolink::collector::cli {

void AddDevicesCommand(CLI::App& app, std::function<void(int)> done);       // devices_command.cc
void AddRunCommand(CLI::App& app, std::function<void(int)> done);           // run_command.cc
void AddImportRocprofCommand(CLI::App& app, std::function<void(int)> done); // import_rocprof_command.cc
void AddHostClocksCommand(CLI::App& app, std::function<void(int)> done);    // host_clocks_command.cc

}  // namespace chronolink::collector::cli
