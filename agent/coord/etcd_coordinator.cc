#include "agent/coord/etcd_coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "agent/clock/clock_reader.h"
#include "agent/cluster/probe_graph.h"
#include "agent/coord/member_view.h"

namespace chronolink {

namespace {

constexpr auto kTick = std::chrono::milliseconds(100);
constexpr int64_t kMinBackoffNs = 100'000'000;
constexpr int64_t kMaxBackoffNs = 2'000'000'000;
constexpr size_t kWindowsPerTick = 256;

bool ParseId(std::string_view text, uint32_t* id) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *id);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool Supersedes(const OffsetsSnapshot& candidate, const std::optional<OffsetsSnapshot>& held) {
  return !held || candidate.reference_instant_ns >= held->reference_instant_ns;
}

}  // namespace

EtcdCoordinator::EtcdCoordinator(const AgentConfig& config)
    : config_(config),
      prefix_(config.cluster_settings.etcd_prefix),
      members_(Member{config.node_id, config.listen_address, config.listen_port}, prefix_ + "members/"),
      outbox_(config.cluster_settings.retention_ns) {
  client_options_.endpoints = config.cluster_settings.etcd_endpoints;
  client_options_.connect_timeout_ms = 1000;
  client_options_.request_timeout_ms = 2000;
  status_.backend = "etcd";
}

EtcdCoordinator::~EtcdCoordinator() { Stop(); }

bool EtcdCoordinator::Start(std::string* error) {
  for (const std::string& url : client_options_.endpoints) {
    std::string host;
    int port = 0;
    if (!ParseEtcdEndpoint(url, &host, &port, error)) {
      *error = "etcd endpoint " + url + ": " + *error;
      return false;
    }
  }
  client_ = std::make_unique<EtcdClient>(client_options_);
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
  members_watch_ = watch(Key("members/"), true, &EtcdCoordinator::OnMemberEvents);
  leader_watch_ = watch(Key("leader"), false, &EtcdCoordinator::OnLeaderEvents);
  offsets_watch_ = watch(Key("offsets/latest"), false, &EtcdCoordinator::OnOffsetEvents);
  thread_ = std::thread([this] { Loop(); });
  spdlog::info("etcd coordination at {} under prefix {}", client_options_.endpoints.front(), prefix_);
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
}

