#include "agent/coord/etcd/etcd_coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "agent/cluster/probe_graph.h"
#include "agent/coord/etcd/member_view.h"
#include "clock/clock_reader.h"

namespace chronolink {

namespace {

constexpr auto kTick = std::chrono::milliseconds(100);
constexpr int64_t kMinBackoffNs = 100'000'000;
constexpr int64_t kMaxBackoffNs = 2'000'000'000;
constexpr int kChannelPollMs = 50;
constexpr int64_t kLastWindowsMs = 1000;  // a stopping node's last windows: at most this long
// While thousands join, the members change at every turn; the graph (8 ms
// at 10 000 members: bench/solver_bench.cc) and the peers it changed follow
// at most this often.
constexpr int64_t kPeersIntervalNs = 1'000'000'000;

int64_t RealtimeNs() { return ReadClockNs(CLOCK_REALTIME); }

}  // namespace

EtcdCoordinator::EtcdCoordinator(const CoordinationOptions& options)
    : options_(options),
      prefix_(options.etcd_prefix),
      codec_(options.key, prefix_, options.node_id),
      exchange_(options.node_id, options.retention_ns, "etcd coordination", options.resend_ns),
      members_(Member{options.node_id, options.listen_address, options.listen_port}, codec_.MembersPrefix(),
               [this](const EtcdKeyValue& kv, uint32_t id, Member* out) {
                 const std::optional<EtcdRefusal> refused = codec_.OpenMember(kv, id, out);
                 if (refused) Refuse(*refused, kv.key);
                 return !refused;
               }) {
  const CoordinationOptions& cs = options;
  client_options_.endpoints = cs.etcd_endpoints;
  client_options_.connect_timeout_ms = 1000;
  client_options_.request_timeout_ms = 2000;
  if (!cs.etcd_user.empty()) client_options_.auth = std::make_shared<EtcdAuth>(cs.etcd_user, cs.etcd_password);
  status_.backend = "etcd";
}

EtcdCoordinator::~EtcdCoordinator() { Stop(); }

bool EtcdCoordinator::Start(std::string* error) {
  const CoordinationOptions& cs = options_;
  if (!cs.etcd_cacert_pem.empty()) {
    std::string why;
    client_options_.tls = EtcdTlsCredentials::Parse({cs.etcd_cacert_pem, cs.etcd_cert_pem, cs.etcd_key_pem}, &why);
    if (!client_options_.tls) {
      *error = "etcd TLS settings: " + why;
      return false;
    }
  }
  if (const std::string bad = CheckEtcdEndpoints(client_options_); !bad.empty()) {
    *error = bad;
    return false;
  }
  client_ = std::make_unique<EtcdClient>(client_options_);
  if (!CheckAccess(error)) return false;
  leader_watch_ = StartWatch(codec_.LeaderKey(), false, &EtcdCoordinator::OnLeaderEvents);
  own_key_watch_ = StartWatch(codec_.MemberKey(options_.node_id), false, &EtcdCoordinator::OnOwnKeyEvents);
  if (!StartChannel(error)) return false;
  thread_ = std::thread([this] { Loop(); });
  spdlog::info("etcd coordination at {} under prefix {}{}{}", client_options_.endpoints.front(), prefix_,
               client_options_.tls ? ", TLS" : ", plain http",
               client_options_.auth ? ", as etcd user " + client_options_.auth->user() : "");
  return true;
}

std::unique_ptr<EtcdWatcher> EtcdCoordinator::StartWatch(
    const std::string& key, bool prefix, void (EtcdCoordinator::*on_events)(const std::vector<EtcdEvent>&)) {
  EtcdWatcher::Options o;
  o.client = client_options_;
  o.key = key;
  o.prefix = prefix;
  auto w = std::make_unique<EtcdWatcher>(
      o, [this, on_events](const std::vector<EtcdEvent>& ev, int64_t) { (this->*on_events)(ev); },
      [this](int64_t) { Wake(true); },
      [this, key](bool connected, const std::string& why) {
        if (connected) {
          Wake(true);  // (re)connected: re-read what a gap may have hidden
        } else {
          // A follower's only steady contact with etcd: it says when etcd is gone.
          NoteError("watching " + key, why);
        }
      });
  w->Start();
  return w;
}

bool EtcdCoordinator::CheckAccess(std::string* error) {
  // Only with TLS or auth: plain http has nothing to refuse but an outage.
  if (!client_options_.tls && !client_options_.auth) return true;
  std::string why;
  std::optional<EtcdKeyValue> ignored;
  // A read under the prefix: the certificates, the password and the role.
  const bool ok = (!client_options_.auth || client_->Authenticate(&why)) &&
                  client_->Get(codec_.LeaderKey(), &ignored, &why);
  if (ok) return true;
  const EtcdFailure failure = client_->last_failure();
  if (failure == EtcdFailure::kTls || failure == EtcdFailure::kAuth) {
    *error = why;  // a setting to fix: retrying would only repeat it
    if (why.find("permission denied") != std::string::npos) {
      *error += " (the etcd user's role needs readwrite on the prefix " + prefix_ + ")";
    }
    return false;
  }
  spdlog::warn("etcd not reachable at start ({}); retrying in the background", why);
  return true;
}

void EtcdCoordinator::Wake(bool reload) {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    wake_flag_ = true;
    if (reload) reload_needed_ = true;
  }
  wake_.notify_all();
}

