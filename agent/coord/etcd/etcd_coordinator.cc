#include "agent/coord/etcd/etcd_coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/cluster/probe_graph.h"
#include "agent/coord/etcd/member_view.h"
#include "clock/clock_reader.h"

namespace chronolink {

namespace {

constexpr auto kTick = std::chrono::milliseconds(100);
constexpr int64_t kMinBackoffNs = 100'000'000;
constexpr int64_t kMaxBackoffNs = 2'000'000'000;
constexpr size_t kWindowsPerTick = 256;
// A new term replaces what an old leader said; within a term a newer
// instant does, or a later solve of the same instant.
bool Supersedes(const OffsetsSnapshot& candidate, int64_t candidate_term, const std::optional<OffsetsSnapshot>& held,
                int64_t held_term) {
  if (!held || candidate_term != held_term) return true;
  if (candidate.reference_instant_ns != held->reference_instant_ns) {
    return candidate.reference_instant_ns > held->reference_instant_ns;
  }
  return candidate.sequence > held->sequence;
}

int64_t RealtimeNs() { return ReadClockNs(CLOCK_REALTIME); }

EtcdDateLimits DateLimits(const CoordinationOptions& options) {
  EtcdDateLimits limits;
  limits.max_age_ns = options.retention_ns;
  // As long as a clock page trusts a solution: older offsets are of no use
  // to a reader, and refusing them bounds what a replay of an authentic
  // snapshot can do.
  limits.offsets_max_age_ns = options.offsets_max_age_ns;
  return limits;
}

}  // namespace

EtcdCoordinator::EtcdCoordinator(const CoordinationOptions& options)
    : options_(options),
      prefix_(options.etcd_prefix),
      codec_(options.key, prefix_, options.node_id, DateLimits(options)),
      members_(Member{options.node_id, options.listen_address, options.listen_port}, codec_.MembersPrefix(),
               [this](const EtcdKeyValue& kv, uint32_t id, Member* out) {
                 const std::optional<EtcdRefusal> refused = codec_.OpenMember(kv, id, out);
                 if (refused) Refuse(*refused, kv.key);
                 return !refused;
               }),
      outbox_(options.retention_ns) {
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
  auto watch = [&](const std::string& key, bool prefix, auto on_events) {
    EtcdWatcher::Options o;
    o.client = client_options_;
    o.key = key;
    o.prefix = prefix;
    auto w = std::make_unique<EtcdWatcher>(
        o, [this, on_events](const std::vector<EtcdEvent>& ev, int64_t) { (this->*on_events)(ev); },
        [this](int64_t) { Wake(true); },
        [this](bool connected, const std::string&) {
          if (connected) Wake(true);  // (re)connected: re-read what a gap may have hidden
        });
    w->Start();
    return w;
  };
  members_watch_ = watch(codec_.MembersPrefix(), true, &EtcdCoordinator::OnMemberEvents);
  leader_watch_ = watch(codec_.LeaderKey(), false, &EtcdCoordinator::OnLeaderEvents);
  offsets_watch_ = watch(codec_.OffsetsKey(), false, &EtcdCoordinator::OnOffsetEvents);
  thread_ = std::thread([this] { Loop(); });
  spdlog::info("etcd coordination at {} under prefix {}{}{}", client_options_.endpoints.front(), prefix_,
               client_options_.tls ? ", TLS" : ", plain http",
               client_options_.auth ? ", as etcd user " + client_options_.auth->user() : "");
  return true;
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
  for (auto* w : {&members_watch_, &leader_watch_, &offsets_watch_, &windows_watch_}) {
    if (*w) (*w)->Stop();
    w->reset();
  }
  // Leave at once rather than after a lease period: members see us go and a
  // new leader is elected without waiting.
  if (client_ && member_lease_ != 0) {
    std::string error;
    if (!client_->RevokeLease(member_lease_, &error)) spdlog::debug("etcd: revoking lease: {}", error);
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      outbox_.Add(incoming_, now);
      incoming_.clear();
      outbox_.Expire(now);
    }
    if (now < next_retry_ns_) continue;
    const bool ok = EnsureMemberLease(now) && Reload() && Campaign() && ManageWindowWatch() &&
                    EnsureWindowLease(now) && FlushWindows() && FlushOffsets() && PublishGraph();
    if (ok) {
      NoteSuccess();
    } else {
      backoff_ns_ = std::clamp(backoff_ns_ * 2, kMinBackoffNs, kMaxBackoffNs);
      next_retry_ns_ = now + backoff_ns_;
    }
  }
  FlushLastWindows();
}

