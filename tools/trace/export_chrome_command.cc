// chronolink-trace export-chrome: XSpace -> Chrome trace-event JSON that
// Perfetto UI and chrome://tracing open (host and device planes as their own
// processes, stats as args). Several hosts go into one file, a process group
// each.
#include <cstdio>

#include "tools/trace/trace_cli_common.h"
#include "tools/trace/trace_commands.h"
#include "trace/exporters/chrome_json_writer.h"

namespace chronolink::trace::cli {
namespace {

struct ExportFlags {
  InputFlags in;
  std::string out;
};

int RunExport(const ExportFlags& f) {
  std::string error;
  TraceInputs in;
  if (!f.in.Load(&in, &error)) return Fail("export-chrome", error);
  // Aligned runs carry their correction record: they are on cluster time.
  std::string ignored;
  MarkAligned(&in, &ignored);
  if (!WriteChromeJsonFile(ConstHosts(in), f.out, ChromeWriteOptions{}, &error)) {
    return Fail("export-chrome", error);
  }
  std::printf("wrote %s (%zu hosts)\n", f.out.c_str(), in.hosts.size());
  return 0;
}

}  // namespace

void AddExportChromeCommand(CLI::App& app, std::function<void(int)> done) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "export-chrome", "Write XSpace traces as Chrome trace-event JSON (Perfetto, chrome://tracing)");
  flags->in.Add(cmd);
  cmd->add_option("--out", flags->out, "output .json file")->required();
  cmd->callback([flags, done] { done(RunExport(*flags)); });
}

}  // namespace chronolink::trace::cli