void EtcdCoordinator::Stop() {
  if (stopping_.exchange(true)) return;
  Wake(false);
  if (thread_.joinable()) thread_.join();
  channel_stopping_ = true;
  if (channel_thread_.joinable()) channel_thread_.join();
  hub_.reset();
  for (auto* w : {&members_watch_, &leader_watch_, &own_key_watch_}) {
    if (*w) (*w)->Stop();
    w->reset();
  }
  // Leave at once rather than after a lease period: a new leader is elected
  // without waiting, and members see us go.
  for (const int64_t lease : {leader_lease_, member_lease_}) {
    std::string error;
    if (client_ && lease != 0 && !client_->RevokeLease(lease, &error)) {
      spdlog::debug("etcd: revoking lease {:x}: {}", lease, error);
    }
  }
}
void EtcdCoordinator::Loop() {
  while (!stopping_) {
    {
      std::unique_lock<std::mutex> lock(wake_mutex_);
      wake_.wait_for(lock, kTick, [this] { return wake_flag_ || stopping_.load(); });
      wake_flag_ = false;
    }
    if (stopping_) break;
    const int64_t now = ReadClockNs(CLOCK_MONOTONIC);
    if (now < next_retry_ns_) continue;
    const bool ok = EnsureMemberLease(now) && Reload() && Campaign() && KeepLeaderLease(now) && FollowRole(now) &&
                    PublishGraph(now);
    if (ok) {
      NoteSuccess();
    } else {
      backoff_ns_ = std::clamp(backoff_ns_ * 2, kMinBackoffNs, kMaxBackoffNs);
      next_retry_ns_ = now + backoff_ns_;
    }
  }
}

bool EtcdCoordinator::StartChannel(std::string* error) {
  ChannelIdentity identity;
  identity.cluster_id = options_.cluster_id;
  identity.node_id = options_.node_id;
  identity.key = options_.key;
  hub_ = std::make_unique<SecureChannelHub>(
      identity, ChannelOptions{},
      [this](uint32_t peer, uint16_t type, std::string_view payload) {
        if (exchange_.OnMessage(peer, type, payload)) return;
        std::lock_guard<std::mutex> lock(mutex_);
        ++status_.errors;
        spdlog::warn("etcd coordination: unknown message type {} from node {}", type, peer);
      },
      [this](uint32_t peer, bool up) {
        spdlog::debug("coordination link to node {} {}", peer, up ? "up" : "down");
        if (up) exchange_.OnLinkUp(*hub_, peer);
      });
  // Every node listens: any of them may be elected.
  const uint16_t port = options_.coordination_port != 0 ? options_.coordination_port : options_.listen_port;
  if (!hub_->Listen(options_.listen_address, port, error)) {
    *error = "etcd coordination: cannot listen on TCP " + options_.listen_address + ":" + std::to_string(port) +
             " for the channel to the leader: " + *error;
    hub_.reset();
    return false;
  }
  channel_thread_ = std::thread([this] { ChannelLoop(); });
  return true;
}

