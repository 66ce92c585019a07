#include "tools/trace/trace_cli_common.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/quoted_text.h"
#include "agent/config/agent_config.h"
#include "tools/trace/offsets_clock_map.h"
#include "trace/align/correction_record.h"
#include "trace/correct/node_clock_map.h"
#include "trace/correct/recorded_mapping.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace::cli {
namespace fs = std::filesystem;

bool InputFlags::Options(TraceInputOptions* options, std::string* error) const {
  options->run = run;
  for (const auto& o : origins) {
    std::string host;
    int64_t ns = 0;
    if (!ParseOrigin(o, &host, &ns, error)) return false;
    options->origins_ns[host] = ns;
  }
  return true;
}

bool InputFlags::Load(TraceInputs* out, std::string* error) const {
  TraceInputOptions options;
  return Options(&options, error) && LoadTraceInputs(inputs, options, out, error);
}

std::vector<const HostClockMap*> HostMaps::Pointers() const {
  std::vector<const HostClockMap*> out;
  for (const auto& m : maps) out.push_back(m.get());
  return out;
}

namespace {

bool LoadRules(const CorrectionFlags& flags, HostNodeRules* rules, std::string* error) {
  for (const auto& h : flags.hosts) {
    HostPattern p;
    if (!ParseHostPattern(h, &p, error)) return false;
    rules->explicit_hosts.push_back(p);
  }
  if (!flags.host_map.empty() && !LoadHostMapFile(flags.host_map, &rules->explicit_hosts, error)) {
    return false;
  }
  if (flags.cluster_file.empty()) return true;
  ClusterFile cluster;
  if (!LoadClusterFile(flags.cluster_file, &cluster, error)) return false;
  for (const auto& n : cluster.nodes) rules->nodes.push_back({n.id, n.address, n.hostname});
  return true;
}

}  // namespace

// Each host's own recorded clock page mappings (trace/correct/recorded_mapping.h).
bool BuildRecordedMaps(const std::vector<HostTrace>& hosts, HostMaps* out, std::string* error) {
  out->source = "clock page mappings recorded by the GPU collector";
  for (const auto& h : hosts) {
    std::string why;
    const std::string where = "host " + ShownName(h.host) + " (" + h.source.string() + ")";
    const auto recorded = ReadRecordedMappings(*h.space, &why);
    if (!recorded) {
      *error = where + ": " + why + "; give --offsets instead";
      return false;
    }
    auto correction = std::make_shared<ClusterCorrection>();
    if (!RecordedCorrection(*recorded, h.source.string(), correction.get(), &why)) {
      *error = where + ": its recorded clock page mappings make no correction: " + why;
      return false;
    }
    const NodeCorrection* node = correction->Node(recorded->node_id);
    out->matches.push_back({recorded->node_id, "recorded mapping"});
    out->maps.push_back(MakeNodeClockMap(std::move(correction), node));
  }
  return true;
}

bool BuildOffsetsHostMaps(const CorrectionFlags& flags, const std::vector<std::string>& names, HostMaps* out,
                          std::string* error) {
  if (flags.offsets.empty()) {
    *error = "give the run's offsets.jsonl (--offsets FILES), or --recorded-mapping for files a GPU "
             "collector wrote while its agent ran";
    return false;
  }
  HostNodeRules rules;
  if (!LoadRules(flags, &rules, error)) return false;
  if (!MapHostsToNodes(names, rules, &out->matches, error)) return false;
  OffsetsMaps offsets;
  if (!LoadOffsetsMaps(flags.offsets, flags.edges, flags.timebases, flags.skip_bad_lines,
                       CorrectionOptions{.stalled_sigma_factor = flags.stalled_sigma_factor}, &offsets, error)) {
    return false;
  }
  out->source = offsets.Describe();
  out->warnings = offsets.warnings;
  for (size_t i = 0; i < names.size(); ++i) {
    auto map = offsets.ForNode(out->matches[i].node, error);
    if (!map) {
      *error = "host " + ShownName(names[i]) + " (node " + std::to_string(out->matches[i].node) + ", " +
               out->matches[i].rule + "): " + *error;
      return false;
    }
    out->maps.push_back(std::move(map));
  }
  return true;
}

