// The chronolink-trace subcommands, one file each. Each registers itself on
// the app and reports its exit code through `done` when it has run.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace chronolink::trace::cli {

void AddAlignCommand(CLI::App& app, std::function<void(int)> done);
void AddCombineCommand(CLI::App& app, std::function<void(int)> done);
void AddExportChromeCommand(CLI::App& app, std::function<void(int)> done);
void AddValidateCommand(CLI::App& app, std::function<void(int)> done);
void AddReportCommand(CLI::App& app, std::function<void(int)> done);

}  // namespace chronolink::trace::cli
