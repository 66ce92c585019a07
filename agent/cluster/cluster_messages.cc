#include "agent/cluster/cluster_messages.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace chronolink {
namespace {

using nlohmann::json;

// Field readers that refuse wrong types and ranges with the field's name.
struct FieldError {
  std::string what;
};

// Where a message's fields are found: one JSON object, or an edge of a
// grouped window batch and then its window (the edge's value where it has
// one), so that a batch's summaries are read in place, not copied out.
struct FieldSource {
  FieldSource(const json& object) : first(&object) {}  // NOLINT: any object is a source
  FieldSource(const json& edge, const json& window) : first(&edge), second(&window) {}

  const json* Find(const char* name) const {
    if (const auto it = first->find(name); it != first->end()) return &*it;
    if (second != nullptr) {
      if (const auto it = second->find(name); it != second->end()) return &*it;
    }
    return nullptr;
  }
  bool Contains(const char* name) const { return Find(name) != nullptr; }

  const json* first;
  const json* second = nullptr;
};

const json& Field(const FieldSource& j, const char* name) {
  const json* v = j.Find(name);
  if (v == nullptr) throw FieldError{std::string("missing field \"") + name + "\""};
  return *v;
}

template <typename Int>
Int IntValue(const json& v, const char* name) {
  if (!v.is_number_integer()) throw FieldError{std::string("\"") + name + "\" is not an integer"};
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<Int>::max()))
      throw FieldError{std::string("\"") + name + "\" is out of range"};
    return static_cast<Int>(u);
  }
  const int64_t s = v.get<int64_t>();
  if (s < static_cast<int64_t>(std::numeric_limits<Int>::min()) ||
      (s > 0 && static_cast<uint64_t>(s) > static_cast<uint64_t>(std::numeric_limits<Int>::max())))
    throw FieldError{std::string("\"") + name + "\" is out of range"};
  return static_cast<Int>(s);
}

template <typename Int>
Int IntField(const FieldSource& j, const char* name) {
  return IntValue<Int>(Field(j, name), name);
}

double FiniteField(const FieldSource& j, const char* name) {
  const json& v = Field(j, name);
  if (!v.is_number()) throw FieldError{std::string("\"") + name + "\" is not a number"};
  const double d = v.get<double>();
  if (!std::isfinite(d)) throw FieldError{std::string("\"") + name + "\" is not finite"};
  return d;
}

// 64-bit ids travel as decimal strings: JSON readers elsewhere (JavaScript,
// jq) lose integers above 2^53. Digits only, in range: no sign, space, hex
// or trailing text (std::stoull took "-1" as 2^64 - 1 and "12abc" as 12).
uint64_t DecimalField(const FieldSource& j, const char* name) {
  const json& v = Field(j, name);
  const std::string not_decimal = std::string("\"") + name + "\" is not a decimal string";
  if (!v.is_string()) throw FieldError{not_decimal};
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) throw FieldError{not_decimal};
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range) throw FieldError{std::string("\"") + name + "\" is out of range"};
  if (ec != std::errc() || end != s.data() + s.size()) throw FieldError{not_decimal};
  return value;
}

// REALTIME's rate against the fit clock: a daemon's slew (chronyd up to
// 8.3 %, the PLL's phase up to 12.5 %/s) plus the anchor's own; beyond 25 %
// it is no clock's. (It was 0.1 %, and a timesyncd model slewing at 920 ppm
// against a fit clock anchored at -919 ppm had its batches refused.)
constexpr int64_t kMaxFitRateFine = 250'000'000'000'000;
constexpr double kMaxFitRate = 0.25;

// A fit clock's rate field (a point's, an anchor's): within 25 %.
int64_t FitRateField(const FieldSource& j) {
  const auto rate = IntField<int64_t>(j, "rate_fine");
  if (rate > kMaxFitRateFine || rate < -kMaxFitRateFine) throw FieldError{"\"rate_fine\" beyond 25 %"};
  return rate;
}

const json& ObjectField(const FieldSource& j, const char* name) {
  const json& v = Field(j, name);
  if (!v.is_object()) throw FieldError{std::string("\"") + name + "\" is not a JSON object"};
  return v;
}

FitPoint FitPointFromJson(const json& j) {
  return FitPoint{IntField<int64_t>(j, "fit_ns"), IntField<int64_t>(j, "realtime_ns"), FitRateField(j)};
}

