// The coordination channel's socket side (docs/coordination-channel.md):
// one hub per node listens on TCP, keeps outgoing connections to the peers
// it was told to, and exchanges typed messages with authenticated node ids.
// The protocol itself is channel_frame.h.
//
// Single-threaded by design: the owner calls every method, Poll included,
// from one thread; the hub starts no thread and blocks only inside Poll.
// A turn of Poll costs what is ready and what is due, not what is open: the
// sockets sit in one epoll set and every deadline in an ordered index, so a
// leader holds 10 000 connections (docs/cluster.md "Large clusters").
// Handlers run inside Poll and may call Send, Connect and Disconnect (not
// Poll, not the destructor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agent/coord/channel_frame.h"

namespace chronolink {

struct ChannelOptions {
  int64_t handshake_timeout_ms = 2000;  // TCP connect + hello + auth
  int64_t keepalive_interval_ms = 1000; // a ping after this long with nothing sent
  int64_t idle_timeout_ms = 5000;       // closed after this long with nothing received
  size_t max_frame_bytes = 16u << 20;   // payload limit, both directions; same on every node
  size_t max_queued_bytes = 64u << 20;  // per connection, sealed frames not yet written
  int64_t reconnect_min_ms = 100, reconnect_max_ms = 5000;
  // Incoming connections not yet authenticated, in all: a leader of 10 000
  // nodes admits them all again after a failover (docs/cluster.md "Large
  // clusters"); each costs a socket and a few kB.
  size_t max_pending_handshakes = 1024;
  size_t max_pending_per_address = 4;   // ... from one remote address (a peer needs one)
  // With all max_pending_handshakes slots taken, a newcomer pushes out the
  // oldest pending connection only if that one has had this long to finish
  // (a few round trips and poll turns); else newcomers wait in the kernel's
  // listen backlog until a slot is free or old enough. Thousands of agents reconnecting to a new leader at once
  // would otherwise push out handshakes in their first moments. Longer
  // would let a flood of fresh connections from many addresses keep every
  // slot (AFloodFromManyAddressesDoesNotKeepAPeerOut). It must also have
  // had two of this hub's Poll turns: a leader busy with thousands of
  // resent windows takes long turns, and must not push out handshakes only
  // it has kept waiting.
  int64_t min_shed_age_ms = 50;
  // Outgoing connections leave from this numeric address (port chosen by
  // the kernel); empty: wherever the route says. The coordination load
  // bench gives each simulated node an address of its own.
  std::string source_address;
};

struct ChannelStats {
  uint64_t connects = 0;           // outgoing attempts started
  uint64_t connect_failures = 0;   // ... whose TCP connect failed
  uint64_t accepts = 0;            // incoming connections accepted
  uint64_t handshakes_ok = 0;
  uint64_t handshakes_failed = 0;  // TCP up, never authenticated (any reason, timeouts included)
  uint64_t handshake_timeouts = 0;
  uint64_t handshakes_shed = 0;    // unauthenticated incoming ones closed for a newer one (the caps above)
  uint64_t accepts_deferred = 0;   // turns that left newcomers in the listen backlog: every slot young
  uint64_t refused = 0;            // hello refused: magic, version, cluster, own id, other node
  uint64_t auth_failures = 0;      // handshake MAC or frame MAC wrong
  uint64_t frame_errors = 0;       // oversize, out of sequence, truncated
  uint64_t idle_timeouts = 0;
  uint64_t frames_sent = 0;        // queued, pings included
  uint64_t frames_received = 0;    // authentic, pings included
  uint64_t bytes_sent = 0;         // on the socket, handshake included
  uint64_t bytes_received = 0;
  uint64_t disconnects = 0;        // authenticated connections closed, for any reason
  uint64_t send_queue_full = 0;    // Sends refused by the queue bound
};

class SecureChannelHub {
 public:
  using MessageHandler = std::function<void(uint32_t peer, uint16_t type, std::string_view payload)>;
  // Called when the first authenticated connection to a peer comes up and
  // when the last one goes down.
  using LinkHandler = std::function<void(uint32_t peer, bool up)>;

