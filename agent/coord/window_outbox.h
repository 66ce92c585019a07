// Window summaries on their way to the leader. Both backends keep every
// summary for the retention period: undelivered ones wait for the leader
// (or etcd) to come back, and delivered ones can be sent again to a new
// leader after a failover (the leader drops duplicates). Not thread-safe:
// the backend's thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "agent/cluster/cluster_messages.h"

namespace chronolink {

class WindowOutbox {
 public:
  explicit WindowOutbox(int64_t retention_ns) : retention_ns_(retention_ns) {}

  // now_ns: any monotonic clock, the same in every call.
  void Add(std::span<const WindowSummary> windows, int64_t now_ns);
  // Up to `max` windows not yet delivered, oldest first.
  std::vector<WindowSummary> Pending(size_t max) const;
  // The first n of Pending() arrived.
  void MarkDelivered(size_t n);
  // Everything held counts as undelivered again (a new leader); with
  // since_ns, only what was added at or after it.
  void Rewind() { delivered_upto_ = 0; }
  void Rewind(int64_t since_ns);
  // Forgets windows older than the retention.
  void Expire(int64_t now_ns);

  uint64_t published() const { return published_; }
  uint64_t delivered() const { return delivered_; }
  uint64_t dropped() const { return dropped_; }  // expired before their first delivery
  size_t pending() const { return entries_.size() - delivered_upto_; }
  size_t held() const { return entries_.size(); }

 private:
  struct Entry {
    WindowSummary window;
    int64_t added_ns = 0;
    bool ever_delivered = false;
  };
  int64_t retention_ns_;
  std::deque<Entry> entries_;
  size_t delivered_upto_ = 0;  // entries_[0 .. delivered_upto_) are delivered
  uint64_t published_ = 0, delivered_ = 0, dropped_ = 0;
};

}  // namespace chronolink