FitAnchor FitAnchorFromJson(const json& j) {
  return FitAnchor{IntField<int64_t>(j, "raw_ns"), IntField<int64_t>(j, "realtime_ns"), FitRateField(j)};
}

// Knots as [raw_ns, realtime_ns] pairs, increasing in both, no slower or
// faster than a slew against each other.
TimebaseExcerpt KnotsFromJson(const json& j) {
  const json& k = Field(j, "knots");
  if (!k.is_array() || k.size() < 2 || k.size() > kMaxSummaryKnots) {
    throw FieldError{"\"knots\" is not an array of 2 to " + std::to_string(kMaxSummaryKnots) + " knots"};
  }
  TimebaseExcerpt e;
  for (const json& pair : k) {
    if (!pair.is_array() || pair.size() != 2) {
      throw FieldError{"a knot is not a pair of integers [raw_ns, realtime_ns]"};
    }
    TimebaseKnot knot;
    knot.raw_ns = IntValue<int64_t>(pair[0], "knot raw_ns");
    knot.realtime_ns = IntValue<int64_t>(pair[1], "knot realtime_ns");
    if (!e.knots.empty()) {
      const TimebaseKnot& prev = e.knots.back();
      const long double d_raw = static_cast<long double>(knot.raw_ns) - prev.raw_ns;
      const long double d_rt = static_cast<long double>(knot.realtime_ns) - prev.realtime_ns;
      if (!(d_raw > 0) || !(d_rt > 0.75L * d_raw) || !(d_rt < 1.25L * d_raw)) {
        throw FieldError{"knots do not increase in both clocks at a rate within 25 % of each other"};
      }
    }
    e.knots.push_back(knot);
  }
  const json& provisional = Field(j, "last_provisional");
  if (!provisional.is_boolean()) throw FieldError{"\"last_provisional\" is not a boolean"};
  e.last_provisional = provisional.get<bool>();
  return e;
}

json SummaryToJson(const WindowSummary& w) {
  json j{{"node", w.estimate.node},
         {"peer", w.estimate.peer},
         {"session", std::to_string(w.session)},
         {"window_start_ns", w.window_start_ns},
         {"x0_ns", w.estimate.x0_ns},
         {"beta_ns", w.estimate.beta_ns},
         {"alpha", w.estimate.alpha},
         {"uncertainty_ns", w.estimate.uncertainty_ns},
         {"estimator", w.estimator}};
  if (w.estimate.shared_ns) j["shared_ns"] = *w.estimate.shared_ns;  // absent: unknown (and older agents)
  if (w.prober_clock) {
    j["prober_clock"] = {{"fit_ns", w.prober_clock->fit_ns},
                         {"realtime_ns", w.prober_clock->realtime_ns},
                         {"rate_fine", w.prober_clock->rate_fine}};
  }
  if (w.prober_anchor && w.prober_knots) {
    json knots = json::array();
    for (const TimebaseKnot& k : w.prober_knots->knots) knots.push_back(json::array({k.raw_ns, k.realtime_ns}));
    j["prober_timebase"] = {{"anchor",
                             {{"raw_ns", w.prober_anchor->raw_ns},
                              {"realtime_ns", w.prober_anchor->realtime_ns},
                              {"rate_fine", w.prober_anchor->rate_fine}}},
                            {"knots", std::move(knots)},
                            {"last_provisional", w.prober_knots->last_provisional}};
  }
  return j;
}

// A window's prober clock fields, read once for all its edges.
struct ProberFields {
  bool read = false;
  std::optional<FitPoint> clock;
  std::optional<FitAnchor> anchor;
  std::optional<TimebaseExcerpt> knots;
};

void ReadProberFields(const FieldSource& j, ProberFields* p) {
  if (j.Contains("prober_clock")) p->clock = FitPointFromJson(ObjectField(j, "prober_clock"));
  if (j.Contains("prober_timebase")) {
    const json& t = ObjectField(j, "prober_timebase");
    p->anchor = FitAnchorFromJson(ObjectField(t, "anchor"));
    p->knots = KnotsFromJson(t);
  }
  p->read = true;
}

