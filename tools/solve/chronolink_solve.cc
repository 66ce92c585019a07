// chronolink-solve: recomputes offsets.jsonl offline from the edges.jsonl
// files of all nodes, with the same global solver the leader runs
// (agent/solve/global_solver.h, docs/solver.md), or with the spanning-tree
// baseline (--method spanning-tree) to measure the network effect on the
// same edges (docs/simulator.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "agent/cluster/fit_point_book.h"
#include "agent/estimate/fit_span_range.h"
#include "agent/export/offsets_jsonl_writer.h"
#include "agent/solve/clock_step_barriers.h"
#include "agent/solve/global_solver.h"
#include "agent/solve/node_wander_meter.h"
#include "agent/solve/spanning_tree_solver.h"
#include "common/atomic_output_file.h"
#include "tools/solve/window_knots.h"
#include "trace/correct/timebase_file.h"

namespace {

using chronolink::ClockStepBarriers;
using chronolink::EdgeEstimate;
using nlohmann::json;

struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Appends the usable estimates of one edges.jsonl file; throws ParseError
// with file:line on anything malformed. Lines without an estimate
// (estimator "none", null beta/alpha/uncertainty) and lines of another
// source class are skipped; windows discarded for a clock step become
// barriers, as the leader keeps them.
// Each line's `fit_point` (the prober's REALTIME at x0 on its fit clock)
// goes into `points`: the solve is on the fit clocks, the output in
// REALTIME, as the leader's (docs/leader.md). Each window's `fit_clock`
// goes into `windows`, for its knots (--timebase).
void ReadEdges(const std::string& path, const std::string& source, std::vector<EdgeEstimate>& out,
               ClockStepBarriers& steps, chronolink::FitPointBook& points,
               std::vector<chronolink::solve_tool::WindowFitClock>& windows, size_t& skipped) {
  std::ifstream in(path);
  if (!in) throw ParseError(path + ": cannot open");
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    const std::string where = path + ":" + std::to_string(lineno) + ": ";
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      throw ParseError(where + "malformed JSON: " + e.what());
    }
    if (!j.is_object()) throw ParseError(where + "not a JSON object");
    if (!j.contains("schema") || j["schema"] != "chronolink.edge.v1")
      throw ParseError(where + "schema is not \"chronolink.edge.v1\"");
    try {
      if (j.value("clock_step", false)) {
        steps.Add(j.at("node").get<uint32_t>(), j.at("peer").get<uint32_t>(), j.at("window_start_ns").get<int64_t>(),
                  j.at("window_end_ns").get<int64_t>());
        ++skipped;
        continue;
      }
      if (j.contains("clock_remap_at_ns")) {
        // A fit clock bent at these instants: the window's estimate stands,
        // but none is carried across them (docs/clocks.md).
        const json& bends = j["clock_remap_at_ns"];
        if (!bends.is_array()) throw ParseError(where + "clock_remap_at_ns is not an array");
        for (const json& at : bends) {
          const int64_t b = at.get<int64_t>();
          steps.Add(j.at("node").get<uint32_t>(), j.at("peer").get<uint32_t>(), b, b + 1);
        }
      }
      if (j.contains("fit_clock")) {
        const json& a = j["fit_clock"];
        windows.push_back({j.at("node").get<uint32_t>(),
                           {a.at("raw_ns").get<int64_t>(), a.at("realtime_ns").get<int64_t>(),
                            a.at("rate_fine").get<int64_t>()},
                           j.at("window_start_ns").get<int64_t>(),
                           j.at("window_end_ns").get<int64_t>()});
      }
      const std::string estimator = j.value("estimator", std::string("none"));
      if (estimator == "none" || !j.contains("beta_ns") || j["beta_ns"].is_null() || !j.contains("alpha") ||
          j["alpha"].is_null() || !j.contains("uncertainty_ns") || j["uncertainty_ns"].is_null()) {
        ++skipped;
        continue;
      }
      if (source != "any" && j.value("timestamp_source", std::string()) != source) {
        ++skipped;
        continue;
      }
      EdgeEstimate e;
      e.node = j.at("node").get<uint32_t>();
      e.peer = j.at("peer").get<uint32_t>();
      e.x0_ns = j.at("x0_ns").get<int64_t>();
      chronolink::FitPoint point{e.x0_ns, e.x0_ns, 0};  // none: the prober fitted in REALTIME
      if (j.contains("fit_point")) {
        const json& p = j["fit_point"];
        point = {p.at("fit_ns").get<int64_t>(), p.at("realtime_ns").get<int64_t>(), p.at("rate_fine").get<int64_t>()};
      }
      points.Add(e.node, point);
      e.beta_ns = j.at("beta_ns").get<double>();
      e.alpha = j.at("alpha").get<double>();
      // The window's one-sigma when the agent measured it (edges written
      // before sigma_ns existed have only the fit's band).
      const bool has_sigma = j.contains("sigma_ns") && !j["sigma_ns"].is_null() && j["sigma_ns"].get<double>() > 0;
      e.uncertainty_ns = has_sigma ? j["sigma_ns"].get<double>() : j.at("uncertainty_ns").get<double>();
      // Its part shared with the link's other direction, where written.
      if (has_sigma && j.contains("sigma_shared_ns") && !j["sigma_shared_ns"].is_null()) {
        e.shared_ns = j["sigma_shared_ns"].get<double>();
      }
      out.push_back(e);
    } catch (const json::exception& e) {
      throw ParseError(where + "bad field: " + e.what());
    }
  }
}

