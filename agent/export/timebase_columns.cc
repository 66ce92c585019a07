#include "agent/export/timebase_columns.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

namespace chronolink {

std::string TimebaseColumnsEncoder::Line(std::span<const RelayedKnot> knots) {
  // Grouped by node, each node's knots in the order they came (a node's
  // sessions one after the other): stable_sort keeps that order.
  std::vector<const RelayedKnot*> order;
  order.reserve(knots.size());
  for (const RelayedKnot& k : knots) order.push_back(&k);
  std::stable_sort(order.begin(), order.end(),
                   [](const RelayedKnot* a, const RelayedKnot* b) { return a->node < b->node; });

  nlohmann::json node_delta = nlohmann::json::array(), counts = nlohmann::json::array(),
                 starts = nlohmann::json::array(), raw_step = nlohmann::json::array(),
                 offset_step = nlohmann::json::array(), after_step = nlohmann::json::array(),
                 after_gap = nlohmann::json::array();
  uint32_t previous_node = 0;
  for (size_t i = 0; i < order.size();) {
    const RelayedKnot& first = *order[i];
    size_t end = i + 1;
    while (end < order.size() && order[end]->node == first.node && order[end]->session == first.session) ++end;
    node_delta.push_back(first.node - previous_node);
    previous_node = first.node;
    counts.push_back(end - i);
    const auto it = last_.find(first.node);
    LastKnot base;
    if (it != last_.end() && it->second.session == first.session) {
      base = it->second;
    } else {
      // Strings: epoch nanoseconds exceed what a reader parsing doubles keeps.
      base = {first.session, first.knot.raw_ns, first.knot.realtime_ns - first.knot.raw_ns};
      starts.push_back({node_delta.size() - 1, std::to_string(first.session), std::to_string(base.raw_ns),
                        std::to_string(base.offset_ns)});
    }
    for (; i < end; ++i) {
      const RelayedKnot& k = *order[i];
      const int64_t offset = k.knot.realtime_ns - k.knot.raw_ns;
      raw_step.push_back(k.knot.raw_ns - base.raw_ns);
      offset_step.push_back(offset - base.offset_ns);
      if (k.knot.after_step) after_step.push_back(raw_step.size() - 1);
      if (k.after_gap) after_gap.push_back(raw_step.size() - 1);
      base.raw_ns = k.knot.raw_ns;
      base.offset_ns = offset;
    }
    last_[first.node] = base;
  }
  nlohmann::json j;
  j["schema"] = kTimebaseColumnsSchema;
  j["node_delta"] = std::move(node_delta);
  j["knots"] = std::move(counts);
  j["starts"] = std::move(starts);
  j["raw_step_ns"] = std::move(raw_step);
  j["offset_step_ns"] = std::move(offset_step);
  j["after_step"] = std::move(after_step);
  j["after_gap"] = std::move(after_gap);
  return j.dump();
}

}  // namespace chronolink
