// chronolink-collect import-rocprof: rocprof / rocprofv3 kernel traces
// (CSV or JSON, collector/importers/rocprof_*.h) -> the host's XSpace at
// <logdir>/plugins/profile/<run>/<host>.xplane.pb, their host-clock stamps
// (BOOTTIME unless told otherwise) re-timed to REALTIME through a
// host-clocks recording made on the same boot (`host-clocks -- rocprofv3
// ...`), every event with that conversion's bound; then `chronolink-trace
// align` puts it on cluster time like any host file. Exit 0 on success, 1
// for input it cannot use (a file that is not a trace, a recording from
// another boot, events outside the recording), 2 for a bad command line.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "collector/cli/collect_commands.h"
#include "collector/importers/host_clocks_loader.h"
#include "collector/importers/rocprof_import.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/run_directory.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::collector::cli {
namespace {

// The conversion: a recorded domain's track, or REALTIME's identity.
struct Conversion {
  HostClocksFile file;
  RealtimeIdentity identity;
  const HostDomainConversion* use = nullptr;
};

int LoadConversion(const ImportRocprofFlags& f, HostClockDomain domain, Conversion* c) {
  if (domain == HostClockDomain::kRealtime && f.host_clocks.empty()) {
    c->use = &c->identity;
    return 0;
  }
  if (f.host_clocks.empty()) {
    return FailCommand("import-rocprof", 2,
                       "--host-clocks is required for --clock-domain " + f.clock_domain +
                           " (record one with `chronolink-collect host-clocks --out FILE -- rocprofv3 ...`)");
  }
  HostClocksLoadOptions o;
  o.track.max_extrapolation_ns = static_cast<int64_t>(f.max_extrapolation_ms * 1e6);
  std::string error;
  if (!f.allow_other_boot && !CurrentBootId(&o.expected_boot_id, &error))
    return FailCommand("import-rocprof", 1, error);
  if (!LoadHostClocksFile(f.host_clocks, o, &c->file, &error)) {
    if (error.find("another boot") != std::string::npos) {
      error +=
          "; if the trace was recorded on that boot too (imported elsewhere or after a reboot), "
          "give --allow-other-boot";
    }
    return FailCommand("import-rocprof", 1, error);
  }
  if (domain == HostClockDomain::kRealtime) {
    c->use = &c->identity;
    return 0;
  }
  c->use = c->file.track(domain);
  if (c->use == nullptr)
    return FailCommand("import-rocprof", 1, f.host_clocks + " has no " + f.clock_domain + " samples");
  return 0;
}

std::string JoinNumbers(const std::vector<uint64_t>& v) {
  std::string out;
  for (uint64_t n : v) out += (out.empty() ? "" : ", ") + std::to_string(n);
  return out;
}

void PrintSummary(const ImportRocprofFlags& f, const Conversion& c, const RocprofImportResult& r,
                  const std::string& path) {
  std::printf("chronolink-collect import-rocprof: %zu file(s), %s -> realtime", r.files.size(),
              f.clock_domain.c_str());
  if (const auto* t = dynamic_cast<const HostDomainTrack*>(c.use)) {
    std::printf(" from %s (host %s, %zu samples over %.1f s, %llu step(s))", f.host_clocks.c_str(),
                c.file.header.host.c_str(), t->size(),
                static_cast<double>(t->last_ref_ns() - t->first_ref_ns()) / 1e9,
                static_cast<unsigned long long>(t->steps()));
  }
  std::printf("\n");
  if (c.file.bad_lines > 0) {
    std::printf("  host-clocks: %llu bad line(s) skipped (%s)\n",
                static_cast<unsigned long long>(c.file.bad_lines), c.file.first_bad_reason.c_str());
  }
  for (const RocprofFileResult& fr : r.files) {
    const RocprofReadResult& x = fr.read;
    std::printf("  %s (%s): %llu %ss, %llu imported", fr.path.filename().c_str(),
                std::string(RocprofFormatName(x.format)).c_str(), static_cast<unsigned long long>(x.rows),
                x.unit == "record" ? "record" : "row", static_cast<unsigned long long>(x.accepted));
    if (x.skipped > 0)
      std::printf(", %llu host-to-host copies skipped", static_cast<unsigned long long>(x.skipped));
    if (x.bad_rows > 0) {
      std::printf(", %llu refused (%s %s; %s)", static_cast<unsigned long long>(x.bad_rows), x.unit.c_str(),
                  JoinNumbers(x.bad_line_numbers).c_str(), x.first_bad_reason.c_str());
    }
    std::printf("\n");
  }
  for (const auto& [agent, ordinal] : r.agent_ordinals) {
    std::printf("  agent %llu -> /device:GPU:%u\n", static_cast<unsigned long long>(agent), ordinal);
  }
  const DeviceExportStats& e = r.exported;
  std::printf(
      "  events: %lld written, %lld not convertible (outside the recording or across a clock step), "
      "%lld invalid\n",
      static_cast<long long>(e.events_written), static_cast<long long>(e.events_unconvertible),
      static_cast<long long>(e.events_invalid));
  std::printf("  %s -> realtime bound: mean %.0f ns, max %lld ns\n", f.clock_domain.c_str(), e.mean_bound_ns,
              static_cast<long long>(e.max_bound_ns));
  std::printf("  wrote %s\n", path.c_str());
}

}  // namespace