struct KnotCounts {
  size_t windows = 0;      // distinct windows on a fit clock
  size_t with_knots = 0;   // of them, covered by their node's knots
};

// Every window's knots into `points`, in each node's window order, as the
// leader receives them with the summaries (--timebase). Throws ParseError
// on a bad timebase file.
KnotCounts AddWindowKnots(const std::vector<std::string>& timebase_files,
                          std::vector<chronolink::solve_tool::WindowFitClock> windows,
                          chronolink::FitPointBook& points) {
  chronolink::trace::TimebaseReader reader;
  std::string error;
  for (const auto& f : timebase_files) {
    if (!reader.AddFile(f, &error)) throw ParseError(error);
  }
  std::map<uint32_t, chronolink::trace::NodeTimebase> timebases;
  if (!reader.Finish(&timebases, &error)) throw ParseError(error);
  std::sort(windows.begin(), windows.end(), [](const auto& a, const auto& b) {
    return std::tie(a.node, a.window_start_ns, a.anchor.raw_ns) < std::tie(b.node, b.window_start_ns, b.anchor.raw_ns);
  });
  windows.erase(std::unique(windows.begin(), windows.end()), windows.end());  // one line per peer
  KnotCounts counts;
  counts.windows = windows.size();
  for (const auto& w : windows) {
    const auto timebase = timebases.find(w.node);
    if (timebase == timebases.end()) continue;
    if (const auto excerpt = chronolink::solve_tool::WindowExcerpt(timebase->second, w)) {
      points.AddKnots(w.node, w.anchor, *excerpt);
      ++counts.with_knots;
    }
  }
  return counts;
}


}  // namespace

using SolveFn = chronolink::SolveResult (*)(std::span<const chronolink::EdgeEstimate>, int64_t,
                                            const chronolink::SolverOptions&);

// The global solve, each instant on its own (no earlier solution to start from).
static chronolink::SolveResult SolveGlobal(std::span<const chronolink::EdgeEstimate> edges, int64_t t,
                                           const chronolink::SolverOptions& options) {
  return chronolink::Solve(edges, t, options);
}