void EtcdCoordinator::ChannelLoop() {
  while (!channel_stopping_) {
    hub_->Poll(kChannelPollMs);
    FollowLeader();
    exchange_.Flush(*hub_, ReadClockNs(CLOCK_MONOTONIC));
    std::lock_guard<std::mutex> lock(mutex_);
    channel_stats_ = hub_->stats();  // the hub is this thread's: Status() reads the copy
  }
  FlushLastWindows();
}

void EtcdCoordinator::FollowLeader() {
  std::optional<LeaderClaim> claim;
  std::optional<Member> member;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    claim = leader_view_.claim();
    if (claim) member = LeaderMemberLocked(*claim);
  }
  // Until its registration is seen the leader stays unknown here: summaries
  // wait in the outbox, and go to it in full once it is.
  const bool known = claim && (claim->id == options_.node_id || member);
  exchange_.SetLeader(known ? std::optional<uint32_t>(claim->id) : std::nullopt, known ? claim->term : 0);
  const std::optional<uint32_t> target =
      known && claim->id != options_.node_id ? std::optional<uint32_t>(claim->id) : std::nullopt;
  if (channel_leader_ && channel_leader_ != target) hub_->Disconnect(*channel_leader_);
  if (target) {
    const uint16_t port = options_.coordination_port != 0 ? options_.coordination_port : member->port;
    hub_->Connect(*target, member->address, port);  // moves it if the leader re-registered elsewhere
  }
  channel_leader_ = target;
}
void EtcdCoordinator::FlushLastWindows() {
  // The windows a stopping agent closed last were handed over just before
  // Stop(): they go to the leader while its link is up, for at most a
  // second, so that a clean shutdown loses none.
  const int64_t deadline = ReadClockNs(CLOCK_MONOTONIC) + kLastWindowsMs * 1'000'000;
  while (ReadClockNs(CLOCK_MONOTONIC) < deadline) {
    const bool all_queued = exchange_.Flush(*hub_, ReadClockNs(CLOCK_MONOTONIC));
    if (all_queued && hub_->QueuedBytes() == 0) return;
    hub_->Poll(10);
  }
}
bool EtcdCoordinator::EnsureMemberLease(int64_t now_ns) {
  // Long: its keepalives are most of etcd's load, one per node per half of
  // it (a failed one has the other half to be retried in, at 2 s at most
  // per attempt); leadership has a lease of its own, so failover does not
  // wait on it.
  const int64_t ttl = options_.member_lease_ttl_s;
  std::string error;
  if (member_lease_ != 0 && registration_lost_.exchange(false)) {
    // Deleted or overwritten by someone else: put it back under our lease.
    const Member self{options_.node_id, options_.listen_address, options_.listen_port};
    if (client_->Put(codec_.MemberKey(self.id), codec_.SealMember(self, member_lease_, RealtimeNs()), member_lease_,
                     &error)) {
      spdlog::warn("etcd: this node's registration was deleted or overwritten; registered again");
    } else {
      registration_lost_ = true;  // again next turn; an expired lease is re-granted below
      spdlog::debug("etcd: registering this node again: {}", error);
    }
  }
  if (member_lease_ != 0) {
    if (now_ns - member_lease_refreshed_ns_ < ttl * 1'000'000'000 / 2) return true;
    int64_t remaining = 0;
    if (!client_->KeepAliveOnce(member_lease_, &remaining, &error)) {
      NoteError("keeping the member lease alive", error);
      return false;
    }
    if (remaining > 0) {
      member_lease_refreshed_ns_ = now_ns;
      return true;
    }
    spdlog::warn("etcd: this node's lease expired (etcd unreachable for more than {} s); joining again", ttl);
    member_lease_ = 0;
  }
  int64_t lease = 0;
  if (!client_->GrantLease(ttl, &lease, &error)) {
    NoteError("granting the member lease", error);
    return false;
  }
  const Member self{options_.node_id, options_.listen_address, options_.listen_port};
  if (!client_->Put(codec_.MemberKey(self.id), codec_.SealMember(self, lease, RealtimeNs()), lease, &error)) {
    NoteError("registering this node", error);
    return false;
  }
  member_lease_ = lease;
  member_lease_refreshed_ns_ = now_ns;
  registration_lost_ = false;
  spdlog::info("etcd: registered as member {} (lease {:x}, {} s)", options_.node_id, lease, ttl);
  return true;
}

bool EtcdCoordinator::Reload() {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    if (!reload_needed_) return true;
    reload_needed_ = false;
  }
  if ((leading_ ? LoadMembers() : LoadOwnRegistration()) && LoadLeader()) return true;
  std::lock_guard<std::mutex> lock(wake_mutex_);
  reload_needed_ = true;
  return false;
}