int RunImportRocprof(const ImportRocprofFlags& f) {
  if (f.files.empty()) return FailCommand("import-rocprof", 2, "give the trace files to import (see --help)");
  HostClockDomain domain{};
  if (!ParseHostClockDomain(f.clock_domain, &domain)) {
    return FailCommand(
        "import-rocprof", 2,
        "--clock-domain must be boottime, monotonic, monotonic_raw or realtime, not '" + f.clock_domain + "'");
  }
  Conversion conv;
  if (const int rc = LoadConversion(f, domain, &conv); rc != 0) return rc;
  std::string host = f.host.empty() ? conv.file.header.host : f.host;
  if (host.empty()) host = ThisHostName("");
  if (host.empty() || host.find('/') != std::string::npos)
    return FailCommand("import-rocprof", 2, "give --host NAME (one path component)");
  const std::string run = f.run.empty() ? trace::RunNameFor(std::chrono::system_clock::now()) : f.run;
  if (run.find('/') != std::string::npos || run == "." || run == "..")
    return FailCommand("import-rocprof", 2, "--run must be one path component");
  const std::filesystem::path dir = trace::RunDirectoryPath(f.logdir, run);
  const std::filesystem::path path = dir / (host + ".xplane.pb");
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !f.force)
    return FailCommand("import-rocprof", 1, path.string() + " exists (give --force to replace it)");

  trace::HostTrace trace;
  trace.host = host;
  trace::SetHostnames(trace.space, {host});
  std::vector<std::filesystem::path> files(f.files.begin(), f.files.end());
  RocprofImportResult result;
  std::string error;
  if (!ImportRocprof(files, *conv.use, RocprofReadOptions{}, &trace, &result, &error))
    return FailCommand("import-rocprof", 1, error);
  if (result.exported.events_written == 0) {
    return FailCommand("import-rocprof", 1,
                       "no event could be placed on REALTIME" +
                           (result.exported.events_unconvertible > 0
                                ? std::string(": the trace's times lie outside the host-clocks recording (was it "
                                              "recorded while the profiler ran, with the right --clock-domain?)")
                                : std::string(": the files hold no kernel records")));
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) return FailCommand("import-rocprof", 1, "cannot create " + dir.string() + ": " + ec.message());
  if (!trace::WriteXSpaceFile(trace, path, &error)) return FailCommand("import-rocprof", 1, error);
  PrintSummary(f, conv, result, path.string());
  return 0;
}

}  // namespace chronolink::collector::cli
