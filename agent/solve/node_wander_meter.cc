#include "agent/solve/node_wander_meter.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace chronolink {
namespace {

// A ring's slot of an index (window or centre), negative indices too.
size_t Slot(int64_t index, size_t slots) {
  const auto n = static_cast<int64_t>(slots);
  return static_cast<size_t>(((index % n) + n) % n);
}

}  // namespace

NodeWanderMeter::NodeWanderMeter(int64_t window_ns, int64_t fit_span_ns, NodeWanderOptions options)
    : window_ns_(std::max<int64_t>(window_ns, 1)),
      fit_span_s_(static_cast<double>(std::max<int64_t>(fit_span_ns, 0)) * 1e-9),
      options_(options) {
  // The span's smoothing must leave most of the lag: 2D >= 2S.
  const int64_t span_windows = (std::max<int64_t>(fit_span_ns, 0) + window_ns_ - 1) / window_ns_;
  options_.lag_windows = std::max<int>(options_.lag_windows, static_cast<int>(span_windows) + 1);
  options_.settle_windows = std::max(options_.settle_windows, 0);
  forget_per_window_ = std::exp(-1.0 / std::max(options_.memory_windows, 1.0));
  // An offset is needed until its newest second difference settles: 2L +
  // settle windows back; a centre's sums, L + settle.
  offset_slots_ = static_cast<size_t>(2 * options_.lag_windows + options_.settle_windows + 2);
  centre_slots_ = static_cast<size_t>(options_.lag_windows + options_.settle_windows + 2);
}

NodeWanderMeter::EdgeHistory& NodeWanderMeter::HistoryOf(uint64_t key) {
  auto [it, fresh] = edges_.try_emplace(key);
  if (fresh) {
    it->second.index.assign(offset_slots_, kEmpty);
    it->second.beta.assign(offset_slots_, 0.0);
    it->second.centre.assign(offset_slots_, kEmpty);
    it->second.d2.assign(offset_slots_, 0.0);
  }
  return it->second;
}

NodeWanderMeter::NodeState& NodeWanderMeter::StateOf(uint32_t node) {
  auto [it, fresh] = nodes_.try_emplace(node);
  if (fresh) it->second.centres.assign(centre_slots_, CentreSums{kEmpty});
  return it->second;
}

std::optional<double> NodeWanderMeter::Beta(const EdgeHistory& h, int64_t index) const {
  const size_t slot = Slot(index, offset_slots_);
  if (h.index[slot] != index) return std::nullopt;
  return h.beta[slot];
}

void NodeWanderMeter::Add(const EdgeEstimate& e, int64_t window_index) {
  if (!std::isfinite(e.beta_ns)) return;
  const uint64_t key = Key(e.node, e.peer);
  if (std::isfinite(e.uncertainty_ns) && e.uncertainty_ns > 0) {
    for (uint32_t n : {e.node, e.peer}) {
      auto& sigmas = StateOf(n).last_sigma;
      const auto it = std::find_if(sigmas.begin(), sigmas.end(), [&](const auto& s) { return s.first == key; });
      if (it != sigmas.end()) {
        it->second = e.uncertainty_ns;
      } else {
        sigmas.emplace_back(key, e.uncertainty_ns);
      }
    }
  }
  if (newest_index_ != kEmpty && window_index < newest_index_ - static_cast<int64_t>(offset_slots_) + 1) {
    ++stats_.late;  // its slot holds a newer window
    return;
  }
  EdgeHistory& h = HistoryOf(key);
  const size_t slot = Slot(window_index, offset_slots_);
  if (h.index[slot] == window_index) return;  // a resend
  h.index[slot] = window_index;
  h.beta[slot] = e.beta_ns;
  // The window may be the newest, the middle or the oldest of a second difference.
  const int L = options_.lag_windows;
  for (const int64_t centre : {window_index - L, window_index, window_index + L}) {
    if (Beta(h, centre - L) && Beta(h, centre) && Beta(h, centre + L)) TakeSecondDifference(e.node, e.peer, h, centre);
  }
  if (newest_index_ == kEmpty || window_index > newest_index_) {
    newest_index_ = window_index;
    Settle();
  }
}

void NodeWanderMeter::ResetEdge(uint32_t node, uint32_t peer) { edges_.erase(Key(node, peer)); }

