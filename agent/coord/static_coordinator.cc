#include "agent/coord/static_coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "clock/clock_reader.h"

namespace chronolink {

namespace {

constexpr int kPollMs = 50;

}  // namespace

StaticCoordinator::StaticCoordinator(const CoordinationOptions& options)
    : options_(options),
      members_(options.members),
      exchange_(options.node_id, options.retention_ns, "static coordination", options.resend_ns) {
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
      [this](uint32_t peer, bool up) {
        spdlog::debug("coordination link to node {} {}", peer, up ? "up" : "down");
        if (up) exchange_.OnLinkUp(*hub_, peer);
      });
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
  while (!stopping_) {
    hub_->Poll(kPollMs);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      channel_stats_ = hub_->stats();  // the hub is this thread's: Status() reads the copy
    }
    UpdateLeader();
    exchange_.Flush(*hub_, ReadClockNs(CLOCK_MONOTONIC));
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
  // The term: every election this node sees is a new one.
  exchange_.SetLeader(leader_, static_cast<int64_t>(status_.leader_changes));
}

void StaticCoordinator::OnMessage(uint32_t peer, uint16_t type, std::string_view payload) {
  if (exchange_.OnMessage(peer, type, payload)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ++status_.errors;
  spdlog::warn("static coordination: unknown message type {} from node {}", type, peer);
}

Membership StaticCoordinator::Members(uint64_t* version) const {
  *version = 1;  // the cluster file does not change under a running agent
  return Membership{members_, false, members_.size()};
}

void StaticCoordinator::PublishWindows(std::span<const WindowSummary> windows) {
  exchange_.PublishWindows(windows);
}

bool StaticCoordinator::IsLeader() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return leader_ == options_.node_id;
}

std::vector<WindowSummary> StaticCoordinator::TakeLeaderInbox() { return exchange_.TakeInbox(); }

void StaticCoordinator::PublishOffsets(const OffsetsSnapshot& snapshot) { exchange_.PublishOffsets(snapshot); }

std::optional<OffsetsSnapshot> StaticCoordinator::LatestOffsets(uint64_t* version) const {
  return exchange_.Latest(version);
}

CoordinatorStatus StaticCoordinator::Status() const {
  CoordinatorStatus s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = status_;
    s.channel = ChannelCounters(channel_stats_);
    s.is_leader = leader_ == options_.node_id;
    s.leader = leader_;
  }
  exchange_.FillStatus(&s);
  return s;
}

}  // namespace chronolink