bool EtcdCoordinator::LoadMembers() {
  std::vector<EtcdKeyValue> kvs;
  int64_t read_revision = 0;
  std::string error;
  // Our own key, whatever it holds, and authentic registrations only, page
  // by page (MemberView checks them again, counting nothing twice).
  const std::string mine = codec_.MemberKey(options_.node_id);
  auto wanted = [&](const EtcdKeyValue& kv) {
    if (kv.key == mine) return true;
    const std::optional<uint32_t> id = codec_.MemberIdOf(kv.key);
    Member m;
    const std::optional<EtcdRefusal> refused = id ? codec_.OpenMember(kv, *id, &m) : EtcdRefusal::kMalformed;
    if (refused) Refuse(*refused, kv.key);
    return !refused;
  };
  if (!client_->GetPrefix(codec_.MembersPrefix(), &kvs, &error, &read_revision, wanted)) {
    NoteError("reading the members", error);
    return false;
  }
  const auto own = std::find_if(kvs.begin(), kvs.end(), [&](const EtcdKeyValue& kv) { return kv.key == mine; });
  if (member_lease_ != 0 && (own == kvs.end() || !IsOwnRegistration(*own))) registration_lost_ = true;
  std::lock_guard<std::mutex> lock(mutex_);
  if (members_.ApplyRead(kvs, read_revision)) ++members_version_;
  return true;
}

bool EtcdCoordinator::LoadOwnRegistration() {
  std::optional<EtcdKeyValue> kv;
  std::string error;
  if (!client_->Get(codec_.MemberKey(options_.node_id), &kv, &error)) {
    NoteError("reading this node's registration", error);
    return false;
  }
  if (member_lease_ != 0 && (!kv || !IsOwnRegistration(*kv))) registration_lost_ = true;
  return true;
}

bool EtcdCoordinator::LoadLeaderMember(int64_t now_ns) {
  std::optional<LeaderClaim> claim;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    claim = leader_view_.claim();
    if (!claim || claim->id == options_.node_id || LeaderMemberLocked(*claim)) return true;
  }
  if (now_ns < leader_member_retry_ns_) return true;
  std::optional<EtcdKeyValue> kv;
  std::string error;
  if (!client_->Get(codec_.MemberKey(claim->id), &kv, &error)) {
    NoteError("reading the leader's registration", error);
    return false;
  }
  Member m;
  std::optional<EtcdRefusal> refused;
  if (kv) refused = codec_.OpenMember(*kv, claim->id, &m);
  if (refused) Refuse(*refused, kv->key);
  if (!kv || refused) {
    // It registers before it campaigns: gone since, or forged. Its term ends
    // or its agent puts it back; ask again a little later.
    leader_member_retry_ns_ = now_ns + kLeaderMemberRetryNs;
    return true;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  leader_member_ = std::make_pair(claim->term, m);
  return true;
}

std::optional<Member> EtcdCoordinator::LeaderMemberLocked(const LeaderClaim& claim) const {
  if (!leader_member_ || leader_member_->first != claim.term || leader_member_->second.id != claim.id) {
    return std::nullopt;
  }
  return leader_member_->second;
}

