// The etcd backend (docs/cluster.md). Keys under the configured prefix P:
//   P members/<id>          this node's probe address; bound to its member lease
//   P leader                the leader's id; created by a transaction only when
//                           absent, bound to the leader's member lease
//   P windows/<node>/...    every window summary; bound to a window lease
//                           whose TTL is the retention
//   P offsets/latest        the newest solved instant (leader)
//   P graph                 the probe graph the leader sees (for inspection)
// Every value is sealed with a MAC under a subkey of the cluster key and
// bound to its writer's lease (etcd_value_codec.h): what cannot prove its
// writer, its lease and its freshness is refused, counted and logged.
// With https endpoints the connections use the configured CA and client
// certificate (etcd_tls.h); with a user, every request carries an etcd auth
// token (etcd_auth.h). Credentials etcd refuses fail Start, clearly.
// Watches keep the member list, the leader and the offsets current; the
// leader also watches windows/. When etcd is down or slow nothing waits:
// summaries queue (for the retention) and go out when it answers again.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/coord/coordinator.h"
#include "agent/coord/etcd/etcd_auth.h"
#include "agent/coord/etcd/etcd_client.h"
#include "agent/coord/etcd/etcd_tls.h"
#include "agent/coord/etcd/etcd_value_codec.h"
#include "agent/coord/etcd/etcd_watcher.h"
#include "agent/coord/etcd/leader_view.h"
#include "agent/coord/etcd/member_view.h"
#include "agent/coord/window_outbox.h"

namespace chronolink {

class EtcdCoordinator : public Coordinator {
 public:
  explicit EtcdCoordinator(const CoordinationOptions& options);
  ~EtcdCoordinator() override;

  bool Start(std::string* error) override;
  void Stop() override;
  std::vector<Member> Members(uint64_t* version) const override;
  void PublishWindows(std::span<const WindowSummary> windows) override;
  bool IsLeader() const override;
  std::vector<WindowSummary> TakeLeaderInbox() override;
  void PublishOffsets(const OffsetsSnapshot& snapshot) override;
  std::optional<OffsetsSnapshot> LatestOffsets(uint64_t* version) const override;
  CoordinatorStatus Status() const override;

 private:
  void Loop();
  // With TLS or auth: one request at start. A refused certificate or
  // password fails Start (a setting to fix); an unreachable etcd does not
  // (the loop waits for it, as without TLS).
  bool CheckAccess(std::string* error);
  void FlushLastWindows();
  // Each step of a loop turn; false: etcd failed, retry after a backoff.
  bool EnsureMemberLease(int64_t now_ns);
  bool Reload();
  bool Campaign();
  bool ManageWindowWatch();
  bool EnsureWindowLease(int64_t now_ns);
  bool FlushWindows();
  bool FlushOffsets();
  bool PublishGraph();
  bool LoadMembers();
  bool LoadLeader();
  bool LoadOffsets();
  void OnMemberEvents(const std::vector<EtcdEvent>& events);
  void OnLeaderEvents(const std::vector<EtcdEvent>& events);
  void OnOffsetEvents(const std::vector<EtcdEvent>& events);
  void OnWindowEvents(const std::vector<EtcdEvent>& events);
  // Whether our key holds our own registration (a refusal is counted).
  bool IsOwnRegistration(const EtcdKeyValue& kv);
  // Applies what the leader key says at `revision` (a read of it, or a
  // change: an event or a campaign's transaction); false when older than
  // what is held (LeaderView).
  bool UpdateLeader(std::optional<LeaderClaim> leader, int64_t revision, bool from_read);
  // An offsets value from the watch or a read; `retry`: a parked value
  // looked at again under a new term.
  void OnOffsetsValue(const EtcdKeyValue& kv, bool retry);
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
  std::unique_ptr<EtcdWatcher> members_watch_, leader_watch_, offsets_watch_, windows_watch_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool wake_flag_ = false;      // under wake_mutex_
  bool reload_needed_ = true;   // under wake_mutex_
  std::atomic<bool> windows_resync_{false};
  std::atomic<bool> registration_lost_{false};  // our members/ key was deleted or overwritten

  // Loop-thread state.
  int64_t member_lease_ = 0;
  int64_t member_lease_refreshed_ns_ = 0;
  int64_t window_lease_ = 0;
  int64_t window_lease_granted_ns_ = 0;
  bool leading_watch_ = false;
  uint64_t graph_version_published_ = 0;
  int64_t next_retry_ns_ = 0;
  int64_t backoff_ns_ = 0;

  mutable std::mutex mutex_;  // everything below
  MemberView members_;  // reads and watch events merged by revision
  uint64_t members_version_ = 1;
  LeaderView leader_view_;  // reads, events and campaigns merged by revision
  // Authentic offsets of a term not (yet) known as the leader's: looked at
  // again when the leader changes (the watches race), else refused then.
  std::optional<EtcdKeyValue> parked_offsets_;
  bool campaign_needed_ = true;
  std::vector<WindowSummary> incoming_;
  WindowOutbox outbox_;
  std::vector<WindowSummary> inbox_;
  std::optional<OffsetsSnapshot> to_publish_;
  std::optional<OffsetsSnapshot> latest_;
  int64_t latest_term_ = 0;  // the leader term latest_ came from
  uint64_t latest_version_ = 0;
  CoordinatorStatus status_;
  std::string last_error_;
};

}  // namespace chronolink