bool EtcdCoordinator::EnsureMemberLease(int64_t now_ns) {
  const int64_t ttl = config_.cluster_settings.lease_ttl_s;
  std::string error;
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
  const Member self{config_.node_id, config_.listen_address, config_.listen_port};
  if (!client_->Put(Key("members/" + std::to_string(config_.node_id)), EncodeMember(self), lease, &error)) {
    NoteError("registering this node", error);
    return false;
  }
  member_lease_ = lease;
  member_lease_refreshed_ns_ = now_ns;
  std::lock_guard<std::mutex> lock(mutex_);
  campaign_needed_ = true;  // a leader key on the old lease is gone with it
  spdlog::info("etcd: registered as member {} (lease {:x}, {} s)", config_.node_id, lease, ttl);
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
  if (!client_->GetPrefix(Key("members/"), &kvs, &error, &read_revision)) {
    NoteError("reading the members", error);
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (members_.ApplyRead(kvs, read_revision)) ++members_version_;
  return true;
}

bool EtcdCoordinator::LoadLeader() {
  std::optional<EtcdKeyValue> kv;
  std::string error;
  if (!client_->Get(Key("leader"), &kv, &error)) {
    NoteError("reading the leader", error);
    return false;
  }
  uint32_t id = 0;
  if (kv && ParseId(kv->value, &id)) {
    SetLeader(id);
  } else {
    SetLeader(std::nullopt);
    std::lock_guard<std::mutex> lock(mutex_);
    campaign_needed_ = true;
  }
  return true;
}

bool EtcdCoordinator::LoadOffsets() {
  std::optional<EtcdKeyValue> kv;
  std::string error;
  if (!client_->Get(Key("offsets/latest"), &kv, &error)) {
    NoteError("reading the offsets", error);
    return false;
  }
  if (kv) OnOffsetEvents({EtcdEvent{EtcdEvent::Type::kPut, *kv}});
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
  if (!client_->PutIfAbsent(Key("leader"), std::to_string(config_.node_id), member_lease_, &created,
                            &current, &error)) {
    NoteError("campaigning for leader", error);
    return false;
  }
  uint32_t id = 0;
  if (!ParseId(current.value, &id)) {
    NoteError("campaigning for leader", "the leader key holds '" + current.value + "', not a node id");
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    campaign_needed_ = false;
  }
  SetLeader(id);
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
  if (!client_->GetPrefix(Key("windows/"), &kvs, &error, &revision)) {
    NoteError("reading the window summaries", error);
    return false;
  }
  std::vector<EtcdEvent> events;
  for (EtcdKeyValue& kv : kvs) events.push_back(EtcdEvent{EtcdEvent::Type::kPut, std::move(kv)});
  OnWindowEvents(events);
  EtcdWatcher::Options o;
  o.client = client_options_;
  o.key = Key("windows/");
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
  const int64_t retention_s = std::max<int64_t>(10, config_.cluster_settings.retention_ns / 1'000'000'000);
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
  for (const WindowSummary& w : batch) kvs.emplace_back(Key("windows/" + w.Key()), EncodeWindowSummary(w));
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
  std::string error;
  if (!client_->Put(Key("offsets/latest"), EncodeOffsetsSnapshot(*s), 0, &error)) {
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
  go.k = config_.cluster_settings.probe_k;
  const ProbeGraph g = ProbeGraph::Build(ids, go);
  nlohmann::json edges = nlohmann::json::array();
  for (const ProbeEdge& e : g.edges()) edges.push_back({e.first, e.second});
  const nlohmann::json j = {{"leader", config_.node_id}, {"members", ids}, {"k", g.k()}, {"edges", edges}};
  std::string error;
  if (!client_->Put(Key("graph"), j.dump(), 0, &error)) {
    NoteError("publishing the probe graph", error);
    return false;
  }
  graph_version_published_ = version;
  return true;
}

void EtcdCoordinator::OnMemberEvents(const std::vector<EtcdEvent>& events) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (members_.ApplyEvents(events, &status_.errors)) ++members_version_;
}

void EtcdCoordinator::OnLeaderEvents(const std::vector<EtcdEvent>& events) {
  for (const EtcdEvent& e : events) {
    uint32_t id = 0;
    if (e.type == EtcdEvent::Type::kPut && ParseId(e.kv.value, &id)) {
      SetLeader(id);
      continue;
    }
    // The leader left (or its lease expired): stand for election.
    SetLeader(std::nullopt);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      campaign_needed_ = true;
    }
    Wake(false);
  }
}

void EtcdCoordinator::OnOffsetEvents(const std::vector<EtcdEvent>& events) {
  for (const EtcdEvent& e : events) {
    if (e.type != EtcdEvent::Type::kPut) continue;
    OffsetsSnapshot s;
    std::string error;
    const bool ok = DecodeOffsetsSnapshot(e.kv.value, &s, &error);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ok) {
      ++status_.errors;
      last_error_ = "bad offsets in etcd: " + error;
      continue;
    }
    ++status_.offsets_received;
    if (Supersedes(s, latest_)) {
      latest_ = std::move(s);
      ++latest_version_;
    }
  }
}

void EtcdCoordinator::OnWindowEvents(const std::vector<EtcdEvent>& events) {
  std::vector<WindowSummary> received;
  uint64_t bad = 0;
  for (const EtcdEvent& e : events) {
    if (e.type != EtcdEvent::Type::kPut) continue;  // expiry of old summaries
    WindowSummary w;
    std::string error;
    if (DecodeWindowSummary(e.kv.value, &w, &error)) {
      received.push_back(std::move(w));
    } else {
      ++bad;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  inbox_.insert(inbox_.end(), received.begin(), received.end());
  status_.errors += bad;
}

void EtcdCoordinator::SetLeader(std::optional<uint32_t> leader) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (leader == leader_) return;
  if (leader) {
    spdlog::info("etcd: {} leads", *leader == config_.node_id ? "this node (id " +
                 std::to_string(*leader) + ")" : "node " + std::to_string(*leader));
    ++status_.leader_changes;
  } else {
    spdlog::info("etcd: no leader; standing for election");
  }
  leader_ = leader;
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
  return leader_ == config_.node_id;
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
    if (!Supersedes(snapshot, latest_)) return;  // a re-solve of an older instant: offsets.jsonl has it
    latest_ = snapshot;
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
  s.is_leader = leader_ == config_.node_id;
  s.leader = leader_;
  s.windows_published = outbox_.published() + incoming_.size();
  s.windows_delivered = outbox_.delivered();
  s.windows_pending = outbox_.pending() + incoming_.size();
  s.windows_dropped = outbox_.dropped();
  return s;
}

}  // namespace chronolink
