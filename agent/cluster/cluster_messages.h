// What agents and the leader tell each other over the coordination channel
// (agent/coord/leader_exchange.h): window summaries from every prober to the
// leader, and solved offsets from the leader back.
// Both travel as JSON text (docs/formats.md, "Coordination messages"), and
// decoding validates every field: a bad message is an error, never garbage.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/solve/global_solver.h"
#include "clock/fit_point.h"
#include "clock/timebase_knots.h"

namespace chronolink {

// One closed window's estimate of one directed edge, as the leader needs it.
struct WindowSummary {
  EdgeEstimate estimate;        // node = prober; x0_ns on the prober's clock
  uint64_t session = 0;         // the prober's session epoch (a restart changes it)
  int64_t window_start_ns = 0;  // prober clock
  std::string estimator;        // "max_margin", "min_delay", ... or kClockStepMarker / kClockBendMarker
  // The prober's REALTIME at the window's centre on its fit clock, which
  // x0 and the estimate are on: the leader maps solutions back to REALTIME
  // with it. Absent: the prober fits in REALTIME (older agents, --fit-clock
  // realtime), the identity.
  std::optional<FitPoint> prober_clock;
  // The prober's fit clock anchor and its REALTIME/RAW knots over the
  // window: the leader maps back through them exactly, following every
  // rate change the daemon made inside the window, and writes them beside
  // offsets.jsonl for the trace tools. Absent (older agents, a window
  // whose knots were not kept or were too many): the point alone.
  std::optional<FitAnchor> prober_anchor;
  std::optional<TimebaseExcerpt> prober_knots;

  // Identifies the window across resends: (node, peer, window_start, session).
  std::string Key() const;
};

// A window discarded because a clock stepped (the prober's, or the peer's):
// no estimate, only where the edge's clocks changed. The leader uses no
// estimate of that edge across it.
inline constexpr std::string_view kClockStepMarker = "clock_step";
// A fit clock of the edge bent (took a new rate without a jump) at the
// marker's x0_ns, on the prober's clock: the window's estimate stands, but
// no estimate of that edge is carried across that instant along its slope.
inline constexpr std::string_view kClockBendMarker = "clock_bend";
// At most this many knots per summary (a PLL changing the rate every second
// makes about 3 per 2 s window); an agent with more sends the point alone.
inline constexpr size_t kMaxSummaryKnots = 64;

std::string EncodeWindowSummary(const WindowSummary& w);
bool DecodeWindowSummary(std::string_view text, WindowSummary* out, std::string* error);
// A batch: a JSON array of summaries.
std::string EncodeWindowSummaries(std::span<const WindowSummary> batch);
bool DecodeWindowSummaries(std::string_view text, std::vector<WindowSummary>* out, std::string* error);
// A batch grouped by window (docs/formats.md "Coordination messages"): a
// node's summaries of one window share their node, session, window start,
// fit point, anchor and knots, which go once, with the union of the edges'
// knots (each edge's excerpt covers its own fit span), and so do the edge
// fields every edge has alike (x0, the estimator); each edge adds the rest
// of its estimate. Under half the bytes of the array form for six peers.
// Decoding checks each summary as DecodeWindowSummary does.
std::string EncodeWindowBatch(std::span<const WindowSummary> batch);
bool DecodeWindowBatch(std::string_view text, std::vector<WindowSummary>* out, std::string* error);

// One solve's result as the leader publishes it.
struct OffsetsSnapshot {
  uint32_t leader = 0;
  uint64_t sequence = 0;               // increases with every publication of a leader
  int64_t reference_instant_ns = 0;    // T, on the reference (cluster) clock
  std::optional<uint32_t> reference_node;  // nullopt: the mean of all nodes
  bool recomputed = false;             // a re-solve of T after late windows
  std::vector<NodeSolution> nodes;

  const NodeSolution* Find(uint32_t node) const;
};

std::string EncodeOffsetsSnapshot(const OffsetsSnapshot& s);
bool DecodeOffsetsSnapshot(std::string_view text, OffsetsSnapshot* out, std::string* error);

}  // namespace chronolink
