// chronolink-trace align: every host's trace rewritten onto cluster time with
// one common origin, written as a new TensorBoard run directory (XSpace
// inputs) or as new JSON files (Chrome/Kineto inputs).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tools/trace/trace_cli_common.h"
#include "tools/trace/trace_commands.h"
#include "trace/exporters/chrome_json_writer.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/run_directory.h"

namespace chronolink::trace::cli {
namespace {
namespace fs = std::filesystem;

struct AlignFlags {
  InputFlags in;
  CorrectionFlags correction;
  std::string out;
  std::string summary_json;
  bool timings = false;
};

bool WriteRun(const TraceInputs& in, const fs::path& logdir, fs::path* run_dir, std::string* error) {
  const std::string run = in.run_name.empty() ? RunNameFor(std::chrono::system_clock::now()) : in.run_name;
  *run_dir = RunDirectoryPath(logdir, run);
  std::error_code ec;
  fs::create_directories(run_dir->parent_path(), ec);
  StagedDirectory staged;
  if (!staged.Open(*run_dir, error)) return false;
  for (const auto& host : in.hosts) {
    if (!WriteXSpaceFile(host, staged.path() / (host.host + ".xplane.pb"), error)) return false;
  }
  return staged.Commit(error);
}

// Each JSON keeps its flavour; a top-level "chronolink" object says what was
// applied (an array-form file becomes the object form to carry it).
bool WriteJsonFiles(const TraceInputs& in, const nlohmann::json& summary, const fs::path& dir,
                    std::string* error) {
  StagedDirectory staged;
  if (!staged.Open(dir, error)) return false;
  for (size_t i = 0; i < in.hosts.size(); ++i) {
    ChromeWriteOptions options;
    options.top_level_extra["chronolink"] = {{"schema", "chronolink.trace_alignment.v1"},
                                             {"clock", "cluster"},
                                             {"origin_ns", summary["origin_ns"]},
                                             {"offsets", summary["offsets"]},
                                             {"host", summary["hosts"][i]}};
    const HostTrace& host = in.hosts[i];
    if (!WriteChromeJsonFile({&host}, staged.path() / host.source.filename(), options, error)) {
      return false;
    }
  }
  return staged.Commit(error);
}

int RunAlign(const AlignFlags& f) {
  PhaseTimer timer(f.timings);
  std::string error;
  TraceInputs in;
  if (!f.in.Load(&in, &error)) return Fail("align", error);
  timer.End("read");
  if (!in.AllXSpace() && !in.AllChromeJson()) {
    return Fail("align", "the inputs mix XSpace and JSON traces: align each kind on its own "
                         "(combine puts them together afterwards)");
  }
  HostMaps maps;
  AlignResult result;
  if (!BuildHostMaps(f.correction, in.hosts, &maps, &error) ||
      !AlignInputs(f.correction, maps, &in, &result, &error)) {
    return Fail("align", error);
  }
  timer.End("align");
  fs::path written = f.out;
  const nlohmann::json summary = AlignSummaryJson(maps, result);
  const bool ok = in.AllXSpace() ? WriteRun(in, f.out, &written, &error)
                                 : WriteJsonFiles(in, summary, f.out, &error);
  if (!ok) return Fail("align", error);
  timer.End("write");
  PrintAlignSummary(in, maps, result);
  std::printf("wrote %s\n", written.c_str());
  if (!f.summary_json.empty()) {
    std::ofstream file(f.summary_json);
    file << summary.dump(1) << "\n";
    if (!file) return Fail("align", "cannot write " + f.summary_json);
  }
  return 0;
}

}  // namespace

void AddAlignCommand(CLI::App& app, std::function<void(int)> done) {
  auto flags = std::make_shared<AlignFlags>();
  CLI::App* cmd = app.add_subcommand(
      "align", "Rewrite every host's trace onto cluster time with one common origin");
  flags->in.Add(cmd);
  flags->correction.Add(cmd, /*required=*/false);  // --offsets, or --recorded-mapping
  flags->correction.AddRecordedMapping(cmd);
  cmd->add_option("--out", flags->out,
                  "XSpace inputs: a logdir to write <out>/plugins/profile/<run>/ into; JSON inputs: a "
                  "new directory for the rewritten files")
      ->required();
  cmd->add_option("--summary-json", flags->summary_json, "also write the summary as JSON here");
  cmd->add_flag("--timings", flags->timings,
                "print each phase's wall and CPU seconds and the peak RSS to stderr (benchmarks)");
  cmd->callback([flags, done] { done(RunAlign(*flags)); });
}

}  // namespace chronolink::trace::cli