int main(int argc, char** argv) {
  CLI::App app{
      "chronolink-solve: recompute offsets.jsonl (per node, per reference instant) from the\n"
      "edges.jsonl files of all nodes with the global solver (docs/solver.md)."};
  std::vector<std::string> edge_files;
  std::string reference = "mean";
  double every_s = 2.0;
  double horizon_s = -1;
  std::string out_path = "-";
  std::string source = "kernel";
  std::string loss = "tukey";
  double threshold = 0;
  std::string method = "global";
  std::string form_name = "auto";
  std::vector<std::string> timebase_files;
  app.add_option("--edges", edge_files, "edges.jsonl files (one per node)")->required()->expected(1, -1);
  app.add_option("--reference", reference, "reference clock: a node id, or 'mean' (of the largest component)")
      ->capture_default_str();
  app.add_option("--every-s", every_s, "seconds between reference instants")->capture_default_str()->check(
      CLI::PositiveNumber);
  app.add_option("--horizon-s", horizon_s, "use an estimate only within this many seconds of the instant "
                                           "(default: 2 × --every-s)");
  double node_wander_span_s = -1;
  app.add_option("--node-wander-span-s", node_wander_span_s,
                 "the global solve's node-level wander term, as the leader's: measured from the windows at this "
                 "longest centred fit span, s (docs/solver.md \"A node's own wander\"); default: the agent's "
                 "(three windows of --every-s); 0: off, the solve before 2026-12-05")
      ->check(CLI::Range(-1.0, 28800.0));
  double node_bias_floor_ns = chronolink::SolverOptions{}.node_bias_floor_ns;
  app.add_option("--node-bias-floor-ns", node_bias_floor_ns,
                 "a node's own stamping bias, added in quadrature to its sigma less what its links' floors carry "
                 "(docs/solver.md \"A node's own bias\"); 0: none")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--out", out_path, "output offsets.jsonl ('-': stdout)")->capture_default_str();
  app.add_option("--source", source, "timestamp_source class to use")
      ->check(CLI::IsMember({"kernel", "userspace", "any"}))
      ->capture_default_str();
  app.add_option("--loss", loss, "robust re-weighting")
      ->check(CLI::IsMember({"tukey", "cauchy", "huber", "none"}))
      ->capture_default_str();
  app.add_option("--threshold", threshold,
                 "robust threshold, in units of an edge's uncertainty (default: tukey 4.685, "
                 "cauchy 2.385, huber 1.345)")
      ->check(CLI::PositiveNumber);
  app.add_option("--method", method,
                 "global: the network-effect solve; spanning-tree: the chain-sync baseline (offsets "
                 "summed along a least-variance spanning tree, loops ignored)")
      ->check(CLI::IsMember({"global", "spanning-tree"}))
      ->capture_default_str();
  app.add_option("--format", form_name,
                 "rows: a line per node per instant; columns: a line per instant (docs/formats.md); auto: "
                 "columns from 1000 nodes")
      ->check(CLI::IsMember({"rows", "columns", "auto"}))
      ->capture_default_str();
  app.add_option("--timebase", timebase_files,
                 "the nodes' timebase.jsonl, or the leader's cluster-timebase.jsonl: each solution is mapped "
                 "back to REALTIME through its node's knots, as the leader does, not along one fit point per "
                 "window, which a clock daemon's rate changes bend (docs/solver.md)")
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  chronolink::OffsetsForm form = chronolink::OffsetsForm::kAuto;
  chronolink::ParseOffsetsForm(form_name, &form);
  const SolveFn solve = method == "spanning-tree" ? &chronolink::SolveSpanningTree : &SolveGlobal;

  chronolink::SolverOptions opt;
  opt.node_bias_floor_ns = node_bias_floor_ns;
  if (reference != "mean") {
    try {
      size_t pos = 0;
      const unsigned long id = std::stoul(reference, &pos);
      if (pos != reference.size() || id > UINT32_MAX) throw std::invalid_argument(reference);
      opt.reference_node = static_cast<uint32_t>(id);
    } catch (const std::exception&) {
      std::cerr << "chronolink-solve: --reference must be a node id or 'mean', not '" << reference << "'\n";
      return 2;
    }
  }
  opt.loss = loss == "huber"    ? chronolink::RobustLoss::kHuber
             : loss == "none"   ? chronolink::RobustLoss::kNone
             : loss == "cauchy" ? chronolink::RobustLoss::kCauchy
                                : chronolink::RobustLoss::kTukey;
  opt.robust_threshold = threshold > 0 ? threshold
                         : loss == "huber"  ? 1.345
                         : loss == "cauchy" ? 2.385
                                            : 4.685;
  const int64_t step = static_cast<int64_t>(std::llround(every_s * 1e9));
  if (step <= 0) {
    std::cerr << "chronolink-solve: --every-s too small\n";
    return 2;
  }
  opt.validity_horizon_ns = horizon_s > 0 ? static_cast<int64_t>(std::llround(horizon_s * 1e9)) : 2 * step;

  std::vector<EdgeEstimate> edges;
  ClockStepBarriers steps;
  chronolink::FitPointBook points(opt.validity_horizon_ns);
  std::vector<chronolink::solve_tool::WindowFitClock> windows;
  size_t skipped = 0;
  KnotCounts knots;
  try {
    for (const auto& f : edge_files) ReadEdges(f, source, edges, steps, points, windows, skipped);
    if (!timebase_files.empty()) knots = AddWindowKnots(timebase_files, std::move(windows), points);
  } catch (const ParseError& e) {
    std::cerr << "chronolink-solve: " << e.what() << "\n";
    return 1;
  }
  if (edges.empty()) {
    std::cerr << "chronolink-solve: no usable edge estimates (" << skipped << " lines skipped)\n";
    return 1;
  }
  std::sort(edges.begin(), edges.end(),
            [](const EdgeEstimate& a, const EdgeEstimate& b) { return a.x0_ns < b.x0_ns; });

  // A file appears whole or not at all, never through a link planted at its
  // name or a temporary one (common/atomic_output_file.h).
  chronolink::AtomicOutputFile file;
  if (out_path != "-") {
    std::string error;
    if (!file.Open(out_path, &error)) {
      std::cerr << "chronolink-solve: " << error << "\n";
      return 1;
    }
  }

  // Reference instants: the centres of windows of the step (k·step +
  // step/2), as the leader solves them (docs/leader.md), across the covered
  // span; the first estimate's x0 alone when the span holds none.
  const int64_t lo = edges.front().x0_ns, hi = edges.back().x0_ns;
  const int64_t half = step / 2;
  int64_t first = ((lo - half) / step) * step + half;
  while (first < lo) first += step;
  std::vector<int64_t> instants;
  for (int64_t t = first; t <= hi; t += step) instants.push_back(t);
  if (instants.empty()) instants.push_back(lo);

  chronolink::OffsetLineContext context;
  context.reference_node = opt.reference_node;
  context.method = method == "spanning-tree" ? "spanning_tree" : "global";
  size_t lines = 0;
  std::string error;
  // As the leader: each node's wander from the windows it holds at the
  // instant, those up to the next window.
  const int64_t wander_span_ns = node_wander_span_s < 0 ? chronolink::FitSpanRange::Of(step, 0, 0).longest_ns
                                                        : static_cast<int64_t>(std::llround(node_wander_span_s * 1e9));
  std::optional<chronolink::NodeWanderMeter> wander;
  if (method != "spanning-tree" && wander_span_ns > 0) wander.emplace(step, wander_span_ns);
  size_t fed = 0;
  std::map<std::pair<uint32_t, uint32_t>, int64_t> last_fed_x0;  // per directed edge
  for (int64_t t : instants) {
    if (wander) {
      for (; fed < edges.size() && edges[fed].x0_ns <= t + step; ++fed) {
        // As the leader at a step marker: offsets across a step do not
        // difference.
        const EdgeEstimate& e = edges[fed];
        const auto [last, first] = last_fed_x0.try_emplace({e.node, e.peer}, e.x0_ns);
        if (!first && steps.Crosses(e, last->second)) wander->ResetEdge(e.node, e.peer);
        last->second = e.x0_ns;
        wander->Add(e, e.x0_ns / step);  // x0: the window's centre, epoch ns
      }
      opt.node_shared_sigma_ns = wander->SharedSigmas();
    }
    const auto begin = std::lower_bound(edges.begin(), edges.end(), t - opt.validity_horizon_ns,
                                        [](const EdgeEstimate& e, int64_t v) { return e.x0_ns < v; });
    const auto end = std::upper_bound(edges.begin(), edges.end(), t + opt.validity_horizon_ns,
                                      [](int64_t v, const EdgeEstimate& e) { return v < e.x0_ns; });
    std::vector<EdgeEstimate> usable;
    for (auto it = begin; it != end; ++it) {
      if (!steps.Crosses(*it, t)) usable.push_back(*it);
    }
    chronolink::OffsetsSnapshot solved;
    solved.reference_instant_ns = t;
    solved.reference_node = opt.reference_node;
    solved.nodes = solve(usable, t, opt).nodes;
    if (!points.ToRealtime(&solved)) continue;  // the reference's REALTIME is unknown there
    context.reference_instant_ns = solved.reference_instant_ns;
    size_t written = 0;
    const std::string text = chronolink::OffsetsInstantText(solved.nodes, context, form, &written);
    if (out_path == "-") {
      std::cout << text;
    } else if (file.buffer()->append(text); !file.MaybeFlush(&error)) {
      std::cerr << "chronolink-solve: " << error << "\n";
      return 1;
    }
    lines += written;
  }
  if (out_path == "-") {
    std::cout.flush();
    if (!std::cout.good()) return 1;
  } else if (!file.Commit(&error)) {
    std::cerr << "chronolink-solve: " << error << "\n";
    return 1;
  }
  std::cerr << "chronolink-solve: " << edges.size() << " estimates (" << skipped << " lines skipped), "
            << instants.size() << " instants, " << lines << " lines";
  if (!timebase_files.empty()) {
    std::cerr << "; knots over " << knots.with_knots << " of " << knots.windows << " windows, "
              << points.stats().mapped_by_knots << " solutions mapped through them";
  }
  if (points.stats().instants_unmapped + points.stats().nodes_unmapped > 0) {
    std::cerr << "; not mapped to REALTIME (no fit_point of the reference, or of a node, near the instant): "
              << points.stats().instants_unmapped << " instants, " << points.stats().nodes_unmapped << " node solutions";
  }
  std::cerr << "\n";
  return 0;
}
