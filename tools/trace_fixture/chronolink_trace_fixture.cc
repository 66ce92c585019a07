// chronolink-trace-fixture: writes a multi-host XLA-like profile run with
// skewed host clocks and a truth file (tools/trace_fixture/xspace_fixture.h,
// docs/xspace.md "Fixture generator").
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/trace_fixture/xspace_fixture.h"
#include "trace/importers/xspace/run_directory.h"

namespace {

using chronolink::trace::FixtureHost;

// "HOST=OFFSET_NS,DRIFT_PPM[,T0_NS]" -> FixtureHost (t0 defaults to the start).
bool ParseClock(const std::string& text, int64_t default_t0, FixtureHost* out, std::string* error) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    *error = "--clock '" + text + "': expected HOST=OFFSET_NS,DRIFT_PPM[,T0_NS]";
    return false;
  }
  out->host = text.substr(0, eq);
  long long offset = 0;
  double drift = 0;
  long long t0 = default_t0;
  char extra = 0;
  const std::string rest = text.substr(eq + 1);
  const int n = std::sscanf(rest.c_str(), "%lld,%lf,%lld%c", &offset, &drift, &t0, &extra);
  if (n < 2 || n > 3) {
    *error = "--clock '" + text + "': expected HOST=OFFSET_NS,DRIFT_PPM[,T0_NS]";
    return false;
  }
  out->clock = {offset, drift, t0};
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  chronolink::trace::XSpaceFixtureOptions options;
  std::string logdir;
  std::string run;
  std::string truth;
  std::vector<std::string> clocks;
  CLI::App app{
      "Writes a multi-host XLA-like profile run, <logdir>/plugins/profile/<run>/<host>.xplane.pb,\n"
      "each host stamped by its own skewed virtual clock\n"
      "(v = t + offset_ns + llround(drift_ppm*1e-6*(t - t0_ns))), and a truth JSON with every\n"
      "host's clock, so the true time of any event is known. Collectives of one step start on\n"
      "all hosts at the same true instant (+ jitter) and end after every start."};
  app.add_option("--logdir", logdir, "TensorBoard log directory to write into")->required();
  app.add_option("--run", run, "run name (default: the true start, YYYY_MM_DD_HH_MM_SS UTC)");
  app.add_option("--truth", truth, "truth JSON path (default <logdir>/chronolink_fixture_truth.json)");
  app.add_option("--hosts", options.hosts, "hosts (clocks drawn from --seed)")->capture_default_str();
  app.add_option("--gpus", options.gpus_per_host, "GPUs per host (0..48)")->capture_default_str();
  app.add_option("--steps", options.steps, "training steps")->capture_default_str();
  app.add_option("--kernels", options.kernels_per_step, "compute kernels per GPU per step")
      ->capture_default_str();
  app.add_option("--step-ns", options.step_ns, "step length, true ns")->capture_default_str();
  app.add_option("--jitter-ns", options.collective_jitter_ns,
                 "spread of one collective's starts (and ends) across hosts")
      ->capture_default_str();
  app.add_option("--true-start-ns", options.true_start_ns, "profile start, true epoch ns")
      ->capture_default_str();
  app.add_option("--max-offset-ns", options.max_offset_ns, "drawn offsets lie in +-this")
      ->capture_default_str();
  app.add_option("--max-drift-ppm", options.max_drift_ppm, "drawn drifts lie in +-this")
      ->capture_default_str();
  app.add_option("--seed", options.seed, "seed for clocks and jitter")->capture_default_str();
  app.add_option("--host-prefix", options.host_prefix, "drawn hosts are <prefix><index>")
      ->capture_default_str();
  app.add_option("--clock", clocks,
                 "explicit host clock HOST=OFFSET_NS,DRIFT_PPM[,T0_NS] (repeat; replaces --hosts)");
  std::vector<std::string> clock_states;
  app.add_option("--clock-state", clock_states,
                 "host clock HOST=FILE: a test bed clock state file's REALTIME (wander, a daemon's "
                 "discipline; docs/testbed.md), as that node's agent reads it (repeat; replaces --hosts)");
  app.add_flag("--absolute", options.absolute_line_timestamps,
               "absolute epoch line timestamps instead of relative to profile_start_time");
  CLI11_PARSE(app, argc, argv);

  std::string error;
  for (const auto& text : clocks) {
    FixtureHost host;
    if (!ParseClock(text, options.true_start_ns, &host, &error)) {
      std::fprintf(stderr, "chronolink-trace-fixture: %s\n", error.c_str());
      return 2;
    }
    options.clocks.push_back(host);
  }
  for (const auto& text : clock_states) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
      std::fprintf(stderr, "chronolink-trace-fixture: --clock-state '%s': expected HOST=FILE\n", text.c_str());
      return 2;
    }
    FixtureHost host;
    host.host = text.substr(0, eq);
    host.clock.t0_ns = options.true_start_ns;
    host.clock_state_file = text.substr(eq + 1);
    options.clocks.push_back(host);
  }
  if (run.empty()) {
    run = chronolink::trace::RunNameFor(std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds(options.true_start_ns))));
  }
  if (truth.empty()) truth = logdir + "/chronolink_fixture_truth.json";
  chronolink::trace::FixtureRunSummary summary;
  if (!chronolink::trace::WriteFixtureRun(options, logdir, run, truth, &summary, &error)) {
    std::fprintf(stderr, "chronolink-trace-fixture: %s\n", error.c_str());
    return 1;
  }
  std::printf("run %s: %zu hosts, %lld events\ntruth %s\n", summary.run_dir.c_str(),
              summary.files.size(), static_cast<long long>(summary.events), truth.c_str());
  return 0;
}
