// chronolink-sim: simulates a cluster of drifting, wandering clocks, each
// disciplined by a daemon, probing each other over queueing, asymmetric links, runs the agent's pairing and
// estimator and the leader's global solve on the simulated stamps, and
// prints the accuracy against the simulated truth, next to a spanning-tree
// baseline on the same data (docs/simulator.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tools/sim/cluster_simulator.h"
#include "tools/sim/sim_accuracy.h"

namespace {

using chronolink::sim::AccuracyReport;
using chronolink::sim::ClusterSimulator;
using chronolink::sim::ErrorStats;
using chronolink::sim::SigmaCoverage;
using chronolink::sim::SimConfig;
using chronolink::sim::SimTraffic;
using chronolink::sim::SolverAccuracy;
using nlohmann::ordered_json;

// Progress on stderr for long runs: at most every 2 s, nothing for short ones.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), last_(std::chrono::steady_clock::now()) {}
  void Report(const std::string& what, size_t done, size_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (!enabled_ || now - last_ < std::chrono::seconds(2)) return;
    last_ = now;
    std::fprintf(stderr, "chronolink-sim: %s %zu/%zu (%.0f %%)\n", what.c_str(), done, total,
                 100.0 * static_cast<double>(done) / static_cast<double>(std::max<size_t>(total, 1)));
  }

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point last_;
};

// What the daemons did to REALTIME over the run, over all nodes.
struct DisciplineSummary {
  int updates = 0;
  double swing_p50_ppm = 0, swing_max_ppm = 0;  // REALTIME's rate range against RAW, per node
  double max_abs_realtime_ns = 0;
};

DisciplineSummary SummariseDiscipline(const ClusterSimulator& sim) {
  DisciplineSummary s;
  std::vector<double> swings;
  for (uint32_t n = 0; n < sim.config().nodes; ++n) {
    const chronolink::sim::DisciplineStats& d = sim.clock(n).discipline_stats();
    if (!sim.clock(n).disciplined()) continue;
    s.updates += d.updates;
    swings.push_back(d.rate_max_ppm - d.rate_min_ppm);
    s.max_abs_realtime_ns = std::max(s.max_abs_realtime_ns, d.max_abs_realtime_ns);
  }
  if (swings.empty()) return s;
  std::sort(swings.begin(), swings.end());
  s.swing_p50_ppm = swings[swings.size() / 2];
  s.swing_max_ppm = swings.back();
  return s;
}

struct RunResult {
  SimConfig config;
  size_t links = 0;
  int degree = 0;
  DisciplineSummary discipline;
  SimTraffic traffic;
  AccuracyReport report;
};

bool Disciplined(const SimConfig& c) { return c.discipline.model != chronolink::sim::SimDiscipline::kNone; }
bool FitsInRealtime(const SimConfig& c) { return c.discipline.fit_clock == chronolink::FitClockMode::kRealtime; }

RunResult RunOne(const SimConfig& config, const chronolink::SolverOptions& options, bool node_wander,
                 bool show_progress) {
  RunResult run;
  run.config = config;
  const ClusterSimulator sim(config);
  run.links = sim.graph().edges().size();
  run.degree = sim.graph().target_degree();
  run.discipline = SummariseDiscipline(sim);
  Progress progress(show_progress);
  run.traffic = sim.SimulateAll([&](size_t done, size_t total) {
    progress.Report(std::to_string(config.nodes) + " nodes: simulated edges", done, total);
  });
  run.report = chronolink::sim::Evaluate(
      sim, run.traffic, options,
      [&](int done, int total) {
        progress.Report(std::to_string(config.nodes) + " nodes: solved instants", static_cast<size_t>(done),
                        static_cast<size_t>(total));
      },
      node_wander);
  return run;
}

ordered_json StatsJson(const ErrorStats& s) {
  return {{"p50_ns", s.p50_ns}, {"p99_ns", s.p99_ns}, {"max_ns", s.max_ns}, {"samples", s.samples}};
}

ordered_json CoverageJson(const SigmaCoverage& c) {
  return {{"samples", c.samples},          {"cover_1s", c.cover_1s},
          {"cover_2s", c.cover_2s},        {"cover_3s", c.cover_3s},
          {"median_sigma_ns", c.median_sigma_ns}, {"median_abs_error_ns", c.median_abs_error_ns},
          {"width_ratio", c.width_ratio}};
}