bool EtcdCoordinator::FollowRole(int64_t now_ns) {
  const bool leading = IsLeader();
  if (leading && !leading_) {
    // Taking office: every member, read and then watched.
    if (!LoadMembers()) return false;
    members_watch_ = StartWatch(codec_.MembersPrefix(), true, &EtcdCoordinator::OnMemberEvents);
    std::lock_guard<std::mutex> lock(mutex_);
    leading_ = true;
  } else if (!leading && leading_) {
    if (members_watch_) members_watch_->Stop();
    members_watch_.reset();
    // Our own neighbours (SetOwnPeers) stay ours until the next leader
    // gives its list; the others' are no longer ours to give.
    exchange_.PublishPeers({});
    graph_.reset();
    peers_published_ns_.reset();
    std::lock_guard<std::mutex> lock(mutex_);
    leading_ = false;
  }
  return leading ? PublishPeers(now_ns) : LoadLeaderMember(now_ns);
}

bool EtcdCoordinator::PublishPeers(int64_t now_ns) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (graph_ && graph_members_version_ == members_version_) return true;
  }
  if (peers_published_ns_ && now_ns - *peers_published_ns_ < kPeersIntervalNs) return true;
  std::map<uint32_t, Member> members;
  uint64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    members = members_.members();
    version = members_version_;
  }
  std::vector<uint32_t> ids;
  for (const auto& [id, m] : members) ids.push_back(id);
  ProbeGraphOptions go;
  go.k = options_.probe_k;
  graph_ = ProbeGraph::Build(ids, go);
  std::unordered_map<uint32_t, std::vector<Member>> by_node;
  for (uint32_t id : ids) {
    std::vector<Member>& peers = by_node[id];
    for (uint32_t p : graph_->PeersOf(id)) peers.push_back(members.at(p));
  }
  // Ours as everyone's: the agent's probe loop never builds a graph of
  // thousands (8 ms at 10 000: bench/solver_bench.cc, and again at every join).
  exchange_.SetOwnPeers(PeerList{options_.node_id, std::move(by_node[options_.node_id])});
  by_node.erase(options_.node_id);
  exchange_.PublishPeers(std::move(by_node));
  graph_members_version_ = version;
  peers_published_ns_ = now_ns;
  return true;
}

bool EtcdCoordinator::IsOwnRegistration(const EtcdKeyValue& kv) {
  Member m;
  const std::optional<EtcdRefusal> refused = codec_.OpenMember(kv, options_.node_id, &m);
  if (refused) Refuse(*refused, kv.key);
  return !refused && m == Member{options_.node_id, options_.listen_address, options_.listen_port};
}

bool EtcdCoordinator::LoadLeader() {
  std::optional<EtcdKeyValue> kv;
  int64_t read_revision = 0;
  std::string error;
  if (!client_->Get(codec_.LeaderKey(), &kv, &error, &read_revision)) {
    NoteError("reading the leader", error);
    return false;
  }
  LeaderClaim claim;
  std::optional<EtcdRefusal> refused;
  if (kv) refused = codec_.OpenLeader(*kv, &claim);
  if (refused) Refuse(*refused, kv->key);
  const bool found = kv && !refused;
  if (UpdateLeader(found ? std::optional<LeaderClaim>(claim) : std::nullopt, read_revision, true) && !found) {
    std::lock_guard<std::mutex> lock(mutex_);
    campaign_needed_ = true;
  }
  return true;
}

