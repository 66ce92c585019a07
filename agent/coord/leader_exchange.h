// The data plane between the agents and their leader (docs/cluster.md,
// "What travels where"): window summaries go up, each node's own solution
// comes down, over the authenticated coordination channel
// (docs/coordination-channel.md). Both backends use it; they differ only in
// how they know who leads (the static backend from its channel, the etcd
// backend from the leader key) and say so with SetLeader.
//
// Its rules, in one place:
// - every summary is kept for the retention, and those of the last
//   resend_ns (what a new leader solves back over) are sent again to a new
//   leader, or to the same one when its link comes back (it may have
//   restarted); the leader drops duplicates;
// - the leader keeps only the summaries a peer probed itself (the channel
//   authenticated the peer's id), counts the rest as "wrong_writer";
// - the leader sends each node its own solution (the snapshot's header and
//   that node's row), not the cluster's: traffic grows with n, not n²; a
//   node that connects later gets the latest at once;
// - a node takes offsets only from the leader it knows, under that
//   leader's term;
// - where the leader decides the probe graph (etcd), it sends each node its
//   peers (peer_list.h) when they change and whenever the node's link comes
//   up; a node takes them only from the leader it knows, and keeps the last
//   ones while it knows none.
//
// Thread-safe. Flush, OnMessage and OnLinkUp touch the hub and run on the
// thread that polls it; the rest may run on any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "agent/cluster/cluster_messages.h"
#include "agent/coord/coordinator.h"
#include "agent/coord/peer_list.h"
#include "agent/coord/secure_channel.h"
#include "agent/coord/window_outbox.h"

namespace chronolink {

// The header of `s` without any node's row.
OffsetsSnapshot HeaderOf(const OffsetsSnapshot& s);
// The header of `s` and node's row, if it has one: what that node needs.
OffsetsSnapshot OwnPartOf(const OffsetsSnapshot& s, uint32_t node);

// Counters of a hub, by the names CoordinatorStatus::channel uses.
std::map<std::string, uint64_t> ChannelCounters(const ChannelStats& c);

class LeaderExchange {
 public:
  // Message types on the channel (>= kChannelFirstUserType).
  static constexpr uint16_t kWindowsMessage = 16;      // a JSON array of summaries (received only)
  static constexpr uint16_t kOffsetsMessage = 17;
  static constexpr uint16_t kWindowBatchMessage = 18;  // grouped by window (EncodeWindowBatch): sent
  static constexpr uint16_t kPeersMessage = 19;        // a node's peers (EncodePeerList)

  // retention_ns: how long summaries are kept; resend_ns: how much of that
  // goes again to a new leader (what it can use: TakeoverResendNs).
  LeaderExchange(uint32_t self, int64_t retention_ns, std::string log_name, int64_t resend_ns = 0);

  // Who leads now and under which term (any number that changes with the
  // leader: etcd's leader lease, a count of elections). nullopt: nobody.
  void SetLeader(std::optional<uint32_t> leader, int64_t term);
  std::optional<uint32_t> leader() const;

  // This node's closed windows, for whoever leads.
  void PublishWindows(std::span<const WindowSummary> windows);
  // Leader: every summary received (its own included) since the last call.
  std::vector<WindowSummary> TakeInbox();
  // Leader: a solved instant. Kept whole here; each node gets its own part.
  void PublishOffsets(const OffsetsSnapshot& snapshot);
  std::optional<OffsetsSnapshot> Latest(uint64_t* version) const;
  // The version Latest would give, without copying the snapshot.
  uint64_t LatestVersion() const;

  // Leader: every node's peers, by node. A node is sent its list when it
  // differs from the one it was last given, and whenever its link comes up.
  void PublishPeers(std::unordered_map<uint32_t, std::vector<Member>> by_node);
  // Follower: the newest list from the leader we know, and a version that
  // changes with it; nullopt before the first. SetOwnPeers stands in for it
  // (a leader that steps down keeps probing its neighbours meanwhile).
  std::optional<PeerList> Peers(uint64_t* version) const;
  void SetOwnPeers(PeerList list);

  // The hub's thread: sends what is due (windows to the leader, offsets to
  // their nodes); false when something is still waiting (the leader's link
  // is down or its queue full).
  bool Flush(SecureChannelHub& hub, int64_t now_ns);
  // The hub's thread: a message (true when it was one of ours) and a link
  // that came up.
  bool OnMessage(uint32_t peer, uint16_t type, std::string_view payload);
  void OnLinkUp(SecureChannelHub& hub, uint32_t peer);

  // windows_*, offsets_received, refused (wrong_writer) and errors.
  void FillStatus(CoordinatorStatus* status) const;

 private:
  bool Supersedes(const OffsetsSnapshot& candidate, int64_t term) const;
  void Take(OffsetsSnapshot s, int64_t term);
  void KeepOwnSummaries(uint32_t peer, std::vector<WindowSummary>* batch);
  void SendOwnPart(SecureChannelHub& hub, uint32_t peer, const OffsetsSnapshot& s);
  // Sends each due node that is up its peers; false when a queue was full.
  bool FlushPeers(SecureChannelHub& hub);
  bool SendPeers(SecureChannelHub& hub, uint32_t peer);
  void TakePeers(uint32_t peer, std::string_view payload);

  const uint32_t self_;
  const std::string log_name_;
  const int64_t resend_ns_;  // 0: all that is kept

  mutable std::mutex mutex_;  // everything below
  std::optional<uint32_t> leader_;
  int64_t term_ = 0;
  std::optional<uint32_t> sent_to_;  // the leader the outbox last went to
  bool sent_to_link_up_ = false;
  std::vector<WindowSummary> incoming_;  // published, not yet in the outbox
  WindowOutbox outbox_;
  std::vector<WindowSummary> inbox_;
  std::vector<OffsetsSnapshot> to_send_;  // leader: solved, not yet sent
  std::unordered_map<uint32_t, std::vector<Member>> peer_lists_;  // leader: every node's
  std::unordered_set<uint32_t> peers_due_;                        // leader: changed, not yet sent
  std::optional<PeerList> peers_;                                 // follower: ours
  uint64_t peers_version_ = 0;
  uint64_t peers_received_ = 0;
  std::optional<OffsetsSnapshot> latest_;
  int64_t latest_term_ = 0;
  uint64_t latest_version_ = 0;
  uint64_t offsets_received_ = 0;
  uint64_t errors_ = 0;
  uint64_t refused_ = 0;
  int64_t last_refusal_log_ns_ = 0;  // CLOCK_MONOTONIC
  uint64_t unlogged_refusals_ = 0;
};

}  // namespace chronolink
