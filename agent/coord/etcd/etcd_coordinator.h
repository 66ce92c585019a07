// The etcd backend (docs/cluster.md). etcd holds what it is built for, at a
// write rate that does not grow with the probe graph; keys under the
// configured prefix P:
//   P members/<id>          this node's probe address; bound to its member lease
//                           (long: kept alive once a minute by default)
//   P leader                the leader's id; created by a transaction only when
//                           absent, bound to a lease of its own (short: a dead
//                           leader is replaced within it), its term
//   P graph                 the probe graph the leader sees (for inspection)
// Every value is sealed with a MAC under a subkey of the cluster key and
// bound to its writer's lease (etcd_value_codec.h): what cannot prove its
// writer, its lease and its freshness is refused, counted and logged.
// With https endpoints the connections use the configured CA and client
// certificate (etcd_tls.h); with a user, every request carries an etcd auth
// token (etcd_auth.h). Credentials etcd refuses fail Start, clearly.
// Every node watches the leader key and its own registration; only the
// leader reads and watches members/ (every join would otherwise be one
// watch event per agent: n²/2 over a cluster's start). The leader builds
// the probe graph and gives each node its peers over the channel
// (peer_list.h); a follower finds the leader's address by one read of its
// registration per term.
//
// Window summaries and solutions do not go through etcd: every node keeps
// one authenticated channel connection (docs/coordination-channel.md) to
// the leader etcd names, at its member address and the coordination port,
// and LeaderExchange carries summaries up and each node's own solution
// down. When etcd is down or slow nothing waits, and the data keeps flowing
// to the leader last known; summaries queue (for the retention) while no
// leader is reachable and go to the next one in full.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "agent/cluster/probe_graph.h"
#include "agent/coord/coordinator.h"
#include "agent/coord/etcd/etcd_auth.h"
#include "agent/coord/etcd/etcd_client.h"
#include "agent/coord/etcd/etcd_tls.h"
#include "agent/coord/etcd/etcd_value_codec.h"
#include "agent/coord/etcd/etcd_watcher.h"
#include "agent/coord/etcd/leader_view.h"
#include "agent/coord/etcd/member_view.h"
#include "agent/coord/leader_exchange.h"
#include "agent/coord/secure_channel.h"

namespace chronolink {

// A follower whose leader's registration is missing or refused reads it
// again at most this often (10 000 followers ask etcd); the coordination
// bench's simulated nodes keep the same pace.
inline constexpr int64_t kLeaderMemberRetryNs = 1'000'000'000;

class EtcdCoordinator : public Coordinator {
 public:
  explicit EtcdCoordinator(const CoordinationOptions& options);
  ~EtcdCoordinator() override;

  bool Start(std::string* error) override;
  void Stop() override;
  Membership Members(uint64_t* version) const override;
  void PublishWindows(std::span<const WindowSummary> windows) override;
  bool IsLeader() const override;
  std::vector<WindowSummary> TakeLeaderInbox() override;
  void PublishOffsets(const OffsetsSnapshot& snapshot) override;
  std::optional<OffsetsSnapshot> LatestOffsets(uint64_t* version) const override;
  CoordinatorStatus Status() const override;