  SecureChannelHub(ChannelIdentity identity, ChannelOptions options, MessageHandler on_message,
                   LinkHandler on_link = {});
  ~SecureChannelHub();  // closes every socket; calls no handler
  SecureChannelHub(const SecureChannelHub&) = delete;
  SecureChannelHub& operator=(const SecureChannelHub&) = delete;

  // Numeric IPv4/IPv6 address (no DNS); port 0 picks an ephemeral port.
  // One listener per hub.
  bool Listen(const std::string& address, uint16_t port, std::string* error);
  uint16_t listen_port() const { return listen_port_; }

  // Keeps one outgoing connection to `peer` at address:port up until
  // Disconnect, reconnecting with backoff. The answering node must prove the
  // cluster key and claim `peer` as its id. Calling it again with another
  // address moves the connection there; with the same one it does nothing.
  void Connect(uint32_t peer, const std::string& address, uint16_t port);
  // Stops reconnecting and closes the outgoing connections to `peer` at
  // once; its incoming connections stay. The link-down event (if the peer
  // is down now) comes from the next Poll.
  void Disconnect(uint32_t peer);

  bool IsUp(uint32_t peer) const;
  std::vector<uint32_t> UpPeers() const;  // sorted

  // Queues one message of type >= kChannelFirstUserType on the connection to
  // `peer` with the oldest handshake; the next Poll writes it. False (and
  // nothing queued) with no authenticated connection, a reserved type, a
  // payload above max_frame_bytes, or a full queue.
  bool Send(uint32_t peer, uint16_t type, std::string_view payload);

  // Waits up to timeout_ms for I/O or the next timer, handles what is ready
  // (reads, writes, accepts, handshakes, pings, timeouts, reconnects) and
  // returns; handlers run from here.
  void Poll(int timeout_ms);

  // True when the latest conclusive outgoing attempt to `peer` says it is
  // not there: the TCP connect was refused, unreachable or timed out, the
  // handshake timed out, or the answer was refused (not our cluster, not
  // that node, failed authentication). An attempt that something accepted
  // and then closed or reset before the handshake is not conclusive: a
  // listener whose unauthenticated slots are full does exactly that, so it
  // shows the peer alive (false) rather than dead. False also before the
  // first attempt ends, while a connection is up, and for peers never
  // Connect()ed.
  bool ConnectAttemptFailed(uint32_t peer) const;

  // The hub's epoll descriptor: readable while one of its sockets has
  // something for Poll. An owner that serves many hubs from one thread (the
  // coordination load bench) waits on these, polls the ready hubs, and
  // polls every hub often enough for its timers. -1 if no epoll could be
  // had (every Listen and connection attempt then says why).
  int ready_fd() const { return epoll_fd_; }
  // When (steady clock, ms) the hub's next timer is due: a handshake or
  // idle timeout, a keepalive, a reconnect; INT64_MAX when none. With
  // ready_fd, what an owner of many hubs needs to poll each only when it
  // has something to do.
  int64_t NextTimerMs() const { return NextDeadline(NowMs()); }

  const ChannelStats& stats() const { return stats_; }
  // Sealed bytes queued and not yet written, on every open connection.
  size_t QueuedBytes() const { return queued_total_; }
  // Open connections to `peer`, authenticated or not (diagnostics, tests).
  size_t ConnectionCount(uint32_t peer) const;

 private:
  struct Connection;
  struct Target;
  enum class CloseReason : uint8_t;
  static std::string_view ReasonName(CloseReason reason);