bool EtcdCoordinator::Campaign() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!campaign_needed_) return true;
  }
  // A read first: when a leader dies every node campaigns, and all but the
  // first find the winner's key already; a read costs etcd no write.
  if (!LoadLeader()) return false;
  if (HasLeader()) return true;
  bool created = false;
  EtcdKeyValue current;
  std::string error;
  // A fresh lease for each campaign: a term that dies with this node within
  // the leader's TTL. Lost campaigns leave it to expire unused.
  int64_t lease = 0;
  if (!client_->GrantLease(options_.lease_ttl_s, &lease, &error)) {
    NoteError("granting a lease to campaign with", error);
    return false;
  }
  if (!client_->PutIfAbsent(codec_.LeaderKey(), codec_.SealLeader(lease, RealtimeNs()), lease, &created, &current,
                            &error)) {
    NoteError("campaigning for leader", error);
    return false;
  }
  if (created) {
    leader_lease_ = lease;
    leader_lease_refreshed_ns_ = ReadClockNs(CLOCK_MONOTONIC);
  }
  LeaderClaim claim;
  if (const std::optional<EtcdRefusal> refused = codec_.OpenLeader(current, &claim)) {
    // Nobody with the key wrote it: clear it (only if it is still that
    // value) and stand again on the next turn.
    Refuse(*refused, current.key);
    bool deleted = false;
    if (!client_->DeleteIfValue(codec_.LeaderKey(), current.value, &deleted, &error)) {
      NoteError("clearing a forged leader key", error);
      return false;
    }
    UpdateLeader(std::nullopt, current.mod_revision, false);
    return true;
  }
  // Not applied when the view holds newer news: a leader (then no campaign
  // is needed; before, a follower whose view came from a read at a later
  // revision campaigned every tick for ever) or a delete (stand again).
  UpdateLeader(claim, current.mod_revision, false);
  HasLeader();
  return true;
}

bool EtcdCoordinator::HasLeader() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (leader_view_.claim()) campaign_needed_ = false;
  return leader_view_.claim().has_value();
}

bool EtcdCoordinator::KeepLeaderLease(int64_t now_ns) {
  if (leader_lease_ == 0) return true;
  if (!IsLeader()) {
    leader_lease_ = 0;  // the term ended (the key was deleted or taken): nothing to keep
    return true;
  }
  if (now_ns - leader_lease_refreshed_ns_ < options_.lease_ttl_s * 1'000'000'000 / 3) return true;
  int64_t remaining = 0;
  std::string error;
  if (!client_->KeepAliveOnce(leader_lease_, &remaining, &error)) {
    NoteError("keeping the leader's lease alive", error);
    return false;
  }
  if (remaining > 0) {
    leader_lease_refreshed_ns_ = now_ns;
    return true;
  }
  // Expired (etcd unreachable past the TTL): the key is gone with it, and
  // the watch says so; stand again.
  spdlog::warn("etcd: this node's leader lease expired; standing for election again");
  leader_lease_ = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  campaign_needed_ = true;
  return true;
}

bool EtcdCoordinator::PublishGraph(int64_t now_ns) {
  // The graph PublishPeers built, for inspection: rewritten at most every
  // graph_interval_ns (its size grows with the members).
  if (!leading_ || !graph_ || graph_members_version_ == graph_version_published_) return true;
  if (graph_published_ns_ && now_ns - *graph_published_ns_ < options_.graph_interval_ns) return true;
  nlohmann::json edges = nlohmann::json::array();
  for (const ProbeEdge& e : graph_->edges()) edges.push_back({e.first, e.second});
  const nlohmann::json j = {
      {"leader", options_.node_id}, {"members", graph_->members()}, {"k", graph_->k()}, {"edges", edges}};
  std::string error;
  if (!client_->Put(codec_.GraphKey(), codec_.SealGraph(j.dump(), member_lease_, RealtimeNs()), member_lease_,
                    &error)) {
    NoteError("publishing the probe graph", error);
    return false;
  }
  graph_version_published_ = graph_members_version_;
  graph_published_ns_ = now_ns;
  return true;
}

void EtcdCoordinator::OnMemberEvents(const std::vector<EtcdEvent>& events) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (members_.ApplyEvents(events)) ++members_version_;
}

void EtcdCoordinator::OnOwnKeyEvents(const std::vector<EtcdEvent>& events) {
  // MemberView keeps us a member whatever our key says, but the others see
  // what etcd holds, so a deleted or forged one is put back.
  for (const EtcdEvent& e : events) {
    if (e.type == EtcdEvent::Type::kPut && IsOwnRegistration(e.kv)) continue;
    registration_lost_ = true;
    Wake(false);
  }
}

