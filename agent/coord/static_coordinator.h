// The static backend (docs/cluster.md): the members are the cluster file's
// nodes; the lowest id whose agent answers leads. Every node listens on the
// coordination port (TCP, the probe port's number unless configured) and
// keeps an authenticated connection (docs/coordination-channel.md) to every
// node with a lower id, which is how it knows which of them are alive.
// Window summaries go to the leader over that connection and each node's
// own solution comes back over it, by the rules of LeaderExchange (resent
// to a new leader; only a prober's own summaries kept, the rest counted as
// "wrong_writer").
//
// Liveness for the election is the channel's: a lower node is passed over
// only when an attempt to reach it failed conclusively
// (SecureChannelHub::ConnectAttemptFailed), never because its listener
// closed our connection before the handshake, which is what an attacker
// who floods its unauthenticated slots would cause.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/coord/coordinator.h"
#include "agent/coord/leader_exchange.h"
#include "agent/coord/secure_channel.h"

namespace chronolink {

class StaticCoordinator : public Coordinator {
 public:
  explicit StaticCoordinator(const CoordinationOptions& options);
  ~StaticCoordinator() override;

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
  void OnMessage(uint32_t peer, uint16_t type, std::string_view payload);
  std::optional<uint32_t> ElectLeader() const;
  void UpdateLeader();

  const CoordinationOptions options_;
  std::vector<Member> members_;
  std::unique_ptr<SecureChannelHub> hub_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  LeaderExchange exchange_;  // windows up, solutions down

  mutable std::mutex mutex_;  // everything below
  std::optional<uint32_t> leader_;
  CoordinatorStatus status_;
  ChannelStats channel_stats_;  // copied from the hub by the loop thread
};

}  // namespace chronolink