  int64_t NowMs() const;
  bool EnsureEpoll(std::string* error);
  void AcceptAll(int64_t now);
  void SetListenerArmed(bool armed);
  void StartAttempt(uint32_t peer, Target& target, int64_t now);
  void AttemptFailed(uint32_t peer, Target& target, const std::string& why, int64_t now);
  void ScheduleRetry(uint32_t peer, Target& target, int64_t when);
  void BackOff(uint32_t peer, Target& target, int64_t now);
  Connection& AddConnection(int fd, bool outgoing, std::optional<uint32_t> peer,
                            std::string remote, int64_t now);
  void HandleReady(Connection& c, uint32_t events, int64_t now);
  bool FinishConnect(Connection& c, int64_t now);
  void ReadFrom(Connection& c, int64_t now);
  void ProcessInput(Connection& c, int64_t now);
  void OnEstablished(Connection& c, int64_t now);
  void WriteTo(Connection& c);
  void WriteQueued();
  void MarkToWrite(Connection& c);
  void UpdateInterest(Connection& c);
  void QueueRaw(Connection& c, std::string bytes);
  bool Enqueue(Connection& c, uint16_t type, std::string_view payload, int64_t now);
  // The connection's next deadline (handshake, idle, keepalive); kNever
  // once closed.
  int64_t DeadlineOf(const Connection& c) const;
  // Moves the connection's entry in timers_ earlier when its deadline did;
  // a deadline that moved later is found when the earlier entry fires.
  void ScheduleTimer(Connection& c);
  void CheckTimers(Connection& c, int64_t now);
  void RunTimers(int64_t now);
  int64_t NextDeadline(int64_t now) const;
  // sys_error: the errno behind kConnectFailed/kSocketError, for the log.
  void Close(Connection& c, CloseReason reason, ChannelResult detail, int64_t now,
             int sys_error = 0);
  void CountClose(Connection& c, CloseReason reason, ChannelResult detail, int64_t now,
                  int sys_error);
  // False, with the listener paused: every pending slot is taken and too
  // young to give up; newcomers wait in the listen backlog.
  bool RoomToAccept(int64_t now);
  bool MaySupersede(const Connection& pending, int64_t now) const;
  void MakeRoomForIncoming(const std::string& ip, int64_t now);
  void ForgetPending(const Connection& c);
  void OnOutgoingClosed(Connection& c, CloseReason reason, ChannelResult detail, int sys_error, int64_t now);
  Connection* OldestEstablished(uint32_t peer);
  void FlushLinkEvents();
  void Sweep();
  void LogLimited(const std::string& key, const std::string& message, int64_t now);

  ChannelIdentity identity_;
  ChannelOptions options_;
  MessageHandler on_message_;
  LinkHandler on_link_;

  int epoll_fd_ = -1;
  int listen_fd_ = -1;
  bool listener_armed_ = false;
  uint16_t listen_port_ = 0;
  int64_t accept_paused_until_ms_ = 0;  // after EMFILE, so epoll_wait does not spin
  int64_t accept_deferred_until_ms_ = 0;  // every pending slot young until then
  uint64_t next_conn_id_ = 1;
  uint64_t next_handshake_order_ = 1;
  uint64_t turn_ = 0;  // Poll calls so far
  std::map<uint64_t, std::unique_ptr<Connection>> conns_;  // closed ones until Sweep
  std::vector<uint64_t> closed_;                            // ... which are these
  std::map<uint32_t, Target> targets_;
  // Authenticated connections per peer (a peer is up while it has one):
  // Send finds its connection here, not by a scan of every connection.
  std::map<uint32_t, std::vector<Connection*>> established_;
  // Incoming connections not yet authenticated, oldest first, in all and by
  // remote address: the caps on them look here, not at every connection.
  std::set<uint64_t> pending_incoming_;
  std::unordered_map<std::string, std::set<uint64_t>> pending_by_address_;
  // (deadline, connection id): at most one entry per open connection, never
  // later than its deadline. (time, peer) of reconnect attempts: entries of
  // a target since moved or removed are stale and skipped.
  std::set<std::pair<int64_t, uint64_t>> timers_;
  std::set<std::pair<int64_t, uint32_t>> retries_;
  std::vector<uint64_t> to_write_;  // connections with bytes queued since their last write
  size_t queued_total_ = 0;
  std::vector<std::pair<uint32_t, bool>> link_events_;  // not yet handed to on_link_

  struct LogState {
    int64_t last_ms = 0;
    uint64_t suppressed = 0;
  };
  std::unordered_map<std::string, LogState> log_state_;
  std::vector<uint8_t> read_buf_;
  ChannelStats stats_;
};

}  // namespace chronolink