void EtcdCoordinator::OnLeaderEvents(const std::vector<EtcdEvent>& events) {
  for (const EtcdEvent& e : events) {
    LeaderClaim claim;
    std::optional<EtcdRefusal> refused;
    if (e.type == EtcdEvent::Type::kPut) {
      refused = codec_.OpenLeader(e.kv, &claim);
      if (!refused) {
        // A follower reads the new leader's address at the loop's next turn.
        if (UpdateLeader(claim, e.kv.mod_revision, false)) Wake(false);
        continue;
      }
      Refuse(*refused, e.kv.key);
    }
    // The leader left (or its lease expired), or the key holds a forgery:
    // stand for election (the campaign clears a forgery).
    if (!UpdateLeader(std::nullopt, e.kv.mod_revision, false)) continue;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      campaign_needed_ = true;
    }
    Wake(false);
  }
}

bool EtcdCoordinator::UpdateLeader(std::optional<LeaderClaim> leader, int64_t revision, bool from_read) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::optional<LeaderClaim> before = leader_view_.claim();
  const bool applied =
      from_read ? leader_view_.ApplyRead(leader, revision) : leader_view_.ApplyChange(leader, revision);
  if (!applied) return false;
  if (leader == before) return true;
  if (leader) {
    spdlog::info("etcd: {} leads", leader->id == options_.node_id
                                       ? "this node (id " + std::to_string(leader->id) + ")"
                                       : "node " + std::to_string(leader->id));
    ++status_.leader_changes;
  } else {
    spdlog::info("etcd: no leader; standing for election");
  }
  return true;
}
void EtcdCoordinator::Refuse(EtcdRefusal reason, std::string_view key) {
  refusals_.Note(reason, key, ReadClockNs(CLOCK_MONOTONIC));
}

void EtcdCoordinator::NoteError(const std::string& what, const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++status_.errors;
  // Once per outage, not once per retry.
  if (status_.connected || last_error_.empty()) spdlog::warn("etcd: {}: {}; retrying", what, error);
  status_.connected = false;
  last_error_ = what + ": " + error;
}

void EtcdCoordinator::NoteSuccess() {
  backoff_ns_ = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!status_.connected && !last_error_.empty()) spdlog::info("etcd: reachable again");
  status_.connected = true;
}

Membership EtcdCoordinator::Members(uint64_t* version) const {
  Membership out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (leading_) out.cluster_size = members_.members().size();
  }
  // Leader or not, this node's peers in the leader's graph (its own when
  // it leads).
  const std::optional<PeerList> peers = exchange_.Peers(version);
  out.neighbours_only = true;
  out.members.push_back(Member{options_.node_id, options_.listen_address, options_.listen_port});
  if (peers) out.members.insert(out.members.end(), peers->peers.begin(), peers->peers.end());
  std::sort(out.members.begin(), out.members.end(), [](const Member& a, const Member& b) { return a.id < b.id; });
  return out;
}

void EtcdCoordinator::PublishWindows(std::span<const WindowSummary> windows) {
  exchange_.PublishWindows(windows);
}
bool EtcdCoordinator::IsLeader() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return leader_view_.claim() && leader_view_.claim()->id == options_.node_id;
}

std::vector<WindowSummary> EtcdCoordinator::TakeLeaderInbox() { return exchange_.TakeInbox(); }
void EtcdCoordinator::PublishOffsets(const OffsetsSnapshot& snapshot) { exchange_.PublishOffsets(snapshot); }
std::optional<OffsetsSnapshot> EtcdCoordinator::LatestOffsets(uint64_t* version) const {
  return exchange_.Latest(version);
}
CoordinatorStatus EtcdCoordinator::Status() const {
  CoordinatorStatus s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = status_;
    const std::optional<LeaderClaim>& leader = leader_view_.claim();
    s.is_leader = leader && leader->id == options_.node_id;
    if (leader) s.leader = leader->id;
    s.channel = ChannelCounters(channel_stats_);
  }
  s.refused = refusals_.total();
  const auto counts = refusals_.counts();
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] != 0) s.refused_by_reason[std::string(EtcdRefusalName(static_cast<EtcdRefusal>(i)))] = counts[i];
  }
  exchange_.FillStatus(&s);
  return s;
}
}  // namespace chronolink