// "sigma covers 68 / 95 / 99.7 % at 1/2/3 sigma; median sigma = 1.4 x median |error|"
void PrintCoverage(const char* what, const SigmaCoverage& c) {
  if (c.samples == 0) return;
  std::printf("%s one-sigma covers %.0f / %.0f / %.1f %% at 1/2/3 sigma; median sigma %.1f ns = %.2f x median "
              "|error|\n",
              what, 100 * c.cover_1s, 100 * c.cover_2s, 100 * c.cover_3s, c.median_sigma_ns, c.width_ratio);
}

ordered_json SolverJson(const SolverAccuracy& a) {
  ordered_json j = StatsJson(a.error);
  j["sigma"] = CoverageJson(a.sigma);
  j["solve_ms"] = a.solve_ms;
  j["unreachable"] = a.unreachable;
  return j;
}

// The spans the windows' fits took: fixed, or as each edge's chooser held them.
struct SpanSummary {
  double p10_s = 0, p50_s = 0, p90_s = 0;
};
SpanSummary SummariseSpans(const SimTraffic& traffic) {
  std::vector<int64_t> spans;
  for (const auto& w : traffic.windows) {
    if (w.usable) spans.push_back(w.fit_span_ns);
  }
  if (spans.empty()) return {};
  std::sort(spans.begin(), spans.end());
  const auto at = [&](double q) {
    return static_cast<double>(spans[static_cast<size_t>(q * static_cast<double>(spans.size() - 1))]) / 1e9;
  };
  return {at(0.1), at(0.5), at(0.9)};
}

std::string SpanText(const RunResult& r) {
  char buf[160];
  const SimConfig& c = r.config;
  if (!c.AdaptiveFitSpan()) {
    std::snprintf(buf, sizeof buf, "fits over %g s", static_cast<double>(c.FitSpan()) / 1e9);
  } else {
    const SpanSummary s = SummariseSpans(r.traffic);
    std::snprintf(buf, sizeof buf, "fits over spans chosen in %g-%g s: p10 %g, p50 %g, p90 %g s",
                  static_cast<double>(c.MinFitSpan()) / 1e9, static_cast<double>(c.MaxFitSpan()) / 1e9, s.p10_s,
                  s.p50_s, s.p90_s);
  }
  return buf;
}

ordered_json RunJson(const RunResult& r, const std::string& reference) {
  const SimConfig& c = r.config;
  const auto& w = r.report.windows;
  ordered_json config = {
      {"nodes", c.nodes},
      {"k", c.k},
      {"degree", r.degree},
      {"links", r.links},
      {"windows", c.windows},
      {"window_s", static_cast<double>(c.window_ns) / 1e9},
      {"fit_span_s",
       c.AdaptiveFitSpan() ? ordered_json(nullptr) : ordered_json(static_cast<double>(c.FitSpan()) / 1e9)},
      {"fit_span_max_s", static_cast<double>(c.FitSpan()) / 1e9},
      {"fit_span_trailing_max_s", static_cast<double>(c.MaxFitSpan()) / 1e9},
      {"fit_span_start_s",
       c.AdaptiveFitSpan() ? ordered_json(static_cast<double>(c.StartFitSpan()) / 1e9) : ordered_json(nullptr)},
      {"fit_later_half", c.FitSpans().later_half},
      {"later_half_sigma_factor", c.sigma.later_half_factor},
      {"sigma_memory", c.sigma.sigma_memory},
      {"sigma_history_span_power", c.sigma.history_span_power},
      {"fit_floor_points", c.estimator.max_margin.floor_points},
      {"fit_drift_windows", c.drift_history.windows},
      {"interval_ms", static_cast<double>(c.interval_ns) / 1e6},
      {"seed", c.seed},
      {"offset_spread_ms", c.offset_spread_ns / 1e6},
      {"drift_spread_ppm", std::round(c.drift_spread * 1e12) / 1e6},
      {"wander_ns_per_sqrt_s", c.wander_ns_per_sqrt_s},
      {"frequency_wander_adev", c.frequency_wander_adev_1s},
      {"discipline", Disciplined(c) ? "kernel-pll" : "none"},
      {"ntp_poll_s", static_cast<double>(c.discipline.poll_ns) / 1e9},
      {"ntp_noise_us", c.discipline.measurement_noise_ns / 1e3},
      {"fit_clock", FitsInRealtime(c) ? "realtime" : "raw"},
      {"delay_us", {c.delay_min_ns / 1e3, c.delay_max_ns / 1e3}},
      {"asymmetry_ns", c.asymmetry_ns},
      {"queue_mean_us", c.queue.queue_mean_ns / 1e3},
      {"idle_fraction", c.queue.idle_fraction},
      {"burst_fraction", c.queue.burst_fraction},
      {"burst_us", c.queue.burst_mean_ns / 1e3},
      {"loss_fraction", c.queue.loss_fraction},
      {"reference", reference},
      {"threads", c.threads}};
  ordered_json windows = {{"windows", w.windows},
                          {"max_margin", w.max_margin},
                          {"max_margin_pure", w.max_margin_pure},
                          {"min_delay", w.min_delay},
                          {"none", w.none},
                          {"pure_fraction", w.pure_fraction}};
  return {{"schema", "chronolink.sim.v1"},
          {"config", config},
          {"estimates", windows},
          {"fit_spans_s",
           [&] {
             const SpanSummary sp = SummariseSpans(r.traffic);
             return ordered_json{{"p10", sp.p10_s}, {"p50", sp.p50_s}, {"p90", sp.p90_s}};
           }()},
          {"edge_error", StatsJson(w.edge_error)},
          {"edge_sigma", CoverageJson(w.edge_sigma)},
          {"discipline",
           {{"updates", r.discipline.updates},
            {"rate_swing_p50_ppm", r.discipline.swing_p50_ppm},
            {"rate_swing_max_ppm", r.discipline.swing_max_ppm},
            {"max_abs_realtime_ns", r.discipline.max_abs_realtime_ns}}},
          {"global", SolverJson(r.report.global)},
          {"global_realtime", SolverJson(r.report.global_realtime)},
          {"spanning_tree", SolverJson(r.report.tree)},
          {"p99_ratio", r.report.p99_ratio},
          {"instants", r.report.instants},
          {"simulate_s", r.traffic.wall_s}};
}

