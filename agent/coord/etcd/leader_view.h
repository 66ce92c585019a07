// The etcd backend's view of who leads (docs/cluster.md "etcd"), merged by
// revision like MemberView: the loop thread reads the leader key now and
// then, the watch thread applies its events, and a campaign learns the key
// from its transaction. A read answered before a newer event but handled
// after it must not put the older leader back (a dead term, or this node
// believing it still leads):
//  - a change (event, campaign) at or above the newest applied revision
//    applies; an older one does not;
//  - a read applies only when its revision is at or above the newest
//    change applied; a read at a lower revision than the previous read
//    means etcd went back (restored from a backup) and starts over.
// Not thread-safe: the owner locks.
#pragma once

#include <cstdint>
#include <optional>

#include "agent/coord/etcd/etcd_value_codec.h"

namespace chronolink {

class LeaderView {
 public:
  // A read of the leader key at the store's revision (nullopt: absent, or
  // a value that was refused). True if it applied.
  bool ApplyRead(const std::optional<LeaderClaim>& claim, int64_t read_revision);
  // A change at its mod_revision (0: unknown, applies). True if it applied.
  bool ApplyChange(const std::optional<LeaderClaim>& claim, int64_t mod_revision);

  const std::optional<LeaderClaim>& claim() const { return claim_; }

 private:
  std::optional<LeaderClaim> claim_;
  int64_t applied_revision_ = 0;  // of the newest information applied
  int64_t read_revision_ = 0;     // of the last read
};

}  // namespace chronolink