void EtcdCoordinator::FlushLastWindows() {
  // The windows a stopping agent closed last were handed over just before
  // Stop(): one more put (bounded by the request timeout) while etcd
  // answers, so a clean shutdown loses none.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outbox_.Add(incoming_, ReadClockNs(CLOCK_MONOTONIC));
    incoming_.clear();
    if (!status_.connected || outbox_.pending() == 0) return;
  }
  if (window_lease_ != 0) FlushWindows();
}

bool EtcdCoordinator::EnsureMemberLease(int64_t now_ns) {
  const int64_t ttl = options_.lease_ttl_s;
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
    if (now_ns - member_lease_refreshed_ns_ < ttl * 1'000'000'000 / 3) return true;
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
  std::lock_guard<std::mutex> lock(mutex_);
  campaign_needed_ = true;  // a leader key on the old lease is gone with it
  spdlog::info("etcd: registered as member {} (lease {:x}, {} s)", options_.node_id, lease, ttl);
  return true;
}

bool EtcdCoordinator::Reload() {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    if (!reload_needed_) return true;
    reload_needed_ = false;
  }
  if (LoadMembers() && LoadLeader() && LoadOffsets()) return true;
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

bool EtcdCoordinator::LoadOffsets() {
  std::optional<EtcdKeyValue> kv;
  std::string error;
  if (!client_->Get(codec_.OffsetsKey(), &kv, &error)) {
    NoteError("reading the offsets", error);
    return false;
  }
  if (kv) OnOffsetsValue(*kv, false);
  return true;
}

bool EtcdCoordinator::Campaign() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!campaign_needed_) return true;
  }
  bool created = false;
  EtcdKeyValue current;
  std::string error;
  if (!client_->PutIfAbsent(codec_.LeaderKey(), codec_.SealLeader(member_lease_, RealtimeNs()), member_lease_,
                            &created, &current, &error)) {
    NoteError("campaigning for leader", error);
    return false;
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
  // Stale if a newer event (a delete) was applied meanwhile: stand again.
  if (UpdateLeader(claim, current.mod_revision, false)) {
    std::lock_guard<std::mutex> lock(mutex_);
    campaign_needed_ = false;
  }
  return true;
}

bool EtcdCoordinator::ManageWindowWatch() {
  if (windows_resync_.exchange(false) && leading_watch_) {
    // Compacted past us: read it all again (the leader drops duplicates).
    if (windows_watch_) windows_watch_->Stop();
    windows_watch_.reset();
    leading_watch_ = false;
  }
  const bool leader = IsLeader();
  if (leader == leading_watch_) return true;
  if (!leader) {
    if (windows_watch_) windows_watch_->Stop();
    windows_watch_.reset();
    leading_watch_ = false;
    return true;
  }
  // Everything held in etcd first (the retention's worth: what the previous
  // leader had), then every new summary from the next revision on.
  std::vector<EtcdKeyValue> kvs;
  int64_t revision = 0;
  std::string error;
  // Only authentic summaries are kept, page by page: a writer to etcd can
  // fill windows/ with anything, and none of that may fill our memory.
  const int64_t now = RealtimeNs();
  auto authentic = [&](const EtcdKeyValue& kv) {
    WindowSummary w;
    const std::optional<EtcdRefusal> refused = codec_.OpenWindow(kv, now, &w);
    if (refused) Refuse(*refused, kv.key);
    return !refused;
  };
  if (!client_->GetPrefix(codec_.WindowsPrefix(), &kvs, &error, &revision, authentic)) {
    NoteError("reading the window summaries", error);
    return false;
  }
  std::vector<EtcdEvent> events;
  for (EtcdKeyValue& kv : kvs) events.push_back(EtcdEvent{EtcdEvent::Type::kPut, std::move(kv)});
  OnWindowEvents(events);
  EtcdWatcher::Options o;
  o.client = client_options_;
  o.key = codec_.WindowsPrefix();
  o.prefix = true;
  o.start_revision = revision + 1;
  windows_watch_ = std::make_unique<EtcdWatcher>(
      o, [this](const std::vector<EtcdEvent>& ev, int64_t) { OnWindowEvents(ev); },
      [this](int64_t) {
        windows_resync_ = true;
        Wake(false);
      });
  windows_watch_->Start();
  leading_watch_ = true;
  spdlog::info("etcd: leading; {} window summaries held in etcd", kvs.size());
  return true;
}

