#include "agent/coord/static_coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "clock/clock_reader.h"

namespace chronolink {

namespace {

constexpr int kPollMs = 50;
constexpr size_t kBatch = 256;  // summaries per channel message (~60 kB)
constexpr int64_t kRefusalLogEveryNs = 60'000'000'000;  // one report a minute: a peer may send many
constexpr char kWrongWriter[] = "wrong_writer";          // as the etcd backend names it

// A newer instant replaces the one held; a re-solve of the same instant too.
bool Supersedes(const OffsetsSnapshot& candidate, const std::optional<OffsetsSnapshot>& held) {
  return !held || candidate.reference_instant_ns >= held->reference_instant_ns;
}

}  // namespace

StaticCoordinator::StaticCoordinator(const CoordinationOptions& options)
    : options_(options), members_(options.members), outbox_(options.retention_ns) {
  std::sort(members_.begin(), members_.end(), [](const Member& a, const Member& b) { return a.id < b.id; });
  status_.backend = "static";
}

StaticCoordinator::~StaticCoordinator() { Stop(); }

bool StaticCoordinator::Start(std::string* error) {
  const uint16_t fixed_port = options_.coordination_port;
  auto port_of = [&](const Member& m) { return fixed_port != 0 ? fixed_port : m.port; };
  ChannelIdentity identity;
  identity.cluster_id = options_.cluster_id;
  identity.node_id = options_.node_id;
  identity.key = options_.key;
  hub_ = std::make_unique<SecureChannelHub>(
      identity, ChannelOptions{},
      [this](uint32_t peer, uint16_t type, std::string_view payload) { OnMessage(peer, type, payload); },
      [](uint32_t peer, bool up) { spdlog::debug("coordination link to node {} {}", peer, up ? "up" : "down"); });
  const uint16_t my_port = fixed_port != 0 ? fixed_port : options_.listen_port;
  if (!hub_->Listen(options_.listen_address, my_port, error)) {
    *error = "static coordination: cannot listen on TCP " + options_.listen_address + ":" +
             std::to_string(my_port) + ": " + *error;
    return false;
  }
  // A connection to every lower id: the lowest one that answers leads.
  for (const Member& m : members_) {
    if (m.id < options_.node_id) hub_->Connect(m.id, m.address, port_of(m));
  }
  thread_ = std::thread([this] { Loop(); });
  spdlog::info("static coordination on TCP port {}; {} member(s) from {}", hub_->listen_port(),
               members_.size(), options_.members_source);
  return true;
}

void StaticCoordinator::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  hub_.reset();
}

void StaticCoordinator::Loop() {
  // Where the outbox last went: a leader and whether our link to it was up.
  std::optional<uint32_t> target;
  bool target_link_up = false;
  while (!stopping_) {
    hub_->Poll(kPollMs);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      channel_stats_ = hub_->stats();  // the hub is this thread's: Status() reads the copy
    }
    UpdateLeader();
    std::optional<uint32_t> leader;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      leader = leader_;
    }
    // A new leader -- another node, or this one -- has not seen what went to
    // the old one, and a leader whose link comes back may have restarted:
    // everything held goes to it again (the leader drops duplicates).
    const bool remote = leader && *leader != options_.node_id;
    const bool up = remote && hub_->IsUp(*leader);
    if (leader && (leader != target || (remote && up && !target_link_up))) {
      std::lock_guard<std::mutex> lock(mutex_);
      outbox_.Rewind();
    }
    target = leader;
    target_link_up = up;
    FlushOutbox();
    SendOffsets();
  }
}

std::optional<uint32_t> StaticCoordinator::ElectLeader() const {
  // Lowest live id; a lower node not yet tried keeps the answer open, so
  // that a starting cluster does not elect every node for a moment.
  for (const Member& m : members_) {
    if (m.id == options_.node_id) return m.id;
    if (hub_->IsUp(m.id)) return m.id;
    if (!hub_->ConnectAttemptFailed(m.id)) return std::nullopt;
  }
  return std::nullopt;
}

void StaticCoordinator::UpdateLeader() {
  const std::optional<uint32_t> elected = ElectLeader();
  std::lock_guard<std::mutex> lock(mutex_);
  status_.connected = elected && (*elected == options_.node_id || hub_->IsUp(*elected));
  if (!elected || elected == leader_) return;
  if (*elected == options_.node_id) {
    spdlog::info("static coordination: no lower node answers; this node (id {}) leads", options_.node_id);
  } else {
    spdlog::info("static coordination: node {} leads", *elected);
  }
  leader_ = elected;
  ++status_.leader_changes;
}

void StaticCoordinator::FlushOutbox() {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t now = ReadClockNs(CLOCK_MONOTONIC);
  outbox_.Add(incoming_, now);
  incoming_.clear();
  outbox_.Expire(now);
  if (!leader_) return;
  if (*leader_ == options_.node_id) {
    const std::vector<WindowSummary> mine = outbox_.Pending(outbox_.pending());
    inbox_.insert(inbox_.end(), mine.begin(), mine.end());
    outbox_.MarkDelivered(mine.size());
    return;
  }
  if (!hub_->IsUp(*leader_)) return;
  for (;;) {
    const std::vector<WindowSummary> batch = outbox_.Pending(kBatch);
    if (batch.empty()) return;
    if (!hub_->Send(*leader_, kWindowsMessage, EncodeWindowSummaries(batch))) return;  // queue full
    outbox_.MarkDelivered(batch.size());
  }
}

