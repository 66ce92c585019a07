// chronolink-trace align: every host's trace rewritten onto cluster time with
// one common origin, written as a new TensorBoard run directory (XSpace
// inputs) or as new JSON files (Chrome/Kineto inputs).
//
// XSpace runs aligned with offsets files stream: every host's span is
// planned first (the common origin needs all of them), then each host is
// read, aligned, written and freed in turn, so memory is one host's model,
// not the run's. The plan predicts each span from the headers of the file's
// planes and lines (PredictXSpaceFileSpan: a few kilobytes per file); the
// wire-level rewrite decodes every event anyway and checks the prediction,
// and where one was wrong (or a host must go through the model) the run
// plans from every event (ScanXSpaceSpan) and starts again. Each host is first tried without a model at all:
// the wire-level rewrite (trace/wire/xspace_wire_align.h) copies its file
// through with only the times re-encoded; where it declines, the host goes
// through the model as before (--no-wire-rewrite: always). JSON inputs and --recorded-mapping (which reads the
// mapping from each parsed trace) hold every host at once.
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/atomic_output_file.h"
#include "common/quoted_text.h"
#include "tools/trace/trace_cli_common.h"
#include "tools/trace/trace_commands.h"
#include "trace/exporters/chrome_json_writer.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/run_directory.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/wire/xspace_wire_path.h"