void PrintTable(const RunResult& r, const std::string& reference) {
  const SimConfig& c = r.config;
  const auto& w = r.report.windows;
  std::printf(
      "chronolink-sim: %u nodes (k=%d, degree %d, %zu links), %d windows of %g s (%s), "
      "a pair every %g ms per directed edge, seed %llu, reference %s\n",
      c.nodes, c.k, r.degree, r.links, c.windows, static_cast<double>(c.window_ns) / 1e9,
      SpanText(r).c_str(), static_cast<double>(c.interval_ns) / 1e6,
      static_cast<unsigned long long>(c.seed), reference.c_str());
  std::printf("clocks: offsets +/-%g ms, drifts +/-%g ppm, wander %g ns/sqrt(s), frequency wander %g at 1 s\n",
              c.offset_spread_ns / 1e6, c.drift_spread * 1e6, c.wander_ns_per_sqrt_s, c.frequency_wander_adev_1s);
  if (Disciplined(c)) {
    const DisciplineSummary& d = r.discipline;
    std::printf(
        "discipline: the kernel PLL driven as timesyncd drives it, an NTP offset every %g s with %g us noise "
        "(%d updates); REALTIME's rate against RAW swung by p50 %.3f, max %.3f ppm; |REALTIME - true| up to "
        "%.1f us; agents fit on %s\n",
        static_cast<double>(c.discipline.poll_ns) / 1e9, c.discipline.measurement_noise_ns / 1e3, d.updates,
        d.swing_p50_ppm, d.swing_max_ppm, d.max_abs_realtime_ns / 1e3,
        FitsInRealtime(c) ? "REALTIME (--fit-clock realtime)" : "their fit clocks (RAW)");
  } else {
    std::printf("discipline: none (REALTIME is the oscillator)\n");
  }
  std::printf(
      "links: delay %g-%g us, asymmetry +/-%g ns, queue idle %g %% else Exp(%g us), "
      "bursts %g %% Exp(%g us), loss %g %%\n",
      c.delay_min_ns / 1e3, c.delay_max_ns / 1e3, c.asymmetry_ns, 100 * c.queue.idle_fraction,
      c.queue.queue_mean_ns / 1e3, 100 * c.queue.burst_fraction, c.queue.burst_mean_ns / 1e3,
      100 * c.queue.loss_fraction);
  std::printf("windows: %zu (%zu max_margin, %zu max_margin_pure, %zu min_delay, %zu none), pure pairs %.1f %%\n",
              w.windows, w.max_margin, w.max_margin_pure, w.min_delay, w.none, 100 * w.pure_fraction);
  std::printf("edge |beta error|: p50 %.1f ns, p99 %.1f ns, max %.1f ns\n", w.edge_error.p50_ns,
              w.edge_error.p99_ns, w.edge_error.max_ns);
  PrintCoverage("edge", w.edge_sigma);
  std::printf("simulated in %.2f s on %d thread(s); %d reference instants\n\n", r.traffic.wall_s, c.threads,
              r.report.instants);
  std::printf("%-14s %10s %10s %10s %10s %12s\n", "solver", "p50_ns", "p99_ns", "max_ns", "solve_ms",
              "unreachable");
  for (const auto& [name, a] :
       {std::pair{"global", &r.report.global}, std::pair{"spanning-tree", &r.report.tree}}) {
    std::printf("%-14s %10.1f %10.1f %10.1f %10.2f %12lld\n", name, a->error.p50_ns, a->error.p99_ns,
                a->error.max_ns, a->solve_ms, static_cast<long long>(a->unreachable));
  }
  std::printf("p99 ratio (spanning-tree / global): %.2f\n", r.report.p99_ratio);
  PrintCoverage("solved (global)", r.report.global.sigma);
  if (Disciplined(c)) {
    const ErrorStats& e = r.report.global_realtime.error;
    std::printf("solved (global) mapped back to REALTIME: p50 %.1f ns, p99 %.1f ns, max %.1f ns\n", e.p50_ns, e.p99_ns,
                e.max_ns);
  }
}