void StaticCoordinator::SendOffsets() {
  std::vector<OffsetsSnapshot> snapshots;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    snapshots.swap(to_send_);
  }
  for (const OffsetsSnapshot& s : snapshots) {
    const std::string payload = EncodeOffsetsSnapshot(s);
    // Every node connected to us; each keeps it only if we are its leader.
    for (uint32_t peer : hub_->UpPeers()) hub_->Send(peer, kOffsetsMessage, payload);
  }
}

void StaticCoordinator::OnMessage(uint32_t peer, uint16_t type, std::string_view payload) {
  std::string error;
  if (type == kWindowsMessage) {
    std::vector<WindowSummary> batch;
    if (!DecodeWindowSummaries(payload, &batch, &error)) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++status_.errors;
      spdlog::warn("static coordination: bad window batch from node {}: {}", peer, error);
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    KeepOwnSummaries(peer, &batch);
    inbox_.insert(inbox_.end(), batch.begin(), batch.end());
    return;
  }
  if (type == kOffsetsMessage) {
    OffsetsSnapshot s;
    const bool ok = DecodeOffsetsSnapshot(payload, &s, &error);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ok) {
      ++status_.errors;
      spdlog::warn("static coordination: bad offsets from node {}: {}", peer, error);
      return;
    }
    if (leader_ != peer || s.leader != peer) return;  // not (or no longer) our leader
    ++status_.offsets_received;
    if (Supersedes(s, latest_)) {
      latest_ = std::move(s);
      ++latest_version_;
    }
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++status_.errors;
  spdlog::warn("static coordination: unknown message type {} from node {}", type, peer);
}

void StaticCoordinator::KeepOwnSummaries(uint32_t peer, std::vector<WindowSummary>* batch) {
  // The handshake proves that the peer holds the cluster key and binds the
  // id it claims (docs/coordination-channel.md, Trust); a summary is a
  // prober's own estimate, so the peer may send only those it probed. One
  // key holder then cannot put words in another node's mouth, nor answer a
  // window for a node that is down.
  const auto foreign = std::stable_partition(batch->begin(), batch->end(),
                                             [&](const WindowSummary& w) { return w.estimate.node == peer; });
  const size_t refused = static_cast<size_t>(batch->end() - foreign);
  if (refused == 0) return;
  const uint32_t named = foreign->estimate.node;
  batch->erase(foreign, batch->end());
  status_.refused += refused;
  status_.refused_by_reason[kWrongWriter] += refused;
  const int64_t now = ReadClockNs(CLOCK_MONOTONIC);
  if (last_refusal_log_ns_ != 0 && now - last_refusal_log_ns_ < kRefusalLogEveryNs) {
    unlogged_refusals_ += refused;
    return;
  }
  spdlog::warn("static coordination: refused {} window summaries from node {} that name another prober "
               "(node {}){}",
               refused, peer, named,
               unlogged_refusals_ == 0 ? std::string()
                                       : "; " + std::to_string(unlogged_refusals_) +
                                             " more refused since the last report");
  last_refusal_log_ns_ = now;
  unlogged_refusals_ = 0;
}

std::vector<Member> StaticCoordinator::Members(uint64_t* version) const {
  *version = 1;  // the cluster file does not change under a running agent
  return members_;
}

void StaticCoordinator::PublishWindows(std::span<const WindowSummary> windows) {
  std::lock_guard<std::mutex> lock(mutex_);
  incoming_.insert(incoming_.end(), windows.begin(), windows.end());
}

bool StaticCoordinator::IsLeader() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return leader_ == options_.node_id;
}

std::vector<WindowSummary> StaticCoordinator::TakeLeaderInbox() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<WindowSummary> out;
  out.swap(inbox_);
  return out;
}

void StaticCoordinator::PublishOffsets(const OffsetsSnapshot& snapshot) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Supersedes(snapshot, latest_)) {
    latest_ = snapshot;
    ++latest_version_;
  }
  to_send_.push_back(snapshot);
}

std::optional<OffsetsSnapshot> StaticCoordinator::LatestOffsets(uint64_t* version) const {
  std::lock_guard<std::mutex> lock(mutex_);
  *version = latest_version_;
  return latest_;
}

CoordinatorStatus StaticCoordinator::Status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CoordinatorStatus s = status_;
  const ChannelStats& c = channel_stats_;
  s.channel = {{"connects", c.connects},
               {"connect_failures", c.connect_failures},
               {"accepts", c.accepts},
               {"handshakes_ok", c.handshakes_ok},
               {"handshakes_failed", c.handshakes_failed},
               {"handshake_timeouts", c.handshake_timeouts},
               {"handshakes_shed", c.handshakes_shed},
               {"hellos_refused", c.refused},
               {"auth_failures", c.auth_failures},
               {"frame_errors", c.frame_errors},
               {"idle_timeouts", c.idle_timeouts},
               {"disconnects", c.disconnects},
               {"send_queue_full", c.send_queue_full}};
  s.is_leader = leader_ == options_.node_id;
  s.leader = leader_;
  s.windows_published = outbox_.published() + incoming_.size();
  s.windows_delivered = outbox_.delivered();
  s.windows_pending = outbox_.pending() + incoming_.size();
  s.windows_dropped = outbox_.dropped();
  return s;
}

}  // namespace chronolink