bool BuildHostMaps(const CorrectionFlags& flags, const std::vector<HostTrace>& hosts, HostMaps* out,
                   std::string* error) {
  if (flags.recorded_mapping) {
    if (!flags.offsets.empty()) {
      *error = "--recorded-mapping and --offsets: choose one (offsets files are the better source)";
      return false;
    }
    return BuildRecordedMaps(hosts, out, error);
  }
  std::vector<std::string> names;
  for (const auto& h : hosts) names.push_back(h.host);
  return BuildOffsetsHostMaps(flags, names, out, error);
}

bool MarkAligned(TraceInputs* in, std::string* error) {
  for (const auto& h : in->hosts) {
    if (FindPlane(*h.space, kCorrectionPlane) == nullptr) {
      *error = "host " + ShownName(h.host) + " (" + h.source.string() +
               ") is not aligned: give --offsets, or inputs written by chronolink-trace align";
      return false;
    }
  }
  for (auto& h : in->hosts) h.clock = TraceClock::kClusterTime;
  return true;
}

std::vector<HostTrace*> MutableHosts(TraceInputs* in) {
  std::vector<HostTrace*> out;
  for (auto& h : in->hosts) out.push_back(&h);
  return out;
}

std::vector<const HostTrace*> ConstHosts(const TraceInputs& in) {
  std::vector<const HostTrace*> out;
  for (const auto& h : in.hosts) out.push_back(&h);
  return out;
}

AlignOptions MakeAlignOptions(const CorrectionFlags& flags, const HostMaps& maps) {
  AlignOptions options;
  options.max_extrapolation_ns = static_cast<int64_t>(flags.max_extrapolation_s * 1e9);
  options.max_bound_ns = flags.max_bound_us * 1e3;
  options.counters_line = !flags.no_counters;
  options.annotate_events = flags.annotate_events;
  options.offsets_source = maps.source;
  return options;
}

bool AlignInputs(const CorrectionFlags& flags, const HostMaps& maps, TraceInputs* in,
                 AlignResult* result, std::string* error) {
  return AlignHosts(MutableHosts(in), maps.Pointers(), MakeAlignOptions(flags, maps), result, error);
}

void PrintAlignSummary(const std::vector<std::string>& notes, const HostMaps& maps, const AlignResult& result) {
  std::printf("offsets: %s\n", maps.source.c_str());
  std::printf("common origin: %lld ns (cluster time)\n", static_cast<long long>(result.origin_ns));
  std::printf("%-20s %5s %12s %14s %14s %12s %10s %10s\n", "host", "node", "events",
              "correction@1st", "correction@end", "bound max", "in gaps", "extrapol.");
  for (size_t i = 0; i < result.hosts.size(); ++i) {
    const HostAlignment& h = result.hosts[i];
    std::printf("%-20s %5u %12lld %11.3f ms %11.3f ms %9.0f ns %10lld %10lld\n", ShownName(h.host).c_str(),
                maps.matches[i].node, static_cast<long long>(h.events), h.correction_first_ns / 1e6,
                h.correction_last_ns / 1e6, h.uncertainty_max_ns,
                static_cast<long long>(h.events_gap), static_cast<long long>(h.events_extrapolated));
  }
  for (size_t i = 0; i < result.hosts.size(); ++i) {
    if (result.hosts[i].events_extrapolated > 0) {
      std::printf("note: %s: events reach %.3f s outside the solved offsets (extrapolated on the drift)\n",
                  ShownName(result.hosts[i].host).c_str(), result.hosts[i].max_beyond_span_ns / 1e9);
    }
  }
  for (const auto& note : notes) std::printf("note: %s\n", note.c_str());
  for (const auto& w : maps.warnings) std::printf("warning: %s\n", w.c_str());
}