void PrintSweepHeader() {
  std::printf("%7s %11s %11s %11s %11s %9s %10s %10s %11s %8s\n", "nodes", "global_p50", "global_p99",
              "tree_p50", "tree_p99", "p99_ratio", "global_ms", "tree_ms", "unreachable", "sim_s");
}

void PrintSweepLine(const RunResult& r) {
  const AccuracyReport& a = r.report;
  std::printf("%7u %11.1f %11.1f %11.1f %11.1f %9.2f %10.2f %10.2f %11lld %8.2f\n", r.config.nodes,
              a.global.error.p50_ns, a.global.error.p99_ns, a.tree.error.p50_ns, a.tree.error.p99_ns,
              a.p99_ratio, a.global.solve_ms, a.tree.solve_ms,
              static_cast<long long>(a.global.unreachable + a.tree.unreachable), r.traffic.wall_s);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "chronolink-sim: simulate a cluster (drifting, wandering clocks; links with queueing and\n"
      "asymmetry), run the agent's pairing and estimator and the global solve on the simulated\n"
      "stamps, and print the accuracy against the truth next to a spanning-tree baseline\n"
      "(docs/simulator.md)."};
  SimConfig c;
  std::vector<uint32_t> sizes;
  double window_s = 2.0, fit_span_s = 0, fit_span_max_s = static_cast<double>(c.fit_span_max_ns) / 1e9,
         fit_span_trailing_max_s = static_cast<double>(c.fit_span_trailing_max_ns) / 1e9, fit_span_start_s = 0,
         interval_ms = static_cast<double>(c.interval_ns) / 1e6, spacing_us = static_cast<double>(c.spacing_ns) / 1e3;
  double offset_spread_ms = 50, drift_spread_ppm = 100, queue_mean_us = 20, burst_us = 500;
  std::vector<double> delay_us = {20, 200};
  std::string reference = "mean", discipline = "kernel-pll", fit_clock = "raw", node_wander = "on";
  double ntp_poll_s = static_cast<double>(c.discipline.poll_ns) / 1e9,
         ntp_noise_us = c.discipline.measurement_noise_ns / 1e3;
  bool json_out = false, quiet = false;
  c.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  app.add_option("--nodes", c.nodes, "cluster size (ids 0..N-1)")
      ->capture_default_str()
      ->check(CLI::Range(2u, 100000u));
  app.add_option("--sizes", sizes, "sweep: one run per size, one line each (e.g. 10,100,1000)")
      ->delimiter(',')
      ->check(CLI::Range(2u, 100000u));
  app.add_option("--k", c.k, "peers each node probes (ProbeGraph k)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--windows", c.windows, "estimation windows to simulate (one reference instant each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--window-s", window_s, "window length, s")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3600.0));
  app.add_option("--fit-span-s", fit_span_s,
                 "each window's fit takes the probes of this span centred on it, 1 to 8 windows; "
                 "0: chosen per edge from 2 windows to --fit-span-trailing-max-s, as the agent's --fit-span-s")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 28800.0));
  app.add_option("--fit-span-max-s", fit_span_max_s,
                 "the longest chosen centred span, 2 to 8 windows; 0: three windows")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 28800.0));
  app.add_option("--fit-span-trailing-max-s", fit_span_trailing_max_s,
                 "the longest chosen span in all, reaching back past the centred ones, as the agent's; "
                 "0: ten windows, up to 16")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 28800.0));
  std::string later_half = c.fit_later_half ? "on" : "off";
  app.add_option("--fit-later-half", later_half,
                 "on: a chosen span over --fit-span-max-s gives the mean of its line and its later half's, "
                 "as the agent's; off: its own line alone")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--later-half-sigma-factor", c.sigma.later_half_factor,
                 "the share of the band's and the floors' shift's weights in the sigma of a window averaged with "
                 "its later half, as the agent's (docs/estimator.md §8); 1: the whole span's weights, for comparisons")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--sigma-memory", c.sigma.sigma_memory,
                 "a window's sigma is at least this many times the median of its edge's last 16 windows' own, as "
                 "the agent's (docs/estimator.md §8); 0: none, for comparisons")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--sigma-history-span-power", c.sigma.history_span_power,
                 "a span longer than two windows stretches the sigma's trend of 12 windows by (span / two "
                 "windows) to this power, as the agent's (docs/estimator.md §8); 1: in proportion, as before")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 2.0));
  app.add_option("--fit-span-start-s", fit_span_start_s,
                 "the span each edge fits before its chooser has judged, whole windows within the chosen range; "
                 "0: the agent's (the one whose worst ratio to the shortest and the longest is least)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 28800.0));
  app.add_option("--fit-floor-points", c.estimator.max_margin.floor_points,
                 "a fit's line rests on the mean of the N deepest bounds per side, as the agent's "
                 "--fit-floor-points (1: the hard margin)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--fit-drift-windows", c.drift_history.windows,
                 "a window's line takes the median of the edge's last N own slopes, as the agent's "
                 "--fit-drift-windows (0: each window's own slope)")
      ->capture_default_str()
      ->check(CLI::Range(0, 200));
  app.add_option("--interval-ms", interval_ms,
                 "one coded pair per directed edge per interval, ms (lower the rate "
                 "for big clusters)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3.6e6));
  app.add_option("--interval-jitter", c.interval_jitter, "+/- uniform jitter on the interval, fraction")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--spacing-us", spacing_us, "gap between the two probes of a pair, us")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  app.add_option("--seed", c.seed, "random seed (a run is a function of it)")->capture_default_str();
  app.add_option("--offset-spread-ms", offset_spread_ms, "clock offsets uniform in +/- this, ms")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--drift-spread-ppm", drift_spread_ppm, "clock drifts uniform in +/- this, ppm")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));
  app.add_option("--wander-ns-per-sqrt-s", c.wander_ns_per_sqrt_s, "random-walk phase noise of every clock")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--frequency-wander-adev", c.frequency_wander_adev_1s,
                 "random-walk FM of every oscillator: its Allan deviation at 1 s")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e-6));
  app.add_option("--discipline", discipline,
                 "each node's daemon: kernel-pll (an NTP client driving the kernel PLL, as timesyncd), "
                 "or none (REALTIME is the oscillator; the simulator before 2026-12-03)")
      ->capture_default_str()
      ->check(CLI::IsMember({"kernel-pll", "none"}));
  app.add_option("--ntp-poll-s", ntp_poll_s, "the daemon's poll interval, whole seconds")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 2048.0));
  app.add_option("--ntp-noise-us", ntp_noise_us, "sigma of one NTP offset measurement, us")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e5));
  app.add_option("--fit-clock", fit_clock,
                 "what the agents fit on: raw (their fit clocks, the agent's default) or realtime")
      ->capture_default_str()
      ->check(CLI::IsMember({"raw", "realtime"}));
  app.add_option("--node-wander", node_wander,
                 "the global solve's node-level wander term, measured from the windows as the leader does "
                 "(docs/solver.md \"A node's own wander\"): on, or off (the solve before 2026-12-05)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--delay-us", delay_us, "per-link base one-way delay, us: MIN,MAX (uniform) or one value")
      ->delimiter(',')
      ->expected(1, 2)
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  app.add_option("--asymmetry-ns", c.asymmetry_ns,
                 "per-link delay asymmetry (fwd - rev) uniform in +/- this, ns")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--queue-mean-us", queue_mean_us, "mean queueing delay of a packet that queues, us")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--idle-fraction", c.queue.idle_fraction, "chance a packet finds its queue empty")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--burst-fraction", c.queue.burst_fraction,
                 "chance a pair hits a burst (both packets delayed)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--burst-us", burst_us, "mean burst delay, us")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--jitter-ns", c.queue.jitter_ns, "uniform wire jitter per packet, ns")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--loss-fraction", c.queue.loss_fraction, "chance a packet is lost")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--reference", reference, "reference clock: a node id, or 'mean'")->capture_default_str();
  app.add_option("--threads", c.threads, "simulation threads (results do not depend on it)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_flag("--json", json_out, "one summary JSON object per run instead of the table");
  app.add_flag("--quiet", quiet, "no progress on stderr");
  CLI11_PARSE(app, argc, argv);

  const auto fail = [](const std::string& why) {
    std::cerr << "chronolink-sim: " << why << "\n";
    return 2;
  };
  c.window_ns = std::llround(window_s * 1e9);
  c.fit_span_ns = std::llround(fit_span_s * 1e9);
  c.fit_span_max_ns = std::llround(fit_span_max_s * 1e9);
  c.fit_span_trailing_max_ns = std::llround(fit_span_trailing_max_s * 1e9);
  c.fit_span_start_ns = std::llround(fit_span_start_s * 1e9);
  c.fit_later_half = later_half == "on";
  c.interval_ns = std::llround(interval_ms * 1e6);
  c.spacing_ns = std::llround(spacing_us * 1e3);
  c.offset_spread_ns = offset_spread_ms * 1e6;
  c.drift_spread = drift_spread_ppm * 1e-6;
  c.delay_min_ns = delay_us.front() * 1e3;
  c.delay_max_ns = delay_us.back() * 1e3;
  c.queue.queue_mean_ns = queue_mean_us * 1e3;
  c.queue.burst_mean_ns = burst_us * 1e3;
  c.discipline.model =
      discipline == "none" ? chronolink::sim::SimDiscipline::kNone : chronolink::sim::SimDiscipline::kKernelPll;
  c.discipline.fit_clock =
      fit_clock == "realtime" ? chronolink::FitClockMode::kRealtime : chronolink::FitClockMode::kRaw;
  if (ntp_poll_s != std::floor(ntp_poll_s)) return fail("--ntp-poll-s must be whole seconds");
  c.discipline.poll_ns = std::llround(ntp_poll_s * 1e9);
  c.discipline.measurement_noise_ns = ntp_noise_us * 1e3;
  if (c.window_ns % 1'000'000 != 0) return fail("--window-s must be a whole number of milliseconds");
  c.start_ns -= c.start_ns % c.window_ns;

  chronolink::SolverOptions options;
  options.validity_horizon_ns = 2 * c.window_ns;  // as chronolink-solve with --every-s = the window
  if (reference != "mean") {
    size_t pos = 0;
    unsigned long id = 0;
    try {
      id = std::stoul(reference, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != reference.size())
      return fail("--reference must be a node id or 'mean', not '" + reference + "'");
    options.reference_node = static_cast<uint32_t>(id);
  }
  if (sizes.empty()) sizes.push_back(c.nodes);
  for (uint32_t n : sizes) {
    SimConfig sc = c;
    sc.nodes = n;
    if (const std::string why = chronolink::sim::ValidateConfig(sc); !why.empty()) return fail(why);
    if (options.reference_node && *options.reference_node >= n)
      return fail("--reference " + reference + " is not a node of a " + std::to_string(n) + "-node cluster");
  }

  const bool sweep = sizes.size() > 1;
  if (sweep && !json_out) PrintSweepHeader();
  for (uint32_t n : sizes) {
    SimConfig sc = c;
    sc.nodes = n;
    const RunResult r = RunOne(sc, options, node_wander == "on", !quiet);
    if (json_out) {
      std::cout << RunJson(r, reference).dump() << std::endl;
    } else if (sweep) {
      PrintSweepLine(r);
    } else {
      PrintTable(r, reference);
    }
  }
  return 0;
}