namespace chronolink::trace::cli {
namespace {
namespace fs = std::filesystem;

// Freed arena memory kept between hosts: a 1 GB file's model is ~6 GB.
constexpr size_t kReusedBlockBytes = size_t{8} << 30;
constexpr size_t kKeptHeapBytes = size_t{1} << 30;

// The output run directory, staged: the input's run name, or one for now.
bool OpenRun(const std::string& run_name, const fs::path& logdir, StagedDirectory* staged, fs::path* run_dir,
             std::string* error) {
  const std::string run = run_name.empty() ? RunNameFor(std::chrono::system_clock::now()) : run_name;
  *run_dir = RunDirectoryPath(logdir, run);
  return staged->Open(*run_dir, error);
}

bool WriteRun(const TraceInputs& in, const fs::path& logdir, fs::path* run_dir, std::string* error) {
  StagedDirectory staged;
  if (!OpenRun(in.run_name, logdir, &staged, run_dir, error)) return false;
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

// One host's span for the plan, from the wire path (predicted from its
// headers when `predict`), or, where that declines, from the parsed file
// (which also reports a bad file as the reader does).
bool PlanSpan(const TraceInputFile& file, bool predict, XSpaceWirePath* wire, HostSpanInstants* span,
              bool* predicted, std::string* error) {
  std::string why;
  if (const auto planned = wire->SpanOf(file.path, predict, &why)) {
    *span = planned->span;
    *predicted = planned->predicted;
    return true;
  }
  *predicted = false;
  HostTrace host;
  return ReadXSpaceFile(file.path, &host, error) && CheckAlignable(host, error) && HostSpan(host, span, error);
}

// Finishes an align run: the summary on stdout, optionally as JSON too.
int Report(const AlignFlags& f, const std::vector<std::string>& notes, const HostMaps& maps,
           const AlignResult& result, const nlohmann::json& summary, const fs::path& written) {
  PrintAlignSummary(notes, maps, result);
  std::printf("wrote %s\n", written.c_str());
  if (!f.summary_json.empty()) {
    std::string error;
    if (!WriteFileAtomically(f.summary_json, summary.dump(1) + "\n", &error)) return Fail("align", error);
  }
  return 0;
}

// The streamed run's plan: the common origin from every file's span,
// predicted where `predict` (predicted[i] says which were). A predicted plan
// that fails is made again exactly, so that errors name what the exact
// spans show.
bool PlanStreamedRun(const AlignFlags& f, const TraceInputList& list, const HostMaps& maps, bool predict,
                     AlignResult* result, std::vector<bool>* predicted, std::string* error) {
  std::vector<std::string> names;
  for (const auto& file : list.files) names.push_back(file.host);
  std::vector<HostSpanInstants> spans(list.files.size());
  predicted->assign(list.files.size(), false);
  XSpaceWirePath wire;
  for (size_t i = 0; i < list.files.size(); ++i) {
    bool guess = false;
    if (!PlanSpan(list.files[i], predict, &wire, &spans[i], &guess, error)) return false;
    (*predicted)[i] = guess;
  }
  if (PlanAlignment(names, spans, maps.Pointers(), MakeAlignOptions(f.correction, maps), result, error)) return true;
  return predict && PlanStreamedRun(f, list, maps, /*predict=*/false, result, predicted, error);
}

// Each host's memory serves the next: arena blocks through the reader's
// pool, the strings' heap buffers by keeping freed heap instead of handing
// it back to the kernel (which would zero it again on the next touch).
void ReuseMemoryBetweenHosts() {
  SetXSpaceBlockReuse(kReusedBlockBytes);
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(kKeptHeapBytes));
}

// The wire-level rewrite of one host (the wire path's entry point), with
// which path it took on stderr when `log` (--timings). kAligned when the
// host is aligned and written; else the model's turn, unless *error is set.
WireAlignOutcome TryWirePath(XSpaceWirePath* wire, bool log, const TraceInputFile& file, size_t index, bool predicted,
                             const HostClockMap& map, const AlignOptions& options, AlignResult* result,
                             const fs::path& dir, std::vector<std::string>* notes, PhaseTimer* timer,
                             std::string* error) {
  std::string why;
  const auto outcome = wire->AlignFile(file.path, index, predicted, map, options, result, dir / (file.host + ".xplane.pb"),
                                       notes, [timer](const char* phase) { timer->End(phase); }, &why,
                                       error);
  if (log && error->empty()) {
    const bool aligned = outcome == WireAlignOutcome::kAligned;
    const char* path = aligned ? "wire-level rewrite"
                       : outcome == WireAlignOutcome::kMispredicted ? "its predicted span was wrong: "
                                                                     : "through the model: ";
    std::fprintf(stderr, "align: host %s: %s%s\n", ShownName(file.host).c_str(), path, aligned ? "" : why.c_str());
  }
  return outcome;
}

// One host read into the model, aligned on the plan, written and freed.
bool AlignThroughModel(const TraceInputFile& file, size_t index, const TraceInputOptions& options,
                       const HostClockMap& map, const AlignOptions& align_options, AlignResult* result,
                       const fs::path& dir, std::vector<std::string>* notes, PhaseTimer* timer, std::string* error) {
  TraceInputs one;
  if (!LoadTraceInput(file, options, &one, error)) return false;
  notes->insert(notes->end(), one.notes.begin(), one.notes.end());
  timer->End("read");
  HostTrace& host = one.hosts.front();
  if (!AlignPlannedHost(index, &host, map, align_options, result, error)) return false;
  timer->End("align");
  if (!WriteXSpaceFile(host, dir / (host.host + ".xplane.pb"), error)) return false;
  timer->End("write");
  return true;
}

// XSpace run with offsets: plan from the spans, then read, align, write and
// free one host at a time.
int RunStreamingAlign(const AlignFlags& f, const TraceInputOptions& options, const TraceInputList& list) {
  PhaseTimer timer(f.timings);
  std::string error;
  HostMaps maps;
  AlignResult result;
  std::vector<bool> predicted;
  std::vector<std::string> names;
  for (const auto& file : list.files) names.push_back(file.host);
  if (!BuildOffsetsHostMaps(f.correction, names, &maps, &error)) return Fail("align", error);
  const AlignOptions align_options = MakeAlignOptions(f.correction, maps);
  // Only the wire-level rewrite checks a prediction; the model needs exact spans.
  const bool predict = !f.no_wire_rewrite && !align_options.annotate_events;
  if (!PlanStreamedRun(f, list, maps, predict, &result, &predicted, &error)) return Fail("align", error);
  timer.End("plan");
  StagedDirectory staged;
  fs::path run_dir;
  if (!OpenRun(list.run_name, f.out, &staged, &run_dir, &error)) return Fail("align", error);
  ReuseMemoryBetweenHosts();
  std::vector<std::string> notes = list.notes;
  const bool progress = ::isatty(STDERR_FILENO) && list.files.size() > 1;
  XSpaceWirePath wire;
  for (size_t i = 0; i < list.files.size(); ++i) {
    const auto outcome = f.no_wire_rewrite ? WireAlignOutcome::kDeclined
                                           : TryWirePath(&wire, f.timings, list.files[i], i, predicted[i],
                                                         *maps.maps[i], align_options, &result, staged.path(), &notes,
                                                         &timer, &error);
    if (!error.empty()) return Fail("align", error);
    if (outcome == WireAlignOutcome::kMispredicted ||
        (outcome == WireAlignOutcome::kDeclined && predicted[i])) {  // the model needs the exact span
      if (f.timings) std::fprintf(stderr, "align: planning every host from all its events, and again\n");
      if (!PlanStreamedRun(f, list, maps, /*predict=*/false, &result, &predicted, &error)) {
        return Fail("align", error);
      }
      timer.End("plan");
      notes = list.notes;
      i = static_cast<size_t>(-1);  // from the first host again; the staged files are overwritten
      continue;
    }
    if (outcome != WireAlignOutcome::kAligned && !AlignThroughModel(list.files[i], i, options, *maps.maps[i], align_options, &result,
                                    staged.path(), &notes, &timer, &error)) {
      return Fail("align", error);
    }
    if (progress) {
      std::fprintf(stderr, "align: %s done (%zu/%zu hosts, %lld events)\n", ShownName(list.files[i].host).c_str(), i + 1,
                   list.files.size(), static_cast<long long>(result.hosts[i].events));
    }
  }
  if (!staged.Commit(&error)) return Fail("align", error);
  timer.Print();
  return Report(f, notes, maps, result, AlignSummaryJson(maps, result), run_dir);
}

}  // namespace

int RunAlign(const AlignFlags& f) {
  std::string error;
  TraceInputOptions options;
  TraceInputList list;
  if (!f.in.Options(&options, &error) || !ListTraceInputs(f.in.inputs, options, &list, &error)) {
    return Fail("align", error);
  }
  if (list.AllXSpace() && !f.correction.recorded_mapping && !f.hold_all) return RunStreamingAlign(f, options, list);
  PhaseTimer timer(f.timings);
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
  timer.Print();
  return Report(f, in.notes, maps, result, summary, written);
}

}  // namespace chronolink::trace::cli
