// chronolink-trace combine: all hosts of a run in one XSpace (planes renamed
// per host) or one Chrome JSON (a process group per host), on cluster time.
#include <cstdio>

#include "tools/trace/trace_cli_common.h"
#include "tools/trace/trace_commands.h"
#include "trace/combine/xspace_combiner.h"
#include "trace/exporters/chrome_json_writer.h"
#include "trace/exporters/xspace_writer.h"

namespace chronolink::trace::cli {
int RunCombine(const CombineFlags& f) {
  std::string error;
  TraceInputs in;
  if (!f.in.Load(&in, &error)) return Fail("combine", error);
  if (f.correction.Given()) {
    HostMaps maps;
    AlignResult result;
    if (!BuildHostMaps(f.correction, in.hosts, &maps, &error) ||
        !AlignInputs(f.correction, maps, &in, &result, &error)) {
      return Fail("combine", error);
    }
    PrintAlignSummary(in.notes, maps, result);
  } else if (!MarkAligned(&in, &error)) {
    return Fail("combine", error);
  }
  const bool json = f.out.ends_with(".json");
  if (!json && !f.out.ends_with(".xplane.pb")) {
    return Fail("combine", "--out must end in .xplane.pb (one XSpace) or .json (Chrome trace events)");
  }
  if (json) {
    ChromeWriteOptions options;
    if (!WriteChromeJsonFile(ConstHosts(in), f.out, options, &error)) return Fail("combine", error);
  } else {
    HostTrace combined;
    if (!CombineXSpace(ConstHosts(in), f.name, &combined, &error) ||
        !WriteXSpaceFile(combined, f.out, &error)) {
      return Fail("combine", error);
    }
  }
  std::printf("wrote %s (%zu hosts)\n", f.out.c_str(), in.hosts.size());
  return 0;
}

}  // namespace chronolink::trace::cli