nlohmann::json AlignSummaryJson(const HostMaps& maps, const AlignResult& result) {
  nlohmann::json hosts = nlohmann::json::array();
  for (size_t i = 0; i < result.hosts.size(); ++i) {
    const HostAlignment& h = result.hosts[i];
    hosts.push_back({{"host", h.host}, {"node", maps.matches[i].node}, {"rule", maps.matches[i].rule},
                     {"correction", h.map_description}, {"events", h.events},
                     {"events_in_gaps", h.events_gap}, {"events_extrapolated", h.events_extrapolated},
                     {"max_beyond_span_ns", h.max_beyond_span_ns},
                     {"correction_first_ns", h.correction_first_ns},
                     {"correction_last_ns", h.correction_last_ns},
                     {"uncertainty_min_ns", h.uncertainty_min_ns},
                     {"uncertainty_mean_ns", h.uncertainty_mean_ns},
                     {"uncertainty_max_ns", h.uncertainty_max_ns}});
  }
  return {{"schema", "chronolink.align_summary.v1"}, {"offsets", maps.source},
          {"origin_ns", result.origin_ns}, {"hosts", hosts}};
}

bool StagedDirectory::Open(const fs::path& final_dir, std::string* error) {
  std::error_code ec;
  final_ = final_dir;
  if (fs::exists(final_, ec)) {
    *error = final_.string() + " already exists: outputs are never written over";
    return false;
  }
  partial_ = final_.string() + ".partial-" + std::to_string(getpid());
  for (fs::path p = final_.parent_path(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    first_created_parent_ = p;
    if (p == p.parent_path()) break;
  }
  fs::create_directories(partial_, ec);
  if (ec) {
    *error = "cannot create " + partial_.string() + ": " + ec.message();
    return false;
  }
  return true;
}

bool StagedDirectory::Commit(std::string* error) {
  std::error_code ec;
  fs::rename(partial_, final_, ec);
  if (ec) {
    *error = "cannot rename " + partial_.string() + " to " + final_.string() + ": " + ec.message();
    return false;
  }
  committed_ = true;
  return true;
}

StagedDirectory::~StagedDirectory() {
  if (committed_ || partial_.empty()) return;
  std::error_code ec;
  fs::remove_all(partial_, ec);
  if (first_created_parent_.empty()) return;
  // The parents Open created, deepest first, each only while empty.
  for (fs::path p = partial_.parent_path(); fs::remove(p, ec); p = p.parent_path()) {
    if (p == first_created_parent_) break;
  }
}

namespace {

// CPU seconds (user + system) this process has used so far, and its peak RSS.
double ProcessCpuSeconds(long* maxrss_kb) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  *maxrss_kb = usage.ru_maxrss;
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace

PhaseTimer::PhaseTimer(bool enabled) : enabled_(enabled), wall_start_(std::chrono::steady_clock::now()) {
  long ignored = 0;
  if (enabled_) cpu_start_s_ = ProcessCpuSeconds(&ignored);
}

void PhaseTimer::End(const char* phase) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  long maxrss_kb = 0;
  const double cpu_s = ProcessCpuSeconds(&maxrss_kb);
  auto it = std::find_if(phases_.begin(), phases_.end(), [&](const Phase& p) { return p.name == phase; });
  if (it == phases_.end()) it = phases_.insert(phases_.end(), Phase{phase});
  it->wall_s += std::chrono::duration<double>(now - wall_start_).count();
  it->cpu_s += cpu_s - cpu_start_s_;
  it->maxrss_kb = maxrss_kb;
  wall_start_ = now;
  cpu_start_s_ = cpu_s;
}

void PhaseTimer::Print() const {
  for (const Phase& p : phases_) {
    std::fprintf(stderr, "timing: phase=%s wall_s=%.6f cpu_s=%.6f maxrss_kb=%ld\n", p.name.c_str(), p.wall_s,
                 p.cpu_s, p.maxrss_kb);
  }
}

int Fail(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "chronolink-trace %s: %s\n", command.c_str(), message.c_str());
  return 1;
}

}  // namespace chronolink::trace::cli
