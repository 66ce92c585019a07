// cluster-timebase.jsonl as columns (docs/formats.md "cluster-timebase.jsonl"):
// what a large cluster's leader writes, because a line per knot costs about
// 160 bytes (17 gzipped) and a 10 000-node cluster makes thousands of knots
// a second. One line holds the knots of one leader turn, grouped by node
// and session; each knot is written as its steps from the one before it of
// its node and session in the same file (REALTIME − RAW moves by a rate ×
// a step: a few digits); a group states where it starts (`starts`) only
// when its node and session have no knot in the file yet. Each file stands alone:
// the encoder starts again after a rotation, and readers decode each file
// of a rotated set from its start.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "agent/cluster/timebase_knot_relay.h"

namespace chronolink {

constexpr const char* kTimebaseColumnsSchema = "chronolink.timebase_columns.v1";

class TimebaseColumnsEncoder {
 public:
  // One columns line (no newline) for `knots`, in the relay's order within
  // each node and session; the encoder remembers each node's last knot.
  std::string Line(std::span<const RelayedKnot> knots);
  // A new file begins: every group states its start again.
  void Restart() { last_.clear(); }

 private:
  struct LastKnot {
    uint64_t session = 0;
    int64_t raw_ns = 0;
    int64_t offset_ns = 0;  // REALTIME − RAW
  };
  std::map<uint32_t, LastKnot> last_;  // by node: a node runs one session at a time
};

}  // namespace chronolink
