#include "bench/coordination/window_summaries.h"

#include <cmath>
#include <random>

namespace chronolink::bench {

namespace {

// MONOTONIC_RAW runs this far behind REALTIME on every simulated node (a
// boot a few hours ago); the fit clock is anchored at the session's start.
constexpr int64_t kRawBehindNs = 1'790'000'000'000'000'000;
constexpr int64_t kSessionStartNs = 1'790'000'000'000'000'000 + 3'600'000'000'000;
constexpr int64_t kKnotSpacingNs = 1'500'000'000;  // about what a PLL leaves: 3 knots a window

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

// A cheap deterministic normal draw (Box-Muller on two hashed uniforms):
// thousands of nodes draw six edges each per window.
double Normal(uint64_t key, double sigma) {
  const double u1 = (static_cast<double>(Mix(key, 1) >> 11) + 0.5) / 9007199254740992.0;
  const double u2 = static_cast<double>(Mix(key, 2) >> 11) / 9007199254740992.0;
  return sigma * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace

WindowSummarySource::WindowSummarySource(const ProbeGraph& graph, uint64_t seed, double offset_spread_ns)
    : seed_(seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> offset(-offset_spread_ns, offset_spread_ns);
  const uint32_t top = graph.members().empty() ? 0 : graph.members().back();
  offset_ns_.assign(top + 1, 0);
  peers_.assign(top + 1, {});
  for (uint32_t node : graph.members()) {
    offset_ns_[node] = static_cast<int64_t>(offset(rng));
    peers_[node] = graph.PeersOf(node);
  }
}

int64_t WindowSummarySource::OffsetOf(uint32_t node) const {
  return node < offset_ns_.size() ? offset_ns_[node] : 0;
}

const std::vector<uint32_t>& WindowSummarySource::PeersOf(uint32_t node) const {
  static const std::vector<uint32_t> kNone;
  return node < peers_.size() ? peers_[node] : kNone;
}

std::vector<WindowSummary> WindowSummarySource::Window(uint32_t node, int64_t k, int64_t window_ns) const {
  std::vector<WindowSummary> out;
  const int64_t start = k * window_ns;
  const int64_t x0 = start + window_ns / 2;  // the window's centre, on the node's clock
  // The node fits on a clock no daemon bends here: F = REALTIME, rate 0; its
  // knots still go with every summary, as an agent's do.
  FitAnchor anchor{kSessionStartNs - kRawBehindNs, kSessionStartNs, 0};
  TimebaseExcerpt knots;
  for (int i = -1; i <= 1; ++i) {
    const int64_t rt = x0 + i * kKnotSpacingNs;
    knots.knots.push_back(TimebaseKnot{rt - kRawBehindNs, rt, false});
  }
  knots.last_provisional = true;
  for (uint32_t peer : PeersOf(node)) {
    const uint64_t key = Mix(Mix(seed_, node), Mix(peer, static_cast<uint64_t>(k)));
    WindowSummary w;
    w.estimate.node = node;
    w.estimate.peer = peer;
    w.estimate.x0_ns = x0;
    w.estimate.beta_ns = static_cast<double>(OffsetOf(peer) - OffsetOf(node)) + Normal(key, 20.0);
    w.estimate.alpha = Normal(key + 1, 1e-11);
    w.estimate.uncertainty_ns = 30 + std::abs(Normal(key + 2, 20.0));
    w.estimate.shared_ns = 10;
    w.session = static_cast<uint64_t>(kSessionStartNs) + node;
    w.window_start_ns = start;
    w.estimator = "max_margin";
    w.prober_clock = FitPoint{x0, x0, 0};
    w.prober_anchor = anchor;
    w.prober_knots = knots;
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace chronolink::bench
