// The leader's copy of every node's REALTIME/RAW knots, as the window
// summaries bring them (each window's, once per edge), for the cluster
// timebase beside offsets.jsonl (docs/formats.md "cluster-timebase.jsonl"):
// the trace tools follow every node's discipline from it, with no agent's
// own timebase.jsonl needed. Each decided knot goes out once, in RAW order
// per node and session; a provisional last knot (the open segment's newest
// sample) never does. Where a summary starts after the last knot sent, the
// knots in between never came (a lost window, a leader that took office
// late): the first one after is marked `after_gap`, nothing is assumed
// across it. Pure logic: the caller writes what it takes.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "agent/cluster/cluster_messages.h"

namespace chronolink {

struct RelayedKnot {
  uint32_t node = 0;
  uint64_t session = 0;
  TimebaseKnot knot;
  bool after_gap = false;
};

class TimebaseKnotRelay {
 public:
  void Add(const WindowSummary& w);
  // What came since the last call, in the order it came.
  std::vector<RelayedKnot> Take();
  // Forgets nodes and sessions (a new leader's term starts with gaps).
  void Reset() { last_raw_.clear(); }

 private:
  std::map<std::pair<uint32_t, uint64_t>, int64_t> last_raw_;  // (node, session) -> last knot sent
  std::vector<RelayedKnot> pending_;
};

}  // namespace chronolink
