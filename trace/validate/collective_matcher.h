// Matches collective events across hosts (docs/validate.md, "Matching"):
// events with the same match key (family, communicator/group when the
// trace names one, XLA instruction, host or device side) form one stream
// per participant; the k-th instance of a stream matches the k-th of every
// other participant's, or the instance with the same sequence number where
// the trace gives one (Kineto "Seq", XLA step_num). Instances missing on
// some participants are counted unmatched, never guessed. Point-to-point
// halves are paired per (group, sender rank, receiver rank) channel in
// order when the trace names the peer and the trace's own rank is known;
// otherwise they are counted as skipped. Pure; one call per thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trace/validate/collective_events.h"

namespace chronolink::trace {

// One collective instance seen by every participant of its key.
struct MatchedInstance {
  std::string family;
  std::string key;
  std::optional<int64_t> seq;  // the trace's sequence number, when it gave one
  int64_t ordinal = 0;         // k-th instance of the key (of this seq, when seq is set)
  Dependency dependency = Dependency::kUnknown;
  // Happens-before applies: every rank depends on every other
  // (Dependency::kAllRanks) and every event's span covers the rendezvous.
  bool checked = false;
  std::vector<const CollectiveEvent*> events;  // one per participant
};

// A send and the receive that took its data.
struct MatchedTransfer {
  std::string key;  // "<send family> -> <recv family> group=<g> rank a -> rank b"
  int64_t ordinal = 0;
  bool checked = false;  // both spans cover the transfer
  const CollectiveEvent* send = nullptr;
  const CollectiveEvent* recv = nullptr;
};

struct FamilyMatchCounts {
  Dependency dependency = Dependency::kUnknown;
  int64_t events = 0;
  int64_t matched_instances = 0;  // instances, or transfers for a send/recv family
  int64_t unmatched_events = 0;
  int64_t checked_instances = 0;
  std::set<std::string> notes;  // why events went unmatched or unchecked
};

struct MatchResult {
  std::vector<MatchedInstance> instances;
  std::vector<MatchedTransfer> transfers;
  std::map<std::string, FamilyMatchCounts> families;
};

// `trace_ranks[i]`: the rank of trace i (point-to-point matching needs it),
// nullopt when unknown. Events must outlive the result.
MatchResult MatchCollectives(const std::vector<CollectiveEvent>& events,
                             const std::vector<std::optional<int64_t>>& trace_ranks);

}  // namespace chronolink::trace
