// chronolink-collect host-clocks: records BOOTTIME, MONOTONIC and
// MONOTONIC_RAW against REALTIME (collector/importers/host_clock_domains.h)
// every --period-ms while a command runs (`-- rocprofv3 ... app`), for
// --duration-s, or until SIGINT/SIGTERM; import-rocprof later re-times the
// profiler's BOOTTIME stamps with it. Samples before the command starts and
// after it ends, so its stamps lie between samples. Every line is written
// whole as it is taken: a recording cut short is complete up to its last
// line. With a command, a first SIGINT/SIGTERM is forwarded to it and the
// recording goes on until it exits (killed 10 s later); a second one ends
// the recording at once. The exit code is the command's.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "clock/clock_reader.h"
#include "collector/cli/child_command.h"
#include "collector/cli/collect_commands.h"
#include "collector/importers/host_clock_domains.h"

namespace chronolink::collector::cli {
namespace {

constexpr int64_t kKillAfterSignalNs = 10'000'000'000;

// The recording: a recorder, its file, and what it saw.
class Recording {
 public:
  Recording(const HostClocksFlags& f, HostClockRecorderOptions o) : recorder_(o), flags_(f) {}

  bool Open(std::string* error) {
    HostClocksHeader h;
    h.host = ThisHostName("unknown");
    if (!CurrentBootId(&h.boot_id, error)) return false;
    h.started_realtime_ns = ReadClockNs(CLOCK_REALTIME);
    h.period_ns = static_cast<int64_t>(flags_.period_ms * 1e6);
    h.granularity_ns = recorder_.granularity_ns();
    host_ = h.host;
    return writer_.Open(flags_.out, h, error);
  }

  bool Sample(std::string* error) {
    for (const HostClockSample& s : recorder_.Measure()) {
      if (!writer_.Write(s, error)) return false;
      brackets_.push_back(s.bracket_ns);
    }
    return true;
  }

  bool Close(std::string* error) { return writer_.Close(error); }

  void PrintSummary(double seconds) {
    std::sort(brackets_.begin(), brackets_.end());
    const int64_t median = brackets_.empty() ? -1 : brackets_[brackets_.size() / 2];
    std::printf(
        "chronolink-collect host-clocks: %llu samples (boottime, monotonic, monotonic_raw) over %.1f s on "
        "%s\n",
        static_cast<unsigned long long>(writer_.samples_written()), seconds, host_.c_str());
    std::printf(
        "  %llu of %llu measurements refused (every bracket wider than %.0f us); bracket median %lld ns, "
        "max %lld ns; read granularity %lld ns\n",
        static_cast<unsigned long long>(recorder_.rejected()),
        static_cast<unsigned long long>(recorder_.measured()), flags_.max_bracket_us,
        static_cast<long long>(median), static_cast<long long>(brackets_.empty() ? -1 : brackets_.back()),
        static_cast<long long>(recorder_.granularity_ns()));
    std::printf("  wrote %s\n", flags_.out.c_str());
  }

 private:
  HostClockRecorder recorder_;
  HostClocksWriter writer_;
  const HostClocksFlags& flags_;
  std::string host_;
  std::vector<int64_t> brackets_;
};

struct LoopState {
  pid_t child = -1;
  int child_status = 0;
  bool child_done = false;
  int signals = 0;
  int64_t signalled_at_ns = -1;  // CLOCK_MONOTONIC
  bool killed = false;
};

// Waits one period for a signal or the child; true when the recording ends.
bool WaitPeriod(const HostClocksFlags& f, const sigset_t& signals, int64_t start_ns, LoopState* s) {
  const int64_t period_ns = static_cast<int64_t>(f.period_ms * 1e6);
  const timespec wait{period_ns / 1'000'000'000, period_ns % 1'000'000'000};
  const int sig = sigtimedwait(&signals, nullptr, &wait);
  if (sig == SIGINT || sig == SIGTERM) {
    if (++s->signals > 1 || s->child <= 0) return true;
    kill(s->child, sig);  // forwarded; recorded on until it exits
    s->signalled_at_ns = ReadClockNs(CLOCK_MONOTONIC);
  }
  if (s->child > 0 && waitpid(s->child, &s->child_status, WNOHANG) == s->child) {
    s->child_done = true;
    return true;
  }
  const int64_t now = ReadClockNs(CLOCK_MONOTONIC);
  if (s->child <= 0 && f.duration_s > 0 && now - start_ns >= static_cast<int64_t>(f.duration_s * 1e9))
    return true;
  if (s->signalled_at_ns >= 0 && !s->killed && now - s->signalled_at_ns > kKillAfterSignalNs) {
    std::fprintf(
        stderr,
        "chronolink-collect host-clocks: the command did not end 10 s after the signal: killing it\n");
    kill(s->child, SIGKILL);
    s->killed = true;
  }
  return false;
}

}  // namespace

int RunHostClocks(const HostClocksFlags& f) {
  if (f.out.empty()) return FailCommand("host-clocks", 2, "--out is required");
  if (f.duration_s > 0 && !f.command.empty())
    return FailCommand("host-clocks", 2, "give --duration-s or a command, not both");
  HostClockRecorderOptions o;
  o.reads_per_sample = f.reads;
  o.max_bracket_ns = static_cast<int64_t>(f.max_bracket_us * 1e3);
  Recording rec(f, o);
  std::string error;
  sigset_t signals, old_mask;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, &old_mask);
  if (!rec.Open(&error) || !rec.Sample(&error)) return FailCommand("host-clocks", 1, error);
  LoopState state;
  if (!f.command.empty()) {
    state.child = StartChildCommand(f.command, old_mask, "chronolink-collect host-clocks", &error);
    if (state.child < 0) return FailCommand("host-clocks", 1, error);
  } else if (f.duration_s <= 0) {
    std::fprintf(stderr, "chronolink-collect host-clocks: recording until SIGINT/SIGTERM\n");
  }
  const int64_t start = ReadClockNs(CLOCK_MONOTONIC);
  bool ended = false;
  while (!ended) {
    ended = WaitPeriod(f, signals, start, &state);
    if (!rec.Sample(&error)) {
      if (state.child > 0 && !state.child_done) kill(state.child, SIGTERM);
      return FailCommand("host-clocks", 1, error);
    }
  }
  if (!rec.Close(&error)) return FailCommand("host-clocks", 1, error);
  rec.PrintSummary(static_cast<double>(ReadClockNs(CLOCK_MONOTONIC) - start) / 1e9);
  if (!state.child_done) return 0;
  if (WIFEXITED(state.child_status)) return WEXITSTATUS(state.child_status);
  return 128 + WTERMSIG(state.child_status);
}

}  // namespace chronolink::collector::cli
