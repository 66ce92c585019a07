// chronolink-collect run: collect GPU clock snapshots and activity for a
// duration, until SIGINT/SIGTERM, or while a command runs; then write the
// node's XSpace (a new run directory, or appended to a host profile). A
// checkpoint is written every --checkpoint-s, atomically, so a crash or a
// kill loses at most that much.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "collector/api/collector.h"
#include "collector/api/status_json.h"
#include "collector/cli/child_command.h"
#include "collector/cli/collect_commands.h"
#include "common/atomic_output_file.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/xspace_reader.h"

namespace chronolink::collector::cli {
namespace {

std::string DefaultRunName() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y_%m_%d_%H_%M_%S", &tm);
  return buf;
}

// Writes the output: a run directory, an explicit file, or the host profile
// with our planes appended. `base` is that profile as it was before we
// wrote anything (read once: checkpoints rewrite the file in place).
bool WriteOutput(Collector& c, const RunFlags& f, const std::string& run, const trace::HostTrace* base,
                 std::string* where, DeviceExportStats* stats, std::string* error) {
  if (base == nullptr) {
    std::filesystem::path path;
    if (!c.WriteRun(f.logdir, run, &path, stats, error)) return false;
    *where = path.string();
    return true;
  }
  trace::HostTrace trace;
  trace.space->CopyFrom(*base->space);
  trace.host = base->host;
  trace.line_base_ns = base->line_base_ns;
  trace.line_base_known = base->line_base_known;
  if (!c.ExportTo(&trace, stats, error)) return false;
  *where = f.out.empty() ? f.append_to : f.out;
  return trace::WriteXSpaceFile(trace, *where, error);
}

bool WriteTruth(const Collector& c, const std::string& path, std::string* error) {
  AtomicOutputFile out;
  if (!out.Open(path, error)) return false;
  for (const GpuActivity& a : c.ActivitySnapshot()) {
    if (a.sim_true_start_ns == 0) continue;
    *out.buffer() += nlohmann::json{{"device", a.device},          {"stream", a.stream},
                                    {"correlation_id", a.correlation_id}, {"name", a.name},
                                    {"kind", std::string(ActivityKindName(a.kind))},
                                    {"true_start_ns", a.sim_true_start_ns}, {"true_end_ns", a.sim_true_end_ns}}
                         .dump() +
                     "\n";
    if (!out.MaybeFlush(error)) return false;
  }
  return out.Commit(error);
}

void PrintSummary(const CollectorStatus& s, const DeviceExportStats& stats, const std::string& where) {
  std::printf("chronolink-collect: backend %s, %zu device(s)\n", s.backend.empty() ? "none" : s.backend.c_str(),
              s.devices.size());
  if (!s.backend_message.empty()) std::printf("  no GPU data: %s\n", s.backend_message.c_str());
  for (size_t i = 0; i < s.devices.size() && i < s.maps.size(); ++i) {
    const DeviceClockMapStats& m = s.maps[i];
    std::printf("  GPU %u %s: %llu samples (%llu kept, %llu too wide), %llu segment(s), last bracket %lld ns\n",
                s.devices[i].ordinal, s.devices[i].name.c_str(), static_cast<unsigned long long>(m.samples),
                static_cast<unsigned long long>(m.accepted), static_cast<unsigned long long>(m.rejected_wide),
                static_cast<unsigned long long>(m.segments), static_cast<long long>(m.last_bracket_ns));
  }
  std::printf("  activity: %llu records, %llu dropped, %llu invalid; written %lld events, %lld unconvertible\n",
              static_cast<unsigned long long>(s.activity.records),
              static_cast<unsigned long long>(s.activity.dropped + s.activity_dropped_store),
              static_cast<unsigned long long>(s.activity.invalid), static_cast<long long>(stats.events_written),
              static_cast<long long>(stats.events_unconvertible));
  std::printf("  GPU -> host bound: mean %.0f ns, max %lld ns; clock page: %s\n", stats.mean_bound_ns,
              static_cast<long long>(stats.max_bound_ns), s.clock_page_state.c_str());
  std::printf("  wrote %s\n", where.c_str());
}

// The final status, and what the export wrote: the summary's figures.
bool WriteStatusJson(const std::string& path, const CollectorStatus& s, const DeviceExportStats& stats,
                     std::string* error) {
  nlohmann::json j = StatusJson(s);
  j["export"] = {{"events_written", stats.events_written},
                 {"events_unconvertible", stats.events_unconvertible},
                 {"events_invalid", stats.events_invalid},
                 {"launch_events_written", stats.launch_events_written},
                 {"mean_bound_ns", stats.mean_bound_ns},
                 {"max_bound_ns", stats.max_bound_ns}};
  if (!WriteFileAtomically(path, j.dump(1) + "\n", error)) {
    *error = "cannot write --status-json: " + *error;
    return false;
  }
  return true;
}

double SecondsSince(const timespec& start) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec - start.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec - start.tv_nsec);
}

struct Loop {
  pid_t child = -1;
  int child_status = 0;
  bool child_done = false;
  int signal = 0;
};

