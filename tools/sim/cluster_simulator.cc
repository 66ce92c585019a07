#include "tools/sim/cluster_simulator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "agent/cluster/edge_estimate_of.h"
#include "agent/estimate/edge_windows.h"
#include "agent/estimate/fit_span_chooser.h"
#include "agent/pair/tuple_assembler.h"
#include "tools/sim/sim_exchange.h"
#include "tools/sim/sim_random.h"

namespace chronolink::sim {
namespace {

// Stream kinds, so that no two streams of one run share a seed.
enum Stream : uint64_t { kClockStream = 1, kWanderStream = 2, kLinkStream = 3, kEdgeStream = 4, kDisciplineStream = 5 };

bool IsFraction(double v) {
  return v >= 0 && v <= 1;
}

// Margin of true time around the run that every clock must cover: the
// largest offset plus what the drift adds over the run, plus a second.
int64_t ClockMargin(const SimConfig& c) {
  const double run_ns = static_cast<double>(c.windows) * static_cast<double>(c.window_ns);
  return static_cast<int64_t>(c.offset_spread_ns + c.drift_spread * run_ns) + 1'000'000'000;
}

SimNodeClock MakeClock(const SimConfig& c, uint32_t node) {
  SimRandom rng(StreamSeed(c.seed, {kClockStream, node}));
  ClockParams p;
  p.offset_ns = rng.Uniform(-c.offset_spread_ns, c.offset_spread_ns);
  p.drift = rng.Uniform(-c.drift_spread, c.drift_spread);
  p.wander_ns_per_sqrt_s = c.wander_ns_per_sqrt_s;
  p.frequency_wander_adev_1s = c.frequency_wander_adev_1s;
  const int64_t margin = ClockMargin(c);
  const int64_t end = c.start_ns + c.windows * c.window_ns;
  SimClock oscillator(p, c.start_ns, c.start_ns - margin, end + margin, StreamSeed(c.seed, {kWanderStream, node}));
  return SimNodeClock(std::move(oscillator), c.discipline, c.start_ns - margin, end + margin,
                      StreamSeed(c.seed, {kDisciplineStream, node}));
}

SimLink MakeLink(const SimConfig& c, uint32_t lo, uint32_t hi) {
  SimRandom rng(StreamSeed(c.seed, {kLinkStream, lo, hi}));
  LinkParams p;
  p.base_ns = rng.Uniform(c.delay_min_ns, c.delay_max_ns);
  p.asymmetry_ns = rng.Uniform(-c.asymmetry_ns, c.asymmetry_ns);
  if (auto it = c.asymmetry_override.find({lo, hi}); it != c.asymmetry_override.end()) {
    p.asymmetry_ns = it->second;
  }
  return SimLink(p, c.queue);
}

SimWindow ToSimWindow(const EdgeWindowRecord& r, const SimNodeClock& node, const SimNodeClock& peer) {
  SimWindow w;
  // The agent hands the solver exactly these (agent/cluster/edge_estimate_of.h).
  const std::optional<EdgeEstimate> estimate = EdgeEstimateOf(r);
  w.usable = estimate.has_value();
  if (estimate) w.estimate = *estimate;  // unusable windows are counted, never solved
  w.estimator = r.estimate.estimator;
  w.pairs_sent = r.counts.pairs_sent;
  w.tuples = r.estimate.tuples;
  w.pure_forward = r.estimate.pure_forward;
  w.pure_reverse = r.estimate.pure_reverse;
  w.fit_span_ns = r.fit_end_ns - r.fit_start_ns;
  const int64_t t = node.TrueInstant(r.x0_ns);
  w.true_beta_ns = peer.DeviationNs(t) - node.DeviationNs(t);
  return w;
}

}  // namespace

int64_t SimConfig::StartFitSpan() const {
  const FitSpanRange r = FitSpans();
  if (r.start_ns > 0) return r.start_ns;
  return FitSpanChooser::StartSpan(window_ns, r.shortest_ns, r.longest_trailing_ns);
}

std::string ValidateConfig(const SimConfig& c) {
  if (c.nodes < 2 || c.nodes > 100'000) return "nodes must be in [2, 100000] (--nodes)";
  if (c.k < 1) return "k must be at least 1 (--k)";
  if (c.windows < 1 || c.windows > 1000) return "windows must be in [1, 1000] (--windows)";
  if (c.window_ns < 10'000'000 || c.window_ns > 3'600'000'000'000)
    return "window must be in [10 ms, 1 h] (--window-s)";
  if (c.start_ns % c.window_ns != 0) return "start must be a multiple of the window";
  if (c.spacing_ns <= 0) return "probe spacing must be positive (--spacing-us)";
  if (c.interval_ns < 4 * c.spacing_ns)
    return "probe interval must be at least 4 x the pair spacing (--interval-ms, --spacing-us)";
  if (c.fit_span_ns != 0 && (c.fit_span_ns < c.window_ns || c.fit_span_ns > 8 * c.window_ns))
    return "fit span must be 0 (chosen per edge) or 1 to 8 windows (--fit-span-s)";
  if (c.fit_span_max_ns != 0 && (c.fit_span_max_ns < 2 * c.window_ns || c.fit_span_max_ns > 8 * c.window_ns))
    return "longest fit span must be 0 (three windows) or 2 to 8 windows (--fit-span-max-s)";
  if (c.fit_span_trailing_max_ns != 0 &&
      (c.fit_span_trailing_max_ns < c.FitSpan() || c.fit_span_trailing_max_ns > kMaxTrailingWindows * c.window_ns))
    return "longest trailing fit span must be 0 (ten windows) or from the longest centred span to 16 windows "
           "(--fit-span-trailing-max-s)";
  if (c.fit_span_start_ns != 0 && (c.fit_span_ns != 0 || c.fit_span_start_ns < c.FitSpans().shortest_ns ||
                                   c.fit_span_start_ns > c.MaxFitSpan() || c.fit_span_start_ns % c.window_ns != 0))
    return "start fit span must be 0 (the chooser's) or whole windows from the shortest chosen span to the longest, "
           "with spans chosen (--fit-span-start-s)";
  if (c.interval_ns > c.window_ns)
    return "probe interval must not exceed the window (--interval-ms, --window-s)";
  if (!(c.interval_jitter >= 0 && c.interval_jitter < 1))
    return "interval jitter must be in [0, 1) (--interval-jitter)";
  if (!(c.offset_spread_ns >= 0 && c.offset_spread_ns <= 1e12))
    return "offset spread must be in [0, 1000 s] (--offset-spread-ms)";
  if (!(c.drift_spread >= 0 && c.drift_spread <= 1e-3))
    return "drift spread must be in [0, 1000 ppm] (--drift-spread-ppm)";
  if (!(c.wander_ns_per_sqrt_s >= 0)) return "wander must be >= 0 (--wander-ns-per-sqrt-s)";
  if (!(c.frequency_wander_adev_1s >= 0 && c.frequency_wander_adev_1s <= 1e-6))
    return "frequency wander must be in [0, 1e-6] (--frequency-wander-adev)";
  const DisciplineParams& d = c.discipline;
  if (d.poll_ns < 1'000'000'000 || d.poll_ns > 2048'000'000'000 || d.poll_ns % 1'000'000'000 != 0)
    return "NTP poll must be whole seconds in [1, 2048] (--ntp-poll-s)";
  if (!(d.measurement_noise_ns >= 0 && d.measurement_noise_ns <= 1e8))
    return "NTP noise must be in [0, 100 ms] (--ntp-noise-us)";
  if (!(d.settled_frequency_error_ppm >= 0 && d.settled_frequency_error_ppm <= 100))
    return "settled frequency error must be in [0, 100 ppm]";
  if (!(c.delay_min_ns > 0 && c.delay_min_ns <= c.delay_max_ns))
    return "need 0 < delay min <= delay max (--delay-us MIN,MAX)";
  if (!(c.asymmetry_ns >= 0)) return "asymmetry must be >= 0 (--asymmetry-ns)";
  const QueueParams& q = c.queue;
  if (!(q.jitter_ns >= 0 && q.queue_mean_ns >= 0 && q.burst_mean_ns >= 0))
    return "queueing delays must be >= 0 (--jitter-ns, --queue-mean-us, --burst-us)";
  if (!IsFraction(q.idle_fraction) || !IsFraction(q.burst_fraction) || !IsFraction(q.loss_fraction))
    return "idle, burst and loss fractions must be in [0, 1]";
  if (c.threads < 1) return "threads must be at least 1 (--threads)";
  return "";
}

ClusterSimulator::ClusterSimulator(SimConfig config) : config_(std::move(config)) {
  std::vector<uint32_t> members(config_.nodes);
  for (uint32_t i = 0; i < config_.nodes; ++i) members[i] = i;
  ProbeGraphOptions go;
  go.k = config_.k;
  graph_ = ProbeGraph::Build(members, go);
  clocks_.reserve(config_.nodes);
  for (uint32_t i = 0; i < config_.nodes; ++i) clocks_.push_back(MakeClock(config_, i));
  links_.reserve(graph_.edges().size());
  for (const auto& [lo, hi] : graph_.edges()) links_.push_back(MakeLink(config_, lo, hi));
}

const SimLink& ClusterSimulator::link(uint32_t a, uint32_t b) const {
  const ProbeEdge key{std::min(a, b), std::max(a, b)};
  const auto& edges = graph_.edges();
  const auto it = std::lower_bound(edges.begin(), edges.end(), key);
  return links_.at(static_cast<size_t>(it - edges.begin()));
}

std::vector<SimWindow> ClusterSimulator::SimulateEdge(uint32_t node, uint32_t peer) const {
  const SimConfig& c = config_;
  const SimNodeClock& prober = clocks_[node];
  const SimNodeClock& responder = clocks_[peer];
  const SimLink& l = link(node, peer);
  SimRandom rng(StreamSeed(c.seed, {kEdgeStream, node, peer}));
  const HostLatency host;

  // Only the kernel class: the solver uses it, and the userspace class
  // would double the estimator's work for nothing.
  // The agent told the asymmetry the simulated links have (--path-asymmetry-ns).
  WindowScatterOptions scatter = c.sigma;
  scatter.path_asymmetry_ns = c.asymmetry_ns;
  EdgeWindows windows(node, peer, c.window_ns, {SourceClass::kKernel}, c.estimator, scatter, c.FitSpans(),
                      c.drift_history);
  TupleAssembler assembler(4096);
  std::vector<EdgeWindowRecord> records;
  const auto to_windows = [&](const FullTuple& t) { windows.OnTupleFinalized(t); };
  const int64_t end = c.start_ns + c.windows * c.window_ns;  // prober clock
  // Probing starts and ends early and late enough to fill the first and last
  // windows' fit spans.
  const int64_t lead = c.start_ns - windows.FitStart(c.start_ns);                  // the longest span's reach back
  const int64_t overhang = windows.FitEnd(c.start_ns) - c.start_ns - c.window_ns;  // and ahead, at the most
  int64_t open = c.start_ns - lead;                                                // windows close up to here
  const double interval = static_cast<double>(c.interval_ns);
  int64_t t = prober.TrueInstant(c.start_ns - lead) + std::llround(rng.Uniform(0, interval));
  for (uint64_t seq = 1;; ++seq) {
    const Exchange x = SimulateExchange(t, c.spacing_ns, l, node < peer, host, rng);
    const int64_t created = prober.Read(x.fwd_user_tx[0]);
    if (created >= end + overhang) break;
    const int64_t closable = windows.ClosableBefore(created);
    if (closable > open) {  // every earlier tuple is final: close their windows as the agent would
      windows.CloseUpTo(closable, &records);
      open = closable;
    }
    windows.OnPairSent(created);
    FeedExchange(x, seq, prober, responder, assembler);
    // Everything of this exchange has arrived (or never will): final.
    assembler.Finalize([](const FullTuple&) { return true; }, to_windows);
    t += std::llround(interval * (1.0 + c.interval_jitter * rng.Uniform(-1, 1)));
  }
  windows.CloseUpTo(end + overhang, &records);

  std::vector<SimWindow> out;
  out.reserve(records.size());
  for (const EdgeWindowRecord& r : records) {
    if (r.window_start_ns >= c.start_ns && r.window_end_ns <= end) out.push_back(ToSimWindow(r, prober, responder));
  }
  return out;
}

SimTraffic ClusterSimulator::SimulateAll(const std::function<void(size_t, size_t)>& progress) const {
  const auto started = std::chrono::steady_clock::now();
  const std::vector<ProbeEdge> directed = graph_.DirectedEdges();
  std::vector<std::vector<SimWindow>> per_edge(directed.size());
  std::atomic<size_t> next{0}, done{0};
  auto work = [&] {
    for (size_t i = next++; i < directed.size(); i = next++) {
      per_edge[i] = SimulateEdge(directed[i].first, directed[i].second);
      ++done;
    }
  };
  std::vector<std::thread> workers;
  for (int i = 0; i < config_.threads; ++i) workers.emplace_back(work);
  while (done.load() < directed.size()) {
    if (progress) progress(done.load(), directed.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::thread& w : workers) w.join();
  if (progress) progress(directed.size(), directed.size());

  // Results sit in edge order whatever the threads did: deterministic.
  SimTraffic traffic;
  traffic.directed_edges = directed.size();
  for (auto& windows : per_edge) {
    traffic.windows.insert(traffic.windows.end(), windows.begin(), windows.end());
  }
  traffic.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return traffic;
}

std::vector<int64_t> ClusterSimulator::ReferenceInstants() const {
  std::vector<int64_t> out;
  for (int w = 0; w < config_.windows; ++w)
    out.push_back(config_.start_ns + w * config_.window_ns + config_.window_ns / 2);
  return out;
}

}  // namespace chronolink::sim
