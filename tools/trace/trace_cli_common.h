// Options and steps the chronolink-trace subcommands share: reading the
// inputs, building each host's clock map from the offsets and the host ->
// node rules, and writing outputs so that nothing half-written is left where
// an output should be. The subcommands (one file each) only wire these up;
// chronolink_trace.cc binds the flags to the command line.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "trace/align/host_node_map.h"
#include "trace/align/trace_aligner.h"
#include "trace/correct/host_clock_map.h"
#include "trace/importers/trace_inputs.h"

namespace chronolink::trace::cli {

// Inputs: what to read.
struct InputFlags {
  std::vector<std::string> inputs;
  std::string run;
  std::vector<std::string> origins;  // HOST=NS

  bool Options(TraceInputOptions* options, std::string* error) const;
  bool Load(TraceInputs* out, std::string* error) const;
};

// Corrections: offsets, optional edges, and host -> node rules.
struct CorrectionFlags {
  std::vector<std::string> offsets;
  std::vector<std::string> edges;
  std::vector<std::string> timebases;  // the nodes' timebase.jsonl
  std::string cluster_file;
  std::vector<std::string> hosts;  // NODE=PATTERN
  std::string host_map;
  bool skip_bad_lines = false;
  double stalled_sigma_factor = 8.0;  // CorrectionOptions::stalled_sigma_factor
  double max_extrapolation_s = 600;
  double max_bound_us = 100;
  bool no_counters = false;
  bool annotate_events = false;
  bool recorded_mapping = false;  // each host's own clock page record instead of offsets

  bool Given() const { return !offsets.empty() || recorded_mapping; }
};

// Each host's clock map, in the order of `hosts`, and how it was found.
struct HostMaps {
  std::vector<std::unique_ptr<HostClockMap>> maps;
  std::vector<HostNodeMatch> matches;
  std::string source;  // "offsets.jsonl (3 files, 1234 instants, reference mean)"
  std::vector<std::string> warnings;  // from reading the offsets
  std::vector<const HostClockMap*> Pointers() const;
};

bool BuildHostMaps(const CorrectionFlags& flags, const std::vector<HostTrace>& hosts, HostMaps* out,
                   std::string* error);
// From offsets files and the host -> node rules alone (not --recorded-mapping,
// which reads each host's trace): for hosts named before they are read.
bool BuildOffsetsHostMaps(const CorrectionFlags& flags, const std::vector<std::string>& hosts, HostMaps* out,
                          std::string* error);

// Aligns `in` in place with `maps` and prints the one-screen summary.
AlignOptions MakeAlignOptions(const CorrectionFlags& flags, const HostMaps& maps);
bool AlignInputs(const CorrectionFlags& flags, const HostMaps& maps, TraceInputs* in,
                 AlignResult* result, std::string* error);
void PrintAlignSummary(const std::vector<std::string>& notes, const HostMaps& maps, const AlignResult& result);
// The same as JSON (schema chronolink.align_summary.v1), for --summary-json and the report.
nlohmann::json AlignSummaryJson(const HostMaps& maps, const AlignResult& result);

// Inputs chronolink-trace align wrote carry their correction record: they
// are on cluster time. False (with why) unless every host has one.
bool MarkAligned(TraceInputs* in, std::string* error);

std::vector<HostTrace*> MutableHosts(TraceInputs* in);
std::vector<const HostTrace*> ConstHosts(const TraceInputs& in);

// Writes every file of a directory output into `<final>.partial-<pid>` and
// renames it to `final` at the end; on failure or destruction before
// Commit() the partial directory is removed, and so are the missing parent
// directories Open created. `final` must not exist.
class StagedDirectory {
 public:
  bool Open(const std::filesystem::path& final_dir, std::string* error);
  const std::filesystem::path& path() const { return partial_; }
  bool Commit(std::string* error);
  ~StagedDirectory();

 private:
  std::filesystem::path final_, partial_;
  std::filesystem::path first_created_parent_;  // empty: every parent existed
  bool committed_ = false;
};

// `align --timings`: each phase's wall and CPU seconds and the process's
// peak RSS at its end, one stderr line per phase
// (`timing: phase=read wall_s=1.234567 cpu_s=1.200000 maxrss_kb=123456`),
// read by bench/trace_align_bench.py. A phase ended several times (read,
// align, write of each host in turn) is summed and printed once, in the
// order phases first ended, by Print(). Disabled, it does nothing.
class PhaseTimer {
 public:
  explicit PhaseTimer(bool enabled);
  // Ends the phase begun at the previous End (or at construction).
  void End(const char* phase);
  void Print() const;

 private:
  struct Phase {
    std::string name;
    double wall_s = 0, cpu_s = 0;
    long maxrss_kb = 0;
  };
  bool enabled_;
  std::chrono::steady_clock::time_point wall_start_;
  double cpu_start_s_ = 0;
  std::vector<Phase> phases_;
};

// Prints "chronolink-trace <cmd>: <message>" to stderr; returns exit code 1.
int Fail(const std::string& command, const std::string& message);

}  // namespace chronolink::trace::cli