// One summary's fields from `j`, checked in one order whatever holds them;
// `prober` (optional) keeps the window's prober fields once read.
WindowSummary SummaryFromFields(const FieldSource& j, ProberFields* prober = nullptr) {
  WindowSummary w;
  w.estimate.node = IntField<uint32_t>(j, "node");
  w.estimate.peer = IntField<uint32_t>(j, "peer");
  if (w.estimate.node == w.estimate.peer) throw FieldError{"\"node\" and \"peer\" are the same"};
  w.session = DecimalField(j, "session");
  w.window_start_ns = IntField<int64_t>(j, "window_start_ns");
  w.estimate.x0_ns = IntField<int64_t>(j, "x0_ns");
  w.estimate.beta_ns = FiniteField(j, "beta_ns");
  w.estimate.alpha = FiniteField(j, "alpha");
  if (std::fabs(w.estimate.alpha) > 0.01) throw FieldError{"\"alpha\" beyond 10000 ppm"};
  w.estimate.uncertainty_ns = FiniteField(j, "uncertainty_ns");
  if (w.estimate.uncertainty_ns < 0) throw FieldError{"\"uncertainty_ns\" is negative"};
  if (j.Contains("shared_ns")) {
    const double shared = FiniteField(j, "shared_ns");
    if (shared < 0 || shared > w.estimate.uncertainty_ns) {
      throw FieldError{"\"shared_ns\" is not within [0, uncertainty_ns]"};
    }
    w.estimate.shared_ns = shared;
  }
  const json& e = Field(j, "estimator");
  if (!e.is_string()) throw FieldError{"\"estimator\" is not a string"};
  w.estimator = e.get<std::string>();
  ProberFields own;
  if (prober == nullptr) prober = &own;
  if (!prober->read) ReadProberFields(j, prober);
  w.prober_clock = prober->clock;
  w.prober_anchor = prober->anchor;
  w.prober_knots = prober->knots;
  return w;
}

WindowSummary SummaryFromJson(const json& j) {
  if (!j.is_object()) throw FieldError{"a window summary is not a JSON object"};
  return SummaryFromFields(j);
}

json NullableNumber(bool present, double v) { return present ? json(v) : json(nullptr); }

json SolutionToJson(const NodeSolution& s) {
  json j{{"node", s.node},
         {"reachable", s.reachable},
         {"offset_ns", NullableNumber(s.reachable, s.offset_ns)},
         {"drift", NullableNumber(s.reachable, s.drift)},
         {"uncertainty_ns", NullableNumber(s.reachable, s.uncertainty_ns)},
         {"residual_ns", NullableNumber(s.reachable, s.residual_ns)},
         {"component", s.component},
         {"edges_used", s.edges_used}};
  if (s.reachable && s.discipline) j["discipline"] = json{{"d_ns", s.discipline->d_ns}, {"rate", s.discipline->rate}};
  if (s.reachable && s.page_drift) j["page_drift"] = *s.page_drift;
  return j;
}

// REALTIME − F stays within the fit clock's allowed divergence (20 ms by
// default; an hour is beyond any), its rate within the 25 % any REALTIME
// against F may have.
FitDiscipline DisciplineFromJson(const FieldSource& j) {
  FitDiscipline d;
  d.d_ns = IntField<int64_t>(j, "d_ns");
  d.rate = FiniteField(j, "rate");
  if (std::llabs(d.d_ns) > 3'600'000'000'000) throw FieldError{"\"discipline.d_ns\" is beyond an hour"};
  if (!(std::abs(d.rate) <= kMaxFitRate)) throw FieldError{"\"discipline.rate\" is beyond 25 %"};
  return d;
}

NodeSolution SolutionFromJson(const json& j) {
  if (!j.is_object()) throw FieldError{"a node solution is not a JSON object"};
  NodeSolution s;
  s.node = IntField<uint32_t>(j, "node");
  const json& r = Field(j, "reachable");
  if (!r.is_boolean()) throw FieldError{"\"reachable\" is not a boolean"};
  s.reachable = r.get<bool>();
  if (s.reachable) {
    s.offset_ns = FiniteField(j, "offset_ns");
    s.drift = FiniteField(j, "drift");
    s.uncertainty_ns = FiniteField(j, "uncertainty_ns");
    s.residual_ns = FiniteField(j, "residual_ns");
  }
  s.component = IntField<int>(j, "component");
  s.edges_used = IntField<int>(j, "edges_used");
  if (s.reachable && j.contains("discipline")) s.discipline = DisciplineFromJson(ObjectField(j, "discipline"));
  if (s.reachable && j.contains("page_drift")) {
    s.page_drift = FiniteField(j, "page_drift");
    if (!(std::abs(*s.page_drift) <= kMaxFitRate)) throw FieldError{"\"page_drift\" is beyond 25 %"};
  }
  return s;
}

