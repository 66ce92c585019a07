// The static backend (docs/cluster.md): the members are the cluster file's
// nodes; the lowest id whose agent answers leads. Every node listens on the
// coordination port (TCP, the probe port's number unless configured) and
// keeps an authenticated connection (docs/coordination-channel.md) to every
// node with a lower id, which is how it knows which of them are alive.
// Window summaries go to the leader over that connection and are sent again
// in full to a new leader; the leader sends each solved instant back to
// every node connected to it. The leader keeps only the summaries a peer
// probed itself (estimate.node = the peer's authenticated id); others are
// refused, counted (Status().refused, reason "wrong_writer") and logged.
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
#include "agent/coord/secure_channel.h"
#include "agent/coord/window_outbox.h"

namespace chronolink {

class StaticCoordinator : public Coordinator {
 public:
  explicit StaticCoordinator(const CoordinationOptions& options);
  ~StaticCoordinator() override;

  bool Start(std::string* error) override;
  void Stop() override;
  std::vector<Member> Members(uint64_t* version) const override;
  void PublishWindows(std::span<const WindowSummary> windows) override;
  bool IsLeader() const override;
  std::vector<WindowSummary> TakeLeaderInbox() override;
  void PublishOffsets(const OffsetsSnapshot& snapshot) override;
  std::optional<OffsetsSnapshot> LatestOffsets(uint64_t* version) const override;
  CoordinatorStatus Status() const override;

  // Message types on the channel (>= 16: below is the channel's own).
  static constexpr uint16_t kWindowsMessage = 16;
  static constexpr uint16_t kOffsetsMessage = 17;

 private:
  void Loop();
  void OnMessage(uint32_t peer, uint16_t type, std::string_view payload);
  // Drops (counts, logs) the summaries of `batch` not probed by `peer`.
  // Called with mutex_ held.
  void KeepOwnSummaries(uint32_t peer, std::vector<WindowSummary>* batch);
  std::optional<uint32_t> ElectLeader() const;
  void UpdateLeader();
  void FlushOutbox();
  void SendOffsets();

  const CoordinationOptions options_;
  std::vector<Member> members_;
  std::unique_ptr<SecureChannelHub> hub_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  mutable std::mutex mutex_;  // everything below
  std::vector<WindowSummary> incoming_;  // published, not yet in the outbox
  WindowOutbox outbox_;
  std::vector<WindowSummary> inbox_;     // received as leader
  std::vector<OffsetsSnapshot> to_send_; // solved as leader, not yet sent
  std::optional<OffsetsSnapshot> latest_;
  uint64_t latest_version_ = 0;
  std::optional<uint32_t> leader_;
  CoordinatorStatus status_;
  ChannelStats channel_stats_;  // copied from the hub by the loop thread
  int64_t last_refusal_log_ns_ = 0;  // CLOCK_MONOTONIC
  uint64_t unlogged_refusals_ = 0;
};

}  // namespace chronolink
