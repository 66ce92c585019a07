// How a node probes each of its edges: the pair cadence (fixed or adaptive),
// the pilot, follow-ups and the bounds on pending tuples. The agent's
// configuration fills it (agent/config); the probe engine only reads it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chronolink {

struct ProbeSettings {
  // Gap between the two probes of a pair; 0: back to back in one sendmmsg
  // (one wake-up per pair: the every-probe fit needs no set spacing).
  int64_t spacing_ns = 0;
  // One pair per interval per edge: the slowest cadence when adaptive.
  int64_t interval_ns = 50'000'000;
  // Adaptive cadence (agent/estimate/probe_cadence.h): faster, down to
  // fastest_interval_ns (0: interval / 8), while an edge's windows need it.
  bool adaptive = true;
  int64_t fastest_interval_ns = 0;
  int target_pure_points = 16;
  double target_uncertainty_ns = 0;  // 0: none
  double jitter_fraction = 0.2;        // +/- uniform jitter on the interval
  int64_t tuple_timeout_ns = 500'000'000;   // incomplete tuples expire after this
  // Send a follow-up if no next pair by then. Unset in the configuration it
  // is 2.5 intervals, so that the next pair, not a datagram of its own,
  // normally carries the TX stamps.
  int64_t followup_delay_ns = 50'000'000;
  size_t max_pending_tuples = 4096;         // per edge, bounds memory
  // A pilot datagram this long before each forward pair wakes the path, so
  // that the pair's two probes see it alike (docs/protocol.md "Pilot");
  // with lead 0 it leads the pair in the same sendmmsg. --probe-pilot auto
  // turns it on for intervals of 2 ms and more (the default's).
  bool pilot = false;
  int64_t pilot_lead_ns = 0;
  // The responder leads its reverse pair with a pilot too (in the same
  // sendmmsg). With the forward pair alone warmed, its probes met a faster
  // path than the reverse ones, and the max-margin line, midway between the
  // two directions' fastest, leaned to the prober's side: every routed edge
  // erred the same way in its prober's frame (docs/protocol.md "Pilot").
  bool reverse_pilot = false;
  // Each forward pair echoes our receive stamps of the peer's previous
  // reverse pair, so that the peer holds our whole tuple too and can fit its
  // side of the edge on both sessions' probes (docs/protocol.md "Forward
  // pair"). Off only to stand in for an older peer in tests.
  bool echo_reverse_rx = true;
};

}  // namespace chronolink