 private:
  void Loop();
  // The channel's thread: polls the hub, follows the leader, flushes the
  // exchange; at Stop, the last windows go out (for up to a second).
  bool StartChannel(std::string* error);
  void ChannelLoop();
  void FollowLeader();
  void FlushLastWindows();
  // With TLS or auth: one request at start. A refused certificate or
  // password fails Start (a setting to fix); an unreachable etcd does not
  // (the loop waits for it, as without TLS).
  bool CheckAccess(std::string* error);
  // Each step of a loop turn; false: etcd failed, retry after a backoff.
  bool EnsureMemberLease(int64_t now_ns);
  // While leading: keeps the leader key's lease alive (a third of its TTL).
  bool KeepLeaderLease(int64_t now_ns);
  bool Reload();
  bool Campaign();
  // Whether the view names a leader; if so, no campaign is needed.
  bool HasLeader();
  // Follows this node's role: on taking office it reads and watches every
  // member; on leaving office it stops, and keeps its own neighbours until
  // the next leader gives it its peers. Then, leading: PublishPeers;
  // following: LoadLeaderMember.
  bool FollowRole(int64_t now_ns);
  // Leader: the probe graph of the members, and each node's peers from it,
  // at most once a second while the members change.
  bool PublishPeers(int64_t now_ns);
  bool PublishGraph(int64_t now_ns);
  bool LoadMembers();
  // A follower's check that its registration still stands (the leader's
  // comes with LoadMembers).
  bool LoadOwnRegistration();
  bool LoadLeader();
  // Follower: the registration of the leader named, once per term (its
  // address does not change within one).
  bool LoadLeaderMember(int64_t now_ns);
  // The leader's registration as read for that claim's term; under mutex_.
  std::optional<Member> LeaderMemberLocked(const LeaderClaim& claim) const;
  std::unique_ptr<EtcdWatcher> StartWatch(const std::string& key, bool prefix,
                                          void (EtcdCoordinator::*on_events)(const std::vector<EtcdEvent>&));
  void OnMemberEvents(const std::vector<EtcdEvent>& events);
  void OnOwnKeyEvents(const std::vector<EtcdEvent>& events);
  void OnLeaderEvents(const std::vector<EtcdEvent>& events);
  // Whether our key holds our own registration (a refusal is counted).
  bool IsOwnRegistration(const EtcdKeyValue& kv);
  // Applies what the leader key says at `revision` (a read of it, or a
  // change: an event or a campaign's transaction); false when older than
  // what is held (LeaderView).
  bool UpdateLeader(std::optional<LeaderClaim> leader, int64_t revision, bool from_read);
  void Refuse(EtcdRefusal reason, std::string_view key);
  void NoteError(const std::string& what, const std::string& error);
  void NoteSuccess();
  // Runs the loop now; with reload, re-reads members, leader and offsets
  // first (a watch reconnected or was compacted: events may be missing).
  void Wake(bool reload);

  const CoordinationOptions options_;
  const std::string prefix_;
  EtcdValueCodec codec_;
  EtcdRefusalLog refusals_;
  EtcdClientOptions client_options_;
  std::unique_ptr<EtcdClient> client_;  // the loop thread's
  std::unique_ptr<EtcdWatcher> leader_watch_, own_key_watch_;
  std::unique_ptr<EtcdWatcher> members_watch_;  // while leading; the loop thread's
  std::thread thread_;
  std::unique_ptr<SecureChannelHub> hub_;  // the channel thread's
  std::thread channel_thread_;
  std::atomic<bool> channel_stopping_{false};
  LeaderExchange exchange_;  // windows up, solutions down
  std::optional<uint32_t> channel_leader_;  // the channel thread's: whom the hub connects to
  std::atomic<bool> stopping_{false};
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool wake_flag_ = false;      // under wake_mutex_
  bool reload_needed_ = true;   // under wake_mutex_
  std::atomic<bool> registration_lost_{false};  // our members/ key was deleted or overwritten

  // Loop-thread state.
  int64_t member_lease_ = 0;
  int64_t member_lease_refreshed_ns_ = 0;
  int64_t leader_lease_ = 0;  // granted for a campaign; the term when it won
  int64_t leader_lease_refreshed_ns_ = 0;
  std::optional<ProbeGraph> graph_;  // leader: of the members at graph_members_version_
  uint64_t graph_members_version_ = 0;
  std::optional<int64_t> peers_published_ns_;  // MONOTONIC
  uint64_t graph_version_published_ = 0;
  int64_t leader_member_retry_ns_ = 0;
  std::optional<int64_t> graph_published_ns_;  // MONOTONIC; none since this process started
  int64_t next_retry_ns_ = 0;
  int64_t backoff_ns_ = 0;

  mutable std::mutex mutex_;  // everything below
  MemberView members_;  // reads and watch events merged by revision
  uint64_t members_version_ = 1;
  LeaderView leader_view_;  // reads, events and campaigns merged by revision
  bool leading_ = false;    // in office: members_ is complete and watched (written by the loop thread)
  // The registration of the leader named, and the term it was read for.
  std::optional<std::pair<int64_t, Member>> leader_member_;
  bool campaign_needed_ = true;
  CoordinatorStatus status_;
  ChannelStats channel_stats_;  // copied from the hub by the channel thread
  std::string last_error_;
};

}  // namespace chronolink