template <typename Fn>
bool Guarded(std::string* error, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const FieldError& e) {
    *error = e.what;
  } catch (const json::exception& e) {
    *error = std::string("malformed JSON: ") + e.what();
  }
  return false;
}

}  // namespace

std::string WindowSummary::Key() const {
  return std::to_string(estimate.node) + "/" + std::to_string(estimate.peer) + "/" +
         std::to_string(window_start_ns) + "/" + std::to_string(session);
}

std::string EncodeWindowSummary(const WindowSummary& w) { return SummaryToJson(w).dump(); }

bool DecodeWindowSummary(std::string_view text, WindowSummary* out, std::string* error) {
  return Guarded(error, [&] { *out = SummaryFromJson(json::parse(text)); });
}

std::string EncodeWindowSummaries(std::span<const WindowSummary> batch) {
  json a = json::array();
  for (const WindowSummary& w : batch) a.push_back(SummaryToJson(w));
  return a.dump();
}

bool DecodeWindowSummaries(std::string_view text, std::vector<WindowSummary>* out, std::string* error) {
  return Guarded(error, [&] {
    const json a = json::parse(text);
    if (!a.is_array()) throw FieldError{"a window batch is not a JSON array"};
    std::vector<WindowSummary> batch;
    batch.reserve(a.size());
    for (const json& j : a) batch.push_back(SummaryFromJson(j));
    *out = std::move(batch);
  });
}

namespace {

// What a node's summaries of one window share; the rest is the edge's.
constexpr const char* kEdgeFields[] = {"peer", "x0_ns", "beta_ns", "alpha", "uncertainty_ns", "shared_ns", "estimator"};

bool SameWindowOfOneNode(const WindowSummary& a, const WindowSummary& b) {
  return a.estimate.node == b.estimate.node && a.session == b.session && a.window_start_ns == b.window_start_ns &&
         a.prober_clock == b.prober_clock && a.prober_anchor == b.prober_anchor &&
         a.prober_knots.has_value() == b.prober_knots.has_value();
}

// The union of two excerpts of one timebase, sorted by RAW; nullopt where
// they disagree on a knot or the union is longer than a summary may carry.
std::optional<TimebaseExcerpt> KnotUnion(const TimebaseExcerpt& a, const TimebaseExcerpt& b) {
  std::map<int64_t, TimebaseKnot> by_raw;
  for (const TimebaseExcerpt* e : {&a, &b}) {
    for (const TimebaseKnot& k : e->knots) {
      const auto [it, inserted] = by_raw.emplace(k.raw_ns, k);
      if (!inserted && !(it->second == k)) return std::nullopt;
    }
  }
  if (by_raw.size() > kMaxSummaryKnots) return std::nullopt;
  TimebaseExcerpt u;
  for (const auto& [raw, k] : by_raw) u.knots.push_back(k);
  const int64_t last = u.knots.back().raw_ns;
  u.last_provisional = (a.knots.back().raw_ns == last && a.last_provisional) ||
                       (b.knots.back().raw_ns == last && b.last_provisional);
  return u;
}

struct WindowGroup {
  WindowSummary head;  // the shared fields, and the knots of all its edges
  std::vector<const WindowSummary*> edges;
};

std::vector<WindowGroup> GroupByWindow(std::span<const WindowSummary> batch) {
  std::vector<WindowGroup> groups;
  for (const WindowSummary& w : batch) {
    bool placed = false;
    for (WindowGroup& g : groups) {
      if (!SameWindowOfOneNode(g.head, w)) continue;
      if (w.prober_knots) {
        std::optional<TimebaseExcerpt> u = KnotUnion(*g.head.prober_knots, *w.prober_knots);
        if (!u) continue;
        g.head.prober_knots = std::move(u);
      }
      g.edges.push_back(&w);
      placed = true;
      break;
    }
    if (!placed) groups.push_back(WindowGroup{w, {&w}});
  }
  return groups;
}

}  // namespace