void NodeWanderMeter::TakeSecondDifference(uint32_t node, uint32_t peer, EdgeHistory& h, int64_t centre) {
  if (settled_before_ != kEmpty && centre < settled_before_) {
    ++stats_.late;
    return;
  }
  const int L = options_.lag_windows;
  const double d2 = *Beta(h, centre + L) - 2.0 * *Beta(h, centre) + *Beta(h, centre - L);
  if (!(std::fabs(d2) <= options_.max_abs_second_difference_ns)) {
    ++stats_.rejected;
    return;
  }
  ++stats_.second_differences;
  const size_t slot = Slot(centre, offset_slots_);
  h.centre[slot] = centre;
  h.d2[slot] = d2;
  // The link's other direction at the same centre: their product is a pair
  // of one link, which shares both ends' walks and is left out.
  double same_link_product = 0;
  bool same_link = false;
  if (const auto reverse = edges_.find(Key(peer, node));
      reverse != edges_.end() && reverse->second.centre[slot] == centre) {
    // β = peer − node: the prober's walk enters negated, the peer's as is;
    // each end sees one direction negated, so the product is −d2·d2'.
    same_link_product = -d2 * reverse->second.d2[slot];
    same_link = true;
  }
  AddToNode(node, centre, -d2, same_link_product, same_link);
  AddToNode(peer, centre, d2, same_link_product, same_link);
}

void NodeWanderMeter::AddToNode(uint32_t node, int64_t centre, double v, double same_link_product, bool same_link) {
  NodeState& n = StateOf(node);
  CentreSums& c = n.centres[Slot(centre, centre_slots_)];
  if (c.centre != centre) c = CentreSums{centre};  // the slot's last centre was taken already
  c.sum += v;
  c.sum_sq += v * v;
  c.count += 1;
  if (same_link) {
    c.same_link += same_link_product;
    c.same_link_pairs += 1;
  }
}

void NodeWanderMeter::Settle() {
  const int64_t before = newest_index_ - options_.lag_windows - options_.settle_windows;
  const int64_t from = settled_before_ == kEmpty ? before - static_cast<int64_t>(centre_slots_) : settled_before_;
  if (before <= from) return;
  settled_before_ = before;
  for (auto& [id, n] : nodes_) {
    for (int64_t centre = std::max(from, before - static_cast<int64_t>(centre_slots_)); centre < before; ++centre) {
      CentreSums& c = n.centres[Slot(centre, centre_slots_)];
      if (c.centre != centre) continue;
      const double pairs = c.count * (c.count - 1) / 2.0 - c.same_link_pairs;
      const double products = (c.sum * c.sum - c.sum_sq) / 2.0 - c.same_link;
      c.centre = kEmpty;
      if (pairs <= 0) continue;
      const double forget =
          n.pairs > 0 ? std::pow(forget_per_window_, static_cast<double>(std::max<int64_t>(centre - n.last_centre, 0)))
                      : 1.0;
      n.products = n.products * forget + products;
      n.pairs = n.pairs * forget + pairs;
      n.last_centre = centre;
    }
  }
}

std::optional<double> NodeWanderMeter::WanderNsPerSqrtS(uint32_t node) const {
  const auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.pairs < options_.min_pairs) return std::nullopt;
  const double lag_s = static_cast<double>(options_.lag_windows) * static_cast<double>(window_ns_) * 1e-9;
  const double covariance = std::max(0.0, it->second.products / it->second.pairs);
  return std::sqrt(covariance / (2.0 * lag_s - fit_span_s_));
}

std::optional<double> NodeWanderMeter::SharedSigmaNs(uint32_t node) const {
  const std::optional<double> w = WanderNsPerSqrtS(node);
  if (!w) return std::nullopt;
  return *w * std::sqrt(fit_span_s_ / 12.0);
}

std::optional<double> NodeWanderMeter::ProvisionalSigmaNs(uint32_t node) const {
  const auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.last_sigma.empty()) return std::nullopt;
  std::vector<double> sigmas;
  std::set<uint32_t> peers;
  for (const auto& [key, sigma] : it->second.last_sigma) {
    sigmas.push_back(sigma);
    const auto prober = static_cast<uint32_t>(key >> 32), probed = static_cast<uint32_t>(key & 0xffffffffu);
    peers.insert(prober == node ? probed : prober);
  }
  // One link only: its sigma holds both ends' wander, and no second link
  // will ever measure it (a 2-node cluster).
  if (peers.size() < 2) return std::nullopt;
  const auto mid = sigmas.begin() + static_cast<std::ptrdiff_t>(sigmas.size() / 2);
  std::nth_element(sigmas.begin(), mid, sigmas.end());
  return *mid / std::sqrt(2.0);
}

std::unordered_map<uint32_t, double> NodeWanderMeter::SharedSigmas() const {
  std::unordered_map<uint32_t, double> out;
  out.reserve(nodes_.size());
  for (const auto& [node, state] : nodes_) {
    std::optional<double> s = SharedSigmaNs(node);
    if (!s) s = ProvisionalSigmaNs(node);
    if (s) out.emplace(node, *s);
  }
  return out;
}

}  // namespace chronolink
