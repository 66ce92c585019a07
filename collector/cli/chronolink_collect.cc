// chronolink-collect: GPU timelines onto the node's host clock, with a
// measured bound (docs/collector.md). One binary, one subcommand per job:
// devices, run, import-rocprof, host-clocks, each run by its own file
// (collect_commands.h). This file is the command line: every subcommand's
// flags, bound here so that CLI11, header-only and slow to compile, is
// compiled once.
#include <CLI/CLI.hpp>
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <string>

#include "collector/cli/collect_commands.h"
#include "collector/config/collector_options.h"

namespace chronolink::collector::cli {
namespace {

// Each subcommand reports its exit code through `done` when it has run.
using Done = std::function<void(int)>;

// --config and a flag for every collector option, writing what was given
// into *flags (by file key).
void AddCollectorFlags(CLI::App* app, OptionTexts* flags, std::string* config_file) {
  app->add_option("--config", *config_file,
                  "JSON options file (default: $CHRONOLINK_COLLECTOR_CONFIG); flags and CHRONOLINK_* "
                  "variables override it")
      ->group("General");
  for (const OptionFlag& o : CollectorOptionFlags()) {
    const std::string key = o.key;
    if (o.is_switch) {
      app->add_flag_callback(o.name, [flags, key] { (*flags)[key] = "true"; }, o.help)->group(o.group);
    } else {
      app->add_option_function<std::string>(o.name, [flags, key](const std::string& v) { (*flags)[key] = v; },
                                            o.help)
          ->type_name(o.metavar)
          ->group(o.group);
    }
  }
}

void AddDevicesCommand(CLI::App& app, Done done) {
  auto f = std::make_shared<DevicesFlags>();
  CLI::App* cmd = app.add_subcommand(
      "devices", "List the GPU backends, whether their libraries load, and their devices (exit 3: no real GPU)");
  cmd->add_flag("--json", f->json, "print JSON");
  cmd->add_option("--simulated-settings", f->settings, "settings for the simulated backend's listing (k=v ...)");
  cmd->callback([f, done] { done(RunDevices(*f)); });
}

void AddRunCommand(CLI::App& app, Done done) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Collect GPU clock snapshots and activity, then write the node's XSpace. Ends after "
             "--duration-s, on SIGINT/SIGTERM, or when the command after -- exits (its exit code is ours)");
  AddCollectorFlags(cmd, &f->options, &f->config_file);
  cmd->add_option("--duration-s", f->duration_s, "collect this long (default: until a signal or the command ends)")
      ->check(CLI::Range(0.0, 1e7))->group("Output");
  cmd->add_option("--logdir", f->logdir, "write <logdir>/plugins/profile/<run>/<host>.xplane.pb (default: .)")
      ->group("Output");
  cmd->add_option("--run", f->run, "run directory name (default: now, YYYY_MM_DD_HH_MM_SS, UTC)")->group("Output");
  cmd->add_option("--append-to", f->append_to,
                  "append the device planes to this host profile (.xplane.pb); rewritten in place unless --out")
      ->check(CLI::ExistingFile)->group("Output");
  cmd->add_option("--out", f->out, "write the XSpace to this file instead of a run directory")->group("Output");
  cmd->add_option("--checkpoint-s", f->checkpoint_s, "rewrite the output this often while collecting; 0: only at the end (default: 30)")
      ->check(CLI::Range(0.0, 1e6))->group("Output");
  cmd->add_option("--page-wait-s", f->page_wait_s,
                  "after the stop, wait up to this long for the agent's clock page to map the run's last "
                  "seconds (it trails by the solve's lag), so that they are interpolated, not extrapolated; "
                  "0: do not wait (default: 15)")
      ->check(CLI::Range(0.0, 600.0))->group("Output");
  cmd->add_option("--status-json", f->status_json, "also write the final status as JSON here")->group("Output");
  cmd->add_option("--truth", f->truth, "simulated backend: write each record's true times (JSONL) here, for tests")
      ->group("Output");
  cmd->add_option("command", f->command, "the command to run while collecting (after --)");
  cmd->callback([f, done] { done(RunCollect(*f)); });
}

void AddImportRocprofCommand(CLI::App& app, Done done) {
  auto f = std::make_shared<ImportRocprofFlags>();
  CLI::App* cmd = app.add_subcommand(
      "import-rocprof",
      "Import rocprof / rocprofv3 kernel traces (results.csv, kernel_trace.csv, memory_copy_trace.csv, "
      "results.json) as XSpace device planes, their host-clock stamps re-timed to REALTIME with a bound "
      "(docs/rocprof-import.md)");
  // Files are checked by the readers (exit 1 with their own message), not by CLI11.
  cmd->add_option("files", f->files, "the profiler's trace files (CSV or JSON)");
  cmd->add_option("--host-clocks", f->host_clocks,
                  "the host-clocks recording made while the profiler ran (chronolink-collect host-clocks)");
  cmd->add_option("--clock-domain", f->clock_domain,
                  "the clock the profiler stamped: boottime (rocprof, rocprofv3), monotonic, monotonic_raw, "
                  "realtime (default: boottime)");
  cmd->add_option("--logdir", f->logdir,
                  "write <logdir>/plugins/profile/<run>/<host>.xplane.pb (default: .)");
  cmd->add_option("--run", f->run, "run directory name (default: now, YYYY_MM_DD_HH_MM_SS, UTC)");
  cmd->add_option("--host", f->host, "host name of the file (default: the recording's host)");
  cmd->add_flag(
      "--allow-other-boot", f->allow_other_boot,
      "accept a host-clocks recording from another boot than this one (importing elsewhere or after a "
      "reboot: the trace must come from the recording's boot)");
  cmd->add_flag("--force", f->force, "replace an existing <host>.xplane.pb");
  cmd->add_option("--max-extrapolation-ms", f->max_extrapolation_ms,
                  "place events at most this far after the recording's last sample (default: 1000)")
      ->check(CLI::Range(0.0, 600000.0));
  cmd->callback([f, done] { done(RunImportRocprof(*f)); });
}

void AddHostClocksCommand(CLI::App& app, Done done) {
  auto f = std::make_shared<HostClocksFlags>();
  CLI::App* cmd = app.add_subcommand(
      "host-clocks",
      "Record BOOTTIME, MONOTONIC and MONOTONIC_RAW against REALTIME (JSONL) while a command runs, for a "
      "duration, or until SIGINT/SIGTERM; import-rocprof re-times a profiler's stamps with it");
  cmd->add_option("--out", f->out, "the JSONL file to write (required)");
  cmd->add_option("--period-ms", f->period_ms, "sampling period in ms (default: 100)")
      ->check(CLI::Range(1.0, 60000.0));
  cmd->add_option("--duration-s", f->duration_s,
                  "record this long (default: until a signal or the command ends)")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--reads", f->reads,
                  "bracketed reads per domain per sample; the tightest is kept (default: 7)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--max-bracket-us", f->max_bracket_us,
                  "refuse a sample whose tightest bracket is wider (default: 50, at most 1000)")
      ->check(CLI::Range(0.001, 1000.0));
  cmd->add_option("command", f->command, "the command to run while recording (after --)");
  cmd->callback([f, done] { done(RunHostClocks(*f)); });
}

}  // namespace
}  // namespace chronolink::collector::cli

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