std::string EncodeWindowBatch(std::span<const WindowSummary> batch) {
  json windows = json::array();
  for (const WindowGroup& g : GroupByWindow(batch)) {
    json shared = SummaryToJson(g.head);
    std::vector<json> full;
    for (const WindowSummary* w : g.edges) full.push_back(SummaryToJson(*w));
    json edges = json::array();
    for (size_t i = 0; i < full.size(); ++i) edges.push_back(json::object());
    for (const char* f : kEdgeFields) {
      shared.erase(f);
      // A value every edge has (the window's centre, the estimator) goes
      // with the window; the others with each edge.
      const bool common = std::all_of(full.begin(), full.end(), [&](const json& j) {
        return j.contains(f) == full[0].contains(f) && (!j.contains(f) || j[f] == full[0][f]);
      });
      if (common && full[0].contains(f)) shared[f] = full[0][f];
      if (common) continue;
      for (size_t i = 0; i < full.size(); ++i) {
        if (full[i].contains(f)) edges[i][f] = full[i][f];
      }
    }
    shared["edges"] = std::move(edges);
    windows.push_back(std::move(shared));
  }
  return json{{"windows", std::move(windows)}}.dump();
}

bool DecodeWindowBatch(std::string_view text, std::vector<WindowSummary>* out, std::string* error) {
  return Guarded(error, [&] {
    const json doc = json::parse(text);
    if (!doc.is_object()) throw FieldError{"a window batch is not a JSON object"};
    const json& windows = Field(doc, "windows");
    if (!windows.is_array()) throw FieldError{"\"windows\" is not an array"};
    std::vector<WindowSummary> batch;
    for (const json& g : windows) {
      if (!g.is_object()) throw FieldError{"a window of a batch is not a JSON object"};
      const json& edges = Field(g, "edges");
      if (!edges.is_array() || edges.empty()) throw FieldError{"\"edges\" is not a non-empty array"};
      ProberFields prober;  // the window's, read at its first edge
      for (const json& e : edges) {
        if (!e.is_object()) throw FieldError{"an edge of a window is not a JSON object"};
        for (const auto& [k, v] : e.items()) {
          if (std::find(std::begin(kEdgeFields), std::end(kEdgeFields), k) == std::end(kEdgeFields)) {
            throw FieldError{"\"" + k + "\" is not a field of an edge"};
          }
        }
        // The edge's fields, then the window's (but its "edges"): one
        // summary, checked whole, as if the two were merged into one.
        batch.push_back(SummaryFromFields(FieldSource(e, g), &prober));
      }
    }
    *out = std::move(batch);
  });
}

const NodeSolution* OffsetsSnapshot::Find(uint32_t node) const {
  for (const NodeSolution& s : nodes) {
    if (s.node == node) return &s;
  }
  return nullptr;
}

std::string EncodeOffsetsSnapshot(const OffsetsSnapshot& s) {
  json nodes = json::array();
  for (const NodeSolution& n : s.nodes) nodes.push_back(SolutionToJson(n));
  return json{{"leader", s.leader},
              {"sequence", std::to_string(s.sequence)},
              {"t_ns", s.reference_instant_ns},
              {"reference", s.reference_node ? json(*s.reference_node) : json("mean")},
              {"recomputed", s.recomputed},
              {"nodes", nodes}}
      .dump();
}

bool DecodeOffsetsSnapshot(std::string_view text, OffsetsSnapshot* out, std::string* error) {
  return Guarded(error, [&] {
    const json j = json::parse(text);
    if (!j.is_object()) throw FieldError{"an offsets snapshot is not a JSON object"};
    OffsetsSnapshot s;
    s.leader = IntField<uint32_t>(j, "leader");
    s.sequence = DecimalField(j, "sequence");
    s.reference_instant_ns = IntField<int64_t>(j, "t_ns");
    const json& ref = Field(j, "reference");
    if (ref.is_string()) {
      if (ref.get<std::string>() != "mean") throw FieldError{"\"reference\" is neither a node id nor \"mean\""};
    } else {
      s.reference_node = IntField<uint32_t>(j, "reference");
    }
    const json& r = Field(j, "recomputed");
    if (!r.is_boolean()) throw FieldError{"\"recomputed\" is not a boolean"};
    s.recomputed = r.get<bool>();
    const json& nodes = Field(j, "nodes");
    if (!nodes.is_array()) throw FieldError{"\"nodes\" is not an array"};
    for (const json& n : nodes) s.nodes.push_back(SolutionFromJson(n));
    *out = std::move(s);
  });
}

}  // namespace chronolink