// Waits for the end: the duration, a signal, or the command. Checkpoints.
void RunLoop(Collector& c, const RunFlags& f, const std::string& run, const trace::HostTrace* base,
             const sigset_t& signals, Loop* loop) {
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  auto elapsed = [&start] { return SecondsSince(start); };
  double next_checkpoint = f.checkpoint_s, next_progress = 10, signalled_at = -1;
  bool killed = false;
  while (true) {
    const timespec tick{0, 200'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      loop->signal = sig;
      if (loop->child <= 0) return;
      kill(loop->child, sig);  // forwarded; we then wait for it, bounded below
      if (signalled_at < 0) signalled_at = elapsed();
    }
    if (loop->child > 0 && waitpid(loop->child, &loop->child_status, WNOHANG) == loop->child) {
      loop->child_done = true;
      return;
    }
    const double t = elapsed();
    if (loop->child <= 0 && f.duration_s > 0 && t >= f.duration_s) return;
    if (signalled_at >= 0 && !killed && t - signalled_at > 10) {
      spdlog::warn("the command did not end 10 s after the signal: killing it");
      kill(loop->child, SIGKILL);
      killed = true;
    }
    if (f.checkpoint_s > 0 && t >= next_checkpoint) {
      next_checkpoint += f.checkpoint_s;
      std::string where, error;
      DeviceExportStats stats;
      if (!WriteOutput(c, f, run, base, &where, &stats, &error)) spdlog::warn("checkpoint failed: {}", error);
    }
    if (t >= next_progress) {
      next_progress += 10;
      const CollectorStatus s = c.Status();
      uint64_t samples = 0;
      for (const auto& m : s.maps) samples += m.accepted;
      spdlog::info("collecting: {:.0f} s, {} samples kept, {} activity records, clock page {}", t, samples,
                   s.activity_kept, s.clock_page_state);
    }
  }
}

// The clock page's newest mapping trails the host clock by the leader's
// solve lag (7.3 s at the defaults): read on, after the stop, until one
// maps the run's stop, so that align --recorded-mapping interpolates the
// run's last seconds instead of extrapolating them. Only while the page
// gives mappings; at most wait_s; a signal ends it.
void AwaitStopMapped(Collector& c, double wait_s, const sigset_t& signals) {
  Collector::StopMapping m = c.ReadStopMapping();
  if (m.state != Collector::StopMapping::kPending) return;  // mapped, or nothing will come
  spdlog::info("waiting up to {:.0f} s for the clock page to map the run's last {:.1f} s (--page-wait-s 0: do not)",
               wait_s, static_cast<double>(m.unmapped_ns) / 1e9);
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  int64_t unmapped_ns = m.unmapped_ns;
  while (SecondsSince(start) < wait_s) {
    const timespec tick{0, 200'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::warn("signal: not waiting for the clock page");
      break;
    }
    m = c.ReadStopMapping();
    if (m.state == Collector::StopMapping::kMapped) {
      spdlog::info("clock page: the run's end is mapped (waited {:.1f} s)", SecondsSince(start));
      return;
    }
    if (m.state == Collector::StopMapping::kNever) {
      spdlog::warn("clock page {}: not waiting for it", c.Status().clock_page_state);
      break;
    }
    unmapped_ns = m.unmapped_ns;
  }
  spdlog::warn("clock page: the run's last {:.1f} s have no mapping: align --recorded-mapping extrapolates them "
               "(the leader's offsets.jsonl has them solved)",
               static_cast<double>(unmapped_ns) / 1e9);
}

}  // namespace

int RunCollect(const RunFlags& f) {
  CollectorOptions options;
  std::vector<std::string> warnings;
  std::string error;
  OptionSources sources;
  sources.config_file = f.config_file;
  sources.flags = f.options;
  if (!LoadCollectorOptions(sources, &options, &warnings, &error)) return FailCommand("run", 1, error);
  for (const std::string& w : warnings) spdlog::warn("{}", w);
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  if (f.duration_s <= 0 && f.command.empty()) {
    spdlog::info("collecting until SIGINT/SIGTERM (give --duration-s or -- COMMAND to bound it)");
  }
  std::unique_ptr<trace::HostTrace> base;
  if (!f.append_to.empty() || !f.out.empty()) {
    base = std::make_unique<trace::HostTrace>();
    if (!f.append_to.empty() && !trace::ReadXSpaceFile(f.append_to, base.get(), &error))
      return FailCommand("run", 1, error);
  }
  // Signals are taken synchronously by the loop; threads started below inherit the mask.
  sigset_t signals, old_mask;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, &old_mask);
  auto collector = Collector::Create(options, &error);
  if (!collector) return FailCommand("run", 1, error);
  if (!collector->Start(&error)) return FailCommand("run", 1, error);
  const std::string run = f.run.empty() ? DefaultRunName() : f.run;
  Loop loop;
  if (!f.command.empty()) {
    loop.child = StartChildCommand(f.command, old_mask, "chronolink-collect run", &error);
    if (loop.child < 0) return FailCommand("run", 1, error);
  }
  RunLoop(*collector, f, run, base.get(), signals, &loop);
  collector->Stop();
  if (f.page_wait_s > 0) AwaitStopMapped(*collector, f.page_wait_s, signals);
  std::string where;
  DeviceExportStats stats;
  if (!WriteOutput(*collector, f, run, base.get(), &where, &stats, &error)) return FailCommand("run", 1, error);
  const CollectorStatus status = collector->Status();
  PrintSummary(status, stats, where);
  if (!f.truth.empty() && !WriteTruth(*collector, f.truth, &error)) return FailCommand("run", 1, error);
  if (!f.status_json.empty() && !WriteStatusJson(f.status_json, status, stats, &error))
    return FailCommand("run", 1, error);
  if (loop.child_done) {
    if (WIFEXITED(loop.child_status)) return WEXITSTATUS(loop.child_status);
    return 128 + WTERMSIG(loop.child_status);
  }
  return 0;
}

}  // namespace chronolink::collector::cli