bool EtcdCoordinator::EnsureWindowLease(int64_t now_ns) {
  const int64_t retention_s = std::max<int64_t>(10, options_.retention_ns / 1'000'000'000);
  // A fresh lease every half retention: each summary lives between one half
  // and one whole retention, and no lease needs keeping alive.
  if (window_lease_ != 0 && now_ns - window_lease_granted_ns_ < retention_s * 500'000'000) return true;
  int64_t lease = 0;
  std::string error;
  if (!client_->GrantLease(retention_s, &lease, &error)) {
    NoteError("granting the window lease", error);
    return false;
  }
  window_lease_ = lease;
  window_lease_granted_ns_ = now_ns;
  return true;
}

bool EtcdCoordinator::FlushWindows() {
  std::vector<WindowSummary> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch = outbox_.Pending(kWindowsPerTick);
  }
  std::vector<std::pair<std::string, std::string>> kvs;
  kvs.reserve(batch.size());
  const int64_t now = RealtimeNs();
  for (const WindowSummary& w : batch) kvs.emplace_back(codec_.WindowKey(w), codec_.SealWindow(w, window_lease_, now));
  size_t done = 0;
  std::string error;
  client_->PutMany(kvs, window_lease_, &done, &error);
  std::lock_guard<std::mutex> lock(mutex_);
  outbox_.MarkDelivered(done);
  if (done < batch.size()) {
    ++status_.errors;
    last_error_ = "storing window summaries: " + error;
    return false;
  }
  if (outbox_.pending() > 0) Wake(false);  // more to send: no need to wait a tick
  return true;
}

bool EtcdCoordinator::FlushOffsets() {
  std::optional<OffsetsSnapshot> s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = to_publish_;
  }
  if (!s) return true;
  // Under this leader's term (its member lease, which also holds the leader
  // key): readers take it only from the leader of the term, and it goes
  // with the lease when this node does.
  std::string error;
  if (!client_->Put(codec_.OffsetsKey(), codec_.SealOffsets(*s, member_lease_, RealtimeNs()), member_lease_,
                    &error)) {
    NoteError("publishing offsets", error);
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (to_publish_ && to_publish_->sequence == s->sequence) to_publish_.reset();
  return true;
}

bool EtcdCoordinator::PublishGraph() {
  if (!IsLeader()) return true;
  uint64_t version = 0;
  const std::vector<Member> members = Members(&version);
  if (version == graph_version_published_) return true;
  std::vector<uint32_t> ids;
  for (const Member& m : members) ids.push_back(m.id);
  ProbeGraphOptions go;
  go.k = options_.probe_k;
  const ProbeGraph g = ProbeGraph::Build(ids, go);
  nlohmann::json edges = nlohmann::json::array();
  for (const ProbeEdge& e : g.edges()) edges.push_back({e.first, e.second});
  const nlohmann::json j = {{"leader", options_.node_id}, {"members", ids}, {"k", g.k()}, {"edges", edges}};
  std::string error;
  if (!client_->Put(codec_.GraphKey(), codec_.SealGraph(j.dump(), member_lease_, RealtimeNs()), member_lease_,
                    &error)) {
    NoteError("publishing the probe graph", error);
    return false;
  }
  graph_version_published_ = version;
  return true;
}

