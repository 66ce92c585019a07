// chronolink-trace export-chrome: XSpace -> Chrome trace-event JSON that
// Perfetto UI and chrome://tracing open (host and device planes as their own
// processes, stats as args). Several hosts go into one file, a process group
// each.
#include <cstdio>

#include "tools/trace/trace_cli_common.h"
#include "tools/trace/trace_commands.h"
#include "trace/exporters/chrome_json_writer.h"

namespace chronolink::trace::cli {
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

}  // namespace chronolink::trace::cli
