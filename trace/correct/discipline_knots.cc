#include "trace/correct/discipline_knots.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace chronolink::trace {

namespace {

// A clock's REALTIME − RAW less its chord over [from, to] (its own REALTIME).
struct ChordShape {
  const TimebaseStretch* stretch = nullptr;
  int64_t from = 0, to = 0;
  long double g_to = 0;  // g(to) − g(from)

  static std::optional<ChordShape> Over(const NodeTimebase* tb, int64_t from, int64_t to, DisciplineStats* stats) {
    if (tb == nullptr) return std::nullopt;
    const TimebaseStretch* s = tb->Covering(from, to);
    if (s == nullptr) {
      ++stats->intervals_uncovered;
      return std::nullopt;
    }
    ChordShape c{s, from, to, 0};
    c.g_to = c.G(to);
    return c;
  }
  long double G(int64_t x) const { return static_cast<long double>(x - from) - stretch->RawSince(from, x); }
  long double At(long double x) const {
    const auto xi = static_cast<int64_t>(std::llround(x));
    return G(xi) - g_to * static_cast<long double>(xi - from) / static_cast<long double>(to - from);
  }
};

const NodeTimebase* Find(const std::map<uint32_t, NodeTimebase>& timebases, uint32_t node) {
  const auto it = timebases.find(node);
  return it == timebases.end() ? nullptr : &it->second;
}

// The instants between solved records a and b of one node.
void FollowInterval(const OffsetRecord& a, const OffsetRecord& b, const NodeTimebase* node_tb,
                    const NodeTimebase* ref_tb, std::vector<OffsetRecord>* out, DisciplineStats* stats) {
  const auto xa = a.t_ns + static_cast<int64_t>(std::llround(a.offset_ns));
  const auto xb = b.t_ns + static_cast<int64_t>(std::llround(b.offset_ns));
  const std::optional<ChordShape> node = ChordShape::Over(node_tb, xa, xb, stats);
  const std::optional<ChordShape> ref = ChordShape::Over(ref_tb, a.t_ns, b.t_ns, stats);
  if (!node && !ref) return;
  ++stats->intervals_followed;
  const long double span = static_cast<long double>(b.t_ns - a.t_ns);
  const auto chord = [&](long double t) {
    return static_cast<long double>(a.offset_ns) +
           static_cast<long double>(b.offset_ns - a.offset_ns) * (t - static_cast<long double>(a.t_ns)) / span;
  };
  // Where either shape has a knot, on the reference clock.
  std::vector<int64_t> at;
  if (node) {
    for (const TimebasePoint& k : node->stretch->KnotsWithin(xa, xb)) {
      // The node reading x is at t = x − offset; the chord places it well
      // enough (the shape's slope times the bend, far below a ns).
      const long double u = static_cast<long double>(k.realtime_ns - xa) / static_cast<long double>(xb - xa);
      at.push_back(a.t_ns + static_cast<int64_t>(std::llroundl(u * span)));
    }
  }
  if (ref) {
    for (const TimebasePoint& k : ref->stretch->KnotsWithin(a.t_ns, b.t_ns)) at.push_back(k.realtime_ns);
  }
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  const size_t first_added = out->size();
  for (const int64_t t : at) {
    if (t <= a.t_ns || t >= b.t_ns) continue;
    long double offset = chord(static_cast<long double>(t));
    for (int i = 0; i < 2; ++i) {  // the node's reading depends on the offset itself
      long double o = chord(static_cast<long double>(t));
      if (node) o += node->At(static_cast<long double>(t) + offset);
      if (ref) o -= ref->At(static_cast<long double>(t));
      offset = o;
    }
    OffsetRecord r = a;
    r.t_ns = t;
    r.offset_ns = static_cast<double>(offset);
    const double u = static_cast<double>(t - a.t_ns) / static_cast<double>(span);
    r.uncertainty_ns = a.uncertainty_ns + (b.uncertainty_ns - a.uncertainty_ns) * u;
    r.residual_ns.reset();
    r.recomputed = false;
    r.between_instants = true;
    out->push_back(r);
  }
  // Each added instant's drift: the slope to the next instant.
  for (size_t i = first_added; i < out->size(); ++i) {
    const OffsetRecord& next = i + 1 < out->size() ? (*out)[i + 1] : b;
    OffsetRecord& r = (*out)[i];
    r.drift = (next.offset_ns - r.offset_ns) / static_cast<double>(next.t_ns - r.t_ns);
  }
  stats->instants_added += out->size() - first_added;
}

}  // namespace

std::vector<OffsetRecord> FollowDiscipline(const std::vector<OffsetRecord>& records, const ClockReference& reference,
                                           const std::map<uint32_t, NodeTimebase>& timebases, DisciplineStats* stats) {
  if (reference.is_mean || timebases.empty()) return records;
  const NodeTimebase* ref_tb = Find(timebases, reference.node);
  std::vector<OffsetRecord> out;
  out.reserve(records.size());
  bool reordered = false;
  for (size_t i = 0; i < records.size(); ++i) {
    const OffsetRecord& a = records[i];
    out.push_back(a);
    if (a.node == reference.node || !a.reachable) continue;
    size_t j = i + 1;  // the node's next solved instant, past those it was unreachable at
    while (j < records.size() && records[j].node == a.node && !records[j].reachable) ++j;
    if (j >= records.size() || records[j].node != a.node) continue;
    const OffsetRecord& b = records[j];
    reordered = reordered || j > i + 1;
    // Across a gap too (instants the node missed, around its clock step or
    // while it was unreachable): where both timebases cover it, the daemons'
    // bends are known there as anywhere, and only the oscillators' wander
    // is left to the chord. The gap keeps its wider bound (the caller
    // judges gaps by the solved instants, not by these).
    FollowInterval(a, b, Find(timebases, a.node), ref_tb, &out, stats);
  }
  // Instants added across a gap went in before the unreachable ones in it.
  if (reordered) {
    std::stable_sort(out.begin(), out.end(), [](const OffsetRecord& x, const OffsetRecord& y) {
      return x.node != y.node ? x.node < y.node : x.t_ns < y.t_ns;
    });
  }
  return out;
}

}  // namespace chronolink::trace