void EtcdCoordinator::OnMemberEvents(const std::vector<EtcdEvent>& events) {
  // Our own key: MemberView keeps us a member whatever it says, but the
  // others see what etcd holds, so a deleted or forged one is put back.
  const std::string mine = codec_.MemberKey(options_.node_id);
  for (const EtcdEvent& e : events) {
    if (e.kv.key != mine || (e.type == EtcdEvent::Type::kPut && IsOwnRegistration(e.kv))) continue;
    registration_lost_ = true;
    Wake(false);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (members_.ApplyEvents(events)) ++members_version_;
}

void EtcdCoordinator::OnLeaderEvents(const std::vector<EtcdEvent>& events) {
  for (const EtcdEvent& e : events) {
    LeaderClaim claim;
    std::optional<EtcdRefusal> refused;
    if (e.type == EtcdEvent::Type::kPut) {
      refused = codec_.OpenLeader(e.kv, &claim);
      if (!refused) {
        UpdateLeader(claim, e.kv.mod_revision, false);
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

void EtcdCoordinator::OnOffsetEvents(const std::vector<EtcdEvent>& events) {
  for (const EtcdEvent& e : events) {
    if (e.type == EtcdEvent::Type::kPut) OnOffsetsValue(e.kv, false);
  }
}

void EtcdCoordinator::OnOffsetsValue(const EtcdKeyValue& kv, bool retry) {
  std::optional<LeaderClaim> leader;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    leader = leader_view_.claim();
  }
  OffsetsSnapshot s;
  SealHeader header;
  std::optional<EtcdRefusal> refused =
      leader ? codec_.OpenOffsets(kv, *leader, RealtimeNs(), &s, &header) : EtcdRefusal::kNotLeader;
  if (refused == EtcdRefusal::kNotLeader && !retry) {
    // Perhaps the leader's key has not reached us yet: judge it again
    // under the next term -- at once if that came while we judged.
    std::unique_lock<std::mutex> lock(mutex_);
    if (leader_view_.claim() != leader) {
      lock.unlock();
      OnOffsetsValue(kv, true);
      return;
    }
    // A value parked earlier and never judged again was no leader's either.
    if (parked_offsets_) Refuse(EtcdRefusal::kNotLeader, parked_offsets_->key);
    parked_offsets_ = kv;
    return;
  }
  if (refused) {
    Refuse(*refused, kv.key);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++status_.offsets_received;
  if (Supersedes(s, header.term, latest_, latest_term_)) {
    latest_ = std::move(s);
    latest_term_ = header.term;
    ++latest_version_;
  } else if (header.term == latest_term_ && s.reference_instant_ns == latest_->reference_instant_ns &&
             s.sequence < latest_->sequence && header.writer != options_.node_id) {
    // An older solve of what we hold: a replay (our own put coming back
    // after a newer solve is not one).
    Refuse(EtcdRefusal::kStale, kv.key);
  }
}

void EtcdCoordinator::OnWindowEvents(const std::vector<EtcdEvent>& events) {
  std::vector<WindowSummary> received;
  const int64_t now = RealtimeNs();
  for (const EtcdEvent& e : events) {
    if (e.type != EtcdEvent::Type::kPut) continue;  // expiry of old summaries
    WindowSummary w;
    if (const std::optional<EtcdRefusal> refused = codec_.OpenWindow(e.kv, now, &w)) {
      Refuse(*refused, e.kv.key);
      continue;
    }
    received.push_back(std::move(w));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  inbox_.insert(inbox_.end(), received.begin(), received.end());
}

bool EtcdCoordinator::UpdateLeader(std::optional<LeaderClaim> leader, int64_t revision, bool from_read) {
  std::optional<EtcdKeyValue> parked;
  {
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
    if (leader) parked.swap(parked_offsets_);
  }
  if (parked) OnOffsetsValue(*parked, true);
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

std::vector<Member> EtcdCoordinator::Members(uint64_t* version) const {
  std::lock_guard<std::mutex> lock(mutex_);
  *version = members_version_;
  std::vector<Member> out;
  for (const auto& [id, m] : members_.members()) out.push_back(m);
  return out;
}

void EtcdCoordinator::PublishWindows(std::span<const WindowSummary> windows) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    incoming_.insert(incoming_.end(), windows.begin(), windows.end());
  }
  Wake(false);
}

bool EtcdCoordinator::IsLeader() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return leader_view_.claim() && leader_view_.claim()->id == options_.node_id;
}

std::vector<WindowSummary> EtcdCoordinator::TakeLeaderInbox() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<WindowSummary> out;
  out.swap(inbox_);
  return out;
}

void EtcdCoordinator::PublishOffsets(const OffsetsSnapshot& snapshot) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t term = leader_view_.claim() ? leader_view_.claim()->term : 0;
    // A re-solve of an older instant: offsets.jsonl has it.
    if (!Supersedes(snapshot, term, latest_, latest_term_)) return;
    latest_ = snapshot;
    latest_term_ = term;
    ++latest_version_;
    to_publish_ = snapshot;
  }
  Wake(false);
}

std::optional<OffsetsSnapshot> EtcdCoordinator::LatestOffsets(uint64_t* version) const {
  std::lock_guard<std::mutex> lock(mutex_);
  *version = latest_version_;
  return latest_;
}

CoordinatorStatus EtcdCoordinator::Status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CoordinatorStatus s = status_;
  const std::optional<LeaderClaim>& leader = leader_view_.claim();
  s.is_leader = leader && leader->id == options_.node_id;
  if (leader) s.leader = leader->id;
  s.refused = refusals_.total();
  const auto counts = refusals_.counts();
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] != 0) s.refused_by_reason[std::string(EtcdRefusalName(static_cast<EtcdRefusal>(i)))] = counts[i];
  }
  s.windows_published = outbox_.published() + incoming_.size();
  s.windows_delivered = outbox_.delivered();
  s.windows_pending = outbox_.pending() + incoming_.size();
  s.windows_dropped = outbox_.dropped();
  return s;
}

}  // namespace chronolink
