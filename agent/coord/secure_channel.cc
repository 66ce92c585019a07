// The hub: non-blocking sockets in one epoll set (level-triggered, each
// registered under its connection id, never its fd, so a stale event cannot
// reach a newer connection on a reused descriptor), one ChannelSession per
// connection, and the deadlines in ordered sets. A closed connection stays
// in conns_ (fd -1, closed) until the end of Poll, so a handler that closes
// the connection it is being called from never leaves a dangling reference
// behind.
#include "agent/coord/secure_channel.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <thread>

namespace chronolink {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int64_t kLogIntervalMs = 60'000;       // one warning per peer per minute
constexpr size_t kMaxLogKeys = 1024;             // log_state_ is pruned beyond this
constexpr size_t kReadChunk = 256 * 1024;
constexpr size_t kReadBudget = 8u << 20;         // per connection per Poll: fairness
constexpr size_t kCoalesceBytes = 256 * 1024;    // small frames share one queue entry
constexpr int64_t kAcceptPauseMs = 100;
constexpr int kMaxEventsPerWait = 512;           // more ready ones come on the next turn
// Accepts per turn: a stream of newcomers (thousands of nodes dialling a new
// leader) must not keep a turn from reading the handshakes already begun.
constexpr size_t kMaxAcceptsPerTurn = 512;
constexpr uint64_t kMinShedTurns = 2;  // a pending handshake's: ours to read its answer in, and one more
constexpr uint64_t kListenerId = 0;              // connection ids start at 1

bool ParseAddress(const std::string& address, uint16_t port, sockaddr_storage* out,
                  socklen_t* len, std::string* error) {
  std::string host = address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;  // literals only: never a DNS lookup
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    *error = "'" + address + "' is not a numeric IPv4/IPv6 address";
    return false;
  }
  std::memcpy(out, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return true;
}

std::string IpOf(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof(buf));
  } else if (ss.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

void SetStreamOptions(int fd) {
  // Coordination messages are small and latency matters more than packing;
  // keepalive only backs up our own idle timeout on long-dead paths.
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

bool IsRefusal(ChannelResult r) {
  return r == ChannelResult::kBadMagic || r == ChannelResult::kBadVersion ||
         r == ChannelResult::kWrongCluster || r == ChannelResult::kSelfConnect ||
         r == ChannelResult::kUnexpectedPeer;
}

// A connection that something accepted and then closed or reset: the host
// and a listener are there.
bool IsHangUp(int sys_error) { return sys_error == ECONNRESET || sys_error == EPIPE || sys_error == ECONNABORTED; }

}  // namespace

enum class SecureChannelHub::CloseReason : uint8_t {
  kConnectFailed,
  kPeerClosed,
  kSocketError,
  kProtocol,
  kHandshakeTimeout,
  kIdleTimeout,
  kDisconnect,
  kSuperseded,
  kShed,
};

std::string_view SecureChannelHub::ReasonName(CloseReason reason) {
  switch (reason) {
    case CloseReason::kConnectFailed: return "connect failed";
    case CloseReason::kPeerClosed: return "closed by peer";
    case CloseReason::kSocketError: return "socket error";
    case CloseReason::kProtocol: return "protocol error";
    case CloseReason::kHandshakeTimeout: return "handshake timeout";
    case CloseReason::kIdleTimeout: return "idle timeout";
    case CloseReason::kDisconnect: return "disconnect";
    case CloseReason::kSuperseded: return "superseded";
    case CloseReason::kShed: return "too many unauthenticated connections; closed for a newer one";
  }
  return "unknown";
}

struct SecureChannelHub::Target {
  std::string address;
  uint16_t port = 0;
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  bool addr_ok = false;
  std::string addr_error;
  int64_t next_attempt_ms = 0;
  int64_t backoff_ms = 0;
  uint64_t conn_id = 0;      // the attempt or connection in flight, 0 when none
  bool last_failed = false;  // ConnectAttemptFailed
};

struct SecureChannelHub::Connection {
  Connection(uint64_t id_in, int fd_in, bool outgoing_in, std::optional<uint32_t> peer_in,
             std::string ip_in, const ChannelIdentity& self, const ChannelOptions& options,
             int64_t now)
      : id(id_in),
        fd(fd_in),
        outgoing(outgoing_in),
        peer(peer_in),
        ip(std::move(ip_in)),
        session(self, outgoing_in ? ChannelRole::kInitiator : ChannelRole::kResponder, peer_in,
                options.max_frame_bytes),
        created_ms(now),
        last_rx_ms(now),
        last_tx_ms(now) {}

  uint64_t id;
  int fd;
  bool outgoing;
  bool connecting = false;   // TCP connect in progress
  bool established = false;  // handshake done
  bool closed = false;
  std::optional<uint32_t> peer;  // dialled, or authenticated
  std::string ip;
  ChannelSession session;
  std::deque<std::string> queue;  // bytes to write, front first
  size_t front_offset = 0;        // already written of queue.front()
  size_t queued_bytes = 0;
  int64_t created_ms;
  int64_t last_rx_ms;
  int64_t last_tx_ms;
  uint64_t handshake_order = 0;  // Send prefers the lowest
  uint64_t created_turn = 0;     // the hub's Poll turn when it was opened
  uint32_t interest = 0;         // epoll events registered
  int64_t timer_due = kNever;    // its entry in timers_
  bool to_write = false;         // listed in to_write_

  std::string LogKey() const { return peer ? "node " + std::to_string(*peer) : "address " + ip; }
  std::string Describe() const {
    std::string who = peer ? "node " + std::to_string(*peer) : "unknown node";
    return who + " (" + ip + (outgoing ? ", outgoing)" : ", incoming)");
  }
};

SecureChannelHub::SecureChannelHub(ChannelIdentity identity, ChannelOptions options,
                                   MessageHandler on_message, LinkHandler on_link)
    : identity_(identity),
      options_(options),
      on_message_(std::move(on_message)),
      on_link_(std::move(on_link)),
      read_buf_(kReadChunk) {
  options_.reconnect_min_ms = std::max<int64_t>(1, options_.reconnect_min_ms);
  options_.reconnect_max_ms = std::max(options_.reconnect_min_ms, options_.reconnect_max_ms);
  options_.max_pending_handshakes = std::max<size_t>(1, options_.max_pending_handshakes);
  options_.max_pending_per_address = std::max<size_t>(1, options_.max_pending_per_address);
  std::string ignored;  // Listen and StartAttempt try again, and say why
  EnsureEpoll(&ignored);
}

SecureChannelHub::~SecureChannelHub() {
  for (auto& [id, c] : conns_) {
    if (c->fd >= 0) ::close(c->fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

bool SecureChannelHub::EnsureEpoll(std::string* error) {
  if (epoll_fd_ >= 0) return true;
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ >= 0) return true;
  *error = std::string("epoll_create1: ") + std::strerror(errno);
  return false;
}

void SecureChannelHub::SetListenerArmed(bool armed) {
  if (listen_fd_ < 0 || listener_armed_ == armed) return;
  epoll_event ev{};
  ev.events = armed ? static_cast<uint32_t>(EPOLLIN) : 0u;
  ev.data.u64 = kListenerId;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  listener_armed_ = armed;
}

int64_t SecureChannelHub::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool SecureChannelHub::Listen(const std::string& address, uint16_t port, std::string* error) {
  if (listen_fd_ >= 0) {
    *error = "already listening on port " + std::to_string(listen_port_);
    return false;
  }
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!ParseAddress(address, port, &ss, &len, error) || !EnsureEpoll(error)) return false;
  const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  // A restarted node rebinds its port while old connections sit in TIME_WAIT.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    *error = "cannot listen on " + address + " port " + std::to_string(port) + ": " +
             std::strerror(errno);
    ::close(fd);
    return false;
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  listen_port_ = ntohs(bound.ss_family == AF_INET
                           ? reinterpret_cast<sockaddr_in&>(bound).sin_port
                           : reinterpret_cast<sockaddr_in6&>(bound).sin6_port);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerId;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    *error = std::string("epoll_ctl: ") + std::strerror(errno);
    ::close(fd);
    return false;
  }
  listen_fd_ = fd;
  listener_armed_ = true;
  return true;
}

void SecureChannelHub::Connect(uint32_t peer, const std::string& address, uint16_t port) {
  const int64_t now = NowMs();
  if (peer == identity_.node_id) {
    LogLimited("node " + std::to_string(peer), "not connecting to our own node id " + std::to_string(peer), now);
    return;
  }
  auto it = targets_.find(peer);
  if (it != targets_.end()) {
    if (it->second.address == address && it->second.port == port) return;
    Disconnect(peer);  // moved: drop the old address's connection
  }
  Target t;
  t.address = address;
  t.port = port;
  t.addr_ok = ParseAddress(address, port, &t.addr, &t.addr_len, &t.addr_error);
  t.backoff_ms = options_.reconnect_min_ms;
  ScheduleRetry(peer, targets_[peer] = std::move(t), now);  // the next Poll dials
}

void SecureChannelHub::Disconnect(uint32_t peer) {
  // The peer's outgoing connections: the attempt in flight, and any
  // authenticated one (which is that attempt, once it succeeded).
  std::vector<Connection*> outgoing;
  if (const auto t = targets_.find(peer); t != targets_.end() && t->second.conn_id != 0) {
    if (const auto c = conns_.find(t->second.conn_id); c != conns_.end()) outgoing.push_back(c->second.get());
  }
  if (const auto up = established_.find(peer); up != established_.end()) {
    for (Connection* c : up->second) {
      if (c->outgoing && std::find(outgoing.begin(), outgoing.end(), c) == outgoing.end()) outgoing.push_back(c);
    }
  }
  targets_.erase(peer);  // first, so closing does not schedule a retry
  const int64_t now = NowMs();
  for (Connection* c : outgoing) Close(*c, CloseReason::kDisconnect, ChannelResult::kOk, now);
}

bool SecureChannelHub::IsUp(uint32_t peer) const { return established_.count(peer) > 0; }

std::vector<uint32_t> SecureChannelHub::UpPeers() const {
  std::vector<uint32_t> out;
  for (const auto& [peer, conns] : established_) out.push_back(peer);
  return out;
}

bool SecureChannelHub::ConnectAttemptFailed(uint32_t peer) const {
  auto it = targets_.find(peer);
  return it != targets_.end() && it->second.last_failed;
}

size_t SecureChannelHub::ConnectionCount(uint32_t peer) const {
  size_t n = 0;
  for (const auto& [id, c] : conns_) {
    const auto p = c->peer ? c->peer : c->session.peer();
    if (!c->closed && p == peer) ++n;
  }
  return n;
}

SecureChannelHub::Connection* SecureChannelHub::OldestEstablished(uint32_t peer) {
  const auto it = established_.find(peer);
  if (it == established_.end()) return nullptr;
  Connection* best = nullptr;
  for (Connection* c : it->second) {
    if (best == nullptr || c->handshake_order < best->handshake_order) best = c;
  }
  return best;
}

bool SecureChannelHub::Send(uint32_t peer, uint16_t type, std::string_view payload) {
  if (type < kChannelFirstUserType || payload.size() > options_.max_frame_bytes) return false;
  Connection* c = OldestEstablished(peer);
  return c != nullptr && Enqueue(*c, type, payload, NowMs());
}

bool SecureChannelHub::Enqueue(Connection& c, uint16_t type, std::string_view payload, int64_t now) {
  const size_t need = kChannelFrameOverhead + payload.size();
  if (c.queued_bytes + need > options_.max_queued_bytes) {
    ++stats_.send_queue_full;
    return false;
  }
  // Appending to a partly written entry is fine: its offset does not move.
  const bool coalesce = !c.queue.empty() && c.queue.back().size() + need <= kCoalesceBytes;
  if (!coalesce) c.queue.emplace_back();
  if (!c.session.Seal(type, payload, &c.queue.back())) {
    if (!coalesce) c.queue.pop_back();
    return false;
  }
  c.queued_bytes += need;
  queued_total_ += need;
  c.last_tx_ms = now;
  ++stats_.frames_sent;
  MarkToWrite(c);
  return true;
}

void SecureChannelHub::QueueRaw(Connection& c, std::string bytes) {
  c.queued_bytes += bytes.size();
  queued_total_ += bytes.size();
  c.queue.push_back(std::move(bytes));
  MarkToWrite(c);
}

void SecureChannelHub::MarkToWrite(Connection& c) {
  if (c.to_write) return;
  c.to_write = true;
  to_write_.push_back(c.id);
}

void SecureChannelHub::WriteQueued() {
  // Writing may close a connection, and closing queues nothing: the list
  // does not grow while it is walked.
  std::vector<uint64_t> ids;
  ids.swap(to_write_);
  for (const uint64_t id : ids) {
    const auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    Connection& c = *it->second;
    c.to_write = false;
    if (c.closed || c.connecting) continue;  // a connecting socket writes once it is connected
    WriteTo(c);
  }
}

void SecureChannelHub::UpdateInterest(Connection& c) {
  if (c.closed) return;
  uint32_t want = c.connecting ? EPOLLOUT : EPOLLIN;
  if (!c.connecting && !c.queue.empty()) want |= EPOLLOUT;
  if (want == c.interest) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.interest = want;
}

SecureChannelHub::Connection& SecureChannelHub::AddConnection(int fd, bool outgoing,
                                                              std::optional<uint32_t> peer,
                                                              std::string ip, int64_t now) {
  const uint64_t id = next_conn_id_++;
  auto c = std::make_unique<Connection>(id, fd, outgoing, peer, std::move(ip), identity_, options_, now);
  c->created_turn = turn_;
  Connection& ref = *c;
  conns_.emplace(id, std::move(c));
  // Both sides speak first, so neither waits on the other's hello.
  QueueRaw(ref, ref.session.hello());
  if (!outgoing) {
    pending_incoming_.insert(id);
    pending_by_address_[ref.ip].insert(id);
  }
  epoll_event ev{};
  ev.events = EPOLLOUT;  // connecting, or the hello to write
  ev.data.u64 = id;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  ref.interest = EPOLLOUT;
  ScheduleTimer(ref);
  return ref;
}

bool SecureChannelHub::MaySupersede(const Connection& pending, int64_t now) const {
  return now - pending.created_ms >= options_.min_shed_age_ms && turn_ - pending.created_turn >= kMinShedTurns;
}

bool SecureChannelHub::RoomToAccept(int64_t now) {
  if (pending_incoming_.size() < options_.max_pending_handshakes) return true;
  const Connection& oldest = *conns_.at(*pending_incoming_.begin());
  if (MaySupersede(oldest, now)) return true;
  // Every slot is a handshake still in its first moments: an honest burst
  // (nodes reconnecting to a new leader) that needs time, not room. The
  // newcomers wait in the backlog (then in SYN retries) rather than being
  // closed into their nodes' backoff.
  ++stats_.accepts_deferred;
  accept_deferred_until_ms_ = std::max(now + 1, oldest.created_ms + options_.min_shed_age_ms);
  SetListenerArmed(false);
  return false;
}

void SecureChannelHub::MakeRoomForIncoming(const std::string& ip, int64_t now) {
  // Full for this address: its own oldest goes. Full in all: the oldest of
  // the address holding the most, if it has had its time, else the oldest
  // of all (RoomToAccept saw that one has). A flood from one address then
  // only ever pushes out its own connections, one from many addresses has
  // to open them faster than an honest handshake completes, and a peer's
  // single pending connection is the last to go.
  Connection* victim = nullptr;
  const auto own = pending_by_address_.find(ip);
  if (own != pending_by_address_.end() && own->second.size() >= options_.max_pending_per_address) {
    victim = conns_.at(*own->second.begin()).get();
  } else if (pending_incoming_.size() >= options_.max_pending_handshakes) {
    const std::set<uint64_t>* largest = nullptr;
    for (const auto& [address, ids] : pending_by_address_) {
      if (largest == nullptr || ids.size() > largest->size() ||
          (ids.size() == largest->size() && *ids.begin() < *largest->begin())) {
        largest = &ids;
      }
    }
    victim = conns_.at(*largest->begin()).get();
    if (!MaySupersede(*victim, now)) victim = conns_.at(*pending_incoming_.begin()).get();
  }
  if (victim == nullptr) return;
  ++stats_.handshakes_shed;
  Close(*victim, CloseReason::kShed, ChannelResult::kOk, now);
}

void SecureChannelHub::ForgetPending(const Connection& c) {
  if (pending_incoming_.erase(c.id) == 0) return;
  const auto it = pending_by_address_.find(c.ip);
  if (it == pending_by_address_.end()) return;
  it->second.erase(c.id);
  if (it->second.empty()) pending_by_address_.erase(it);
}

void SecureChannelHub::AcceptAll(int64_t now) {
  for (size_t accepted = 0; accepted < kMaxAcceptsPerTurn; ++accepted) {
    if (!RoomToAccept(now)) return;
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors: the pending connection stays in the backlog and
      // would wake every epoll_wait; look again a little later.
      LogLimited("accept", std::string("accept failed: ") + std::strerror(errno), now);
      accept_paused_until_ms_ = now + kAcceptPauseMs;
      SetListenerArmed(false);
      return;
    }
    ++stats_.accepts;
    std::string ip = IpOf(ss);
    MakeRoomForIncoming(ip, now);
    SetStreamOptions(fd);
    Connection& c = AddConnection(fd, false, std::nullopt, std::move(ip), now);
    WriteTo(c);  // our hello, at once
    UpdateInterest(c);
  }
}

void SecureChannelHub::ScheduleRetry(uint32_t peer, Target& t, int64_t when) {
  t.next_attempt_ms = when;
  retries_.emplace(when, peer);
}

void SecureChannelHub::BackOff(uint32_t peer, Target& t, int64_t now) {
  ScheduleRetry(peer, t, now + t.backoff_ms);
  t.backoff_ms = std::min(t.backoff_ms * 2, options_.reconnect_max_ms);
}

void SecureChannelHub::AttemptFailed(uint32_t peer, Target& t, const std::string& why, int64_t now) {
  ++stats_.connect_failures;
  t.last_failed = true;
  BackOff(peer, t, now);
  LogLimited("node " + std::to_string(peer),
             "connect to node " + std::to_string(peer) + " at " + t.address + " port " +
                 std::to_string(t.port) + " failed: " + why,
             now);
}

void SecureChannelHub::StartAttempt(uint32_t peer, Target& t, int64_t now) {
  ++stats_.connects;
  if (!t.addr_ok) return AttemptFailed(peer, t, t.addr_error, now);
  std::string no_epoll;
  if (!EnsureEpoll(&no_epoll)) return AttemptFailed(peer, t, no_epoll, now);
  const int fd = ::socket(t.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return AttemptFailed(peer, t, std::string("socket: ") + std::strerror(errno), now);
  SetStreamOptions(fd);
  if (!options_.source_address.empty()) {
    sockaddr_storage source{};
    socklen_t source_len = 0;
    std::string why;
    if (!ParseAddress(options_.source_address, 0, &source, &source_len, &why) ||
        ::bind(fd, reinterpret_cast<const sockaddr*>(&source), source_len) != 0) {
      if (why.empty()) why = std::string("bind to ") + options_.source_address + ": " + std::strerror(errno);
      ::close(fd);
      return AttemptFailed(peer, t, why, now);
    }
  }
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&t.addr), t.addr_len);
  if (rc != 0 && errno != EINPROGRESS) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return AttemptFailed(peer, t, why, now);
  }
  Connection& c = AddConnection(fd, true, peer, IpOf(t.addr), now);
  c.connecting = rc != 0;
  t.conn_id = c.id;
}

bool SecureChannelHub::FinishConnect(Connection& c, int64_t now) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    // A reset here came after the connect succeeded (accepted, then reset
    // before we looked): a socket error, not a failed connect.
    Close(c, IsHangUp(err) ? CloseReason::kSocketError : CloseReason::kConnectFailed, ChannelResult::kOk, now, err);
    return false;
  }
  c.connecting = false;
  return true;
}

void SecureChannelHub::HandleReady(Connection& c, uint32_t events, int64_t now) {
  if (c.connecting) {
    if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0 || !FinishConnect(c, now)) return;
  }
  // Write first: our hello is out before anything we read can end the
  // connection, so a refused peer learns why from its side too.
  if (events & EPOLLOUT) WriteTo(c);
  // Errors and hang-ups surface through recv().
  if (!c.closed && (events & (EPOLLIN | EPOLLERR | EPOLLHUP))) ReadFrom(c, now);
  // Replies (our handshake MAC) leave now rather than an epoll_wait later.
  if (!c.closed && !c.queue.empty()) WriteTo(c);
  UpdateInterest(c);
}

void SecureChannelHub::ReadFrom(Connection& c, int64_t now) {
  size_t budget = kReadBudget;
  while (!c.closed && budget > 0) {
    const ssize_t n = ::recv(c.fd, read_buf_.data(), read_buf_.size(), 0);
    if (n > 0) {
      stats_.bytes_received += static_cast<uint64_t>(n);
      budget -= std::min(budget, static_cast<size_t>(n));
      c.last_rx_ms = now;
      // Decode chunk by chunk so the session never holds more than one
      // frame plus one chunk.
      c.session.Feed(std::span<const uint8_t>(read_buf_.data(), static_cast<size_t>(n)));
      ProcessInput(c, now);
      continue;
    }
    if (n == 0) {
      const ChannelResult r = c.session.Finish();
      if (r == ChannelResult::kOk) {
        Close(c, CloseReason::kPeerClosed, r, now);
      } else {
        Close(c, CloseReason::kProtocol, r, now);
      }
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    Close(c, CloseReason::kSocketError, ChannelResult::kOk, now, errno);
    return;
  }
}

void SecureChannelHub::ProcessInput(Connection& c, int64_t now) {
  while (!c.closed) {
    ChannelEvent ev;
    std::string reply;
    const ChannelResult r = c.session.Next(&ev, &reply);
    if (!reply.empty()) QueueRaw(c, std::move(reply));
    if (r == ChannelResult::kNeedMore) return;
    if (r != ChannelResult::kOk) {
      // Best effort: hand over our hello/MAC so the peer can tell what
      // failed (they reveal nothing it could not get by asking).
      if (!c.established) WriteTo(c);
      return Close(c, CloseReason::kProtocol, r, now);
    }
    if (ev.kind == ChannelEvent::Kind::kEstablished) {
      OnEstablished(c, now);
      continue;
    }
    ++stats_.frames_received;
    // Pings only refresh last_rx_ms; other reserved types are for later
    // versions and skipped.
    if (ev.frame.type < kChannelFirstUserType) continue;
    FlushLinkEvents();  // "up" before the peer's first message
    if (c.closed || !on_message_) continue;
    on_message_(*c.peer, ev.frame.type, ev.frame.payload);
  }
}

void SecureChannelHub::OnEstablished(Connection& c, int64_t now) {
  c.established = true;
  c.peer = c.session.peer();
  c.handshake_order = next_handshake_order_++;
  c.last_tx_ms = now;
  ++stats_.handshakes_ok;
  ForgetPending(c);
  ScheduleTimer(c);
  const uint32_t peer = *c.peer;
  std::vector<Connection*>& up = established_[peer];
  up.push_back(&c);
  if (up.size() == 1) link_events_.emplace_back(peer, true);
  if (c.outgoing) {
    auto it = targets_.find(peer);
    if (it != targets_.end()) {
      it->second.backoff_ms = options_.reconnect_min_ms;
      it->second.last_failed = false;
    }
    return;
  }
  // A peer keeps one outgoing connection to us, so a new one from it means
  // the old one is dead on its side (restart, lost path): drop ours now
  // rather than at the idle timeout. Counted up first, so the link stays up.
  const std::vector<Connection*> others = up;  // Close edits the list
  for (Connection* other : others) {
    if (other != &c && !other->outgoing) Close(*other, CloseReason::kSuperseded, ChannelResult::kOk, now);
  }
}

void SecureChannelHub::WriteTo(Connection& c) {
  while (!c.queue.empty()) {
    const std::string& front = c.queue.front();
    const ssize_t n = ::send(c.fd, front.data() + c.front_offset, front.size() - c.front_offset,
                             MSG_NOSIGNAL);
    if (n > 0) {
      stats_.bytes_sent += static_cast<uint64_t>(n);
      c.queued_bytes -= static_cast<size_t>(n);
      queued_total_ -= static_cast<size_t>(n);
      c.front_offset += static_cast<size_t>(n);
      if (c.front_offset == front.size()) {
        c.queue.pop_front();
        c.front_offset = 0;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return UpdateInterest(c);
    return Close(c, CloseReason::kSocketError, ChannelResult::kOk, NowMs(), errno);
  }
  // All out: the keepalive deadline is back.
  UpdateInterest(c);
  ScheduleTimer(c);
}

void SecureChannelHub::CountClose(Connection& c, CloseReason reason, ChannelResult detail,
                                  int64_t now, int sys_error) {
  const bool connect_phase = c.connecting || reason == CloseReason::kConnectFailed;
  if (connect_phase) {
    ++stats_.connect_failures;
  } else if (!c.established && reason != CloseReason::kDisconnect) {
    ++stats_.handshakes_failed;
  }
  if (reason == CloseReason::kHandshakeTimeout) ++stats_.handshake_timeouts;
  if (reason == CloseReason::kIdleTimeout) ++stats_.idle_timeouts;
  if (reason == CloseReason::kProtocol) {
    if (IsRefusal(detail)) {
      ++stats_.refused;
    } else if (detail == ChannelResult::kBadAuth || detail == ChannelResult::kBadMac) {
      ++stats_.auth_failures;
    } else if (c.established) {
      ++stats_.frame_errors;
    }
  }
  if (c.established) ++stats_.disconnects;

  // Deliberate closes are not failures; everything else is, rate limited.
  if (reason == CloseReason::kDisconnect || reason == CloseReason::kSuperseded) {
    spdlog::debug("coordination channel: closed {}: {}", c.Describe(), ReasonName(reason));
    return;
  }
  std::string what = std::string(ReasonName(reason));
  if (reason == CloseReason::kProtocol) what += " (" + std::string(ChannelResultName(detail)) + ")";
  if (sys_error != 0) what += std::string(": ") + std::strerror(sys_error);
  LogLimited(c.LogKey(), "dropped connection with " + c.Describe() + ": " + what, now);
}

void SecureChannelHub::Close(Connection& c, CloseReason reason, ChannelResult detail, int64_t now,
                             int sys_error) {
  if (c.closed) return;
  CountClose(c, reason, detail, now, sys_error);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  ::close(c.fd);
  c.fd = -1;
  c.closed = true;
  closed_.push_back(c.id);
  c.queue.clear();
  queued_total_ -= c.queued_bytes;
  c.queued_bytes = 0;
  if (c.timer_due != kNever) timers_.erase({c.timer_due, c.id});
  c.timer_due = kNever;
  ForgetPending(c);
  if (c.established) {
    auto it = established_.find(*c.peer);
    if (it != established_.end()) {
      std::erase(it->second, &c);
      if (it->second.empty()) {
        established_.erase(it);
        link_events_.emplace_back(*c.peer, false);
      }
    }
  }
  if (c.outgoing) OnOutgoingClosed(c, reason, detail, sys_error, now);
}

void SecureChannelHub::OnOutgoingClosed(Connection& c, CloseReason reason, ChannelResult detail, int sys_error,
                                        int64_t now) {
  auto it = targets_.find(*c.peer);
  if (it == targets_.end() || it->second.conn_id != c.id) return;
  Target& t = it->second;
  t.conn_id = 0;
  BackOff(*c.peer, t, now);
  if (c.established) return;
  // What the attempt says about the peer (ConnectAttemptFailed). Nothing
  // there, or something that is not our peer: failed. A hung agent (TCP
  // accepted by the kernel, no answer in time) cannot lead either. But
  // accepted then closed or reset before the handshake is what a live
  // listener does when its unauthenticated slots are taken (by an attacker,
  // say): the peer is alive, and must not lose an election for it.
  switch (reason) {
    case CloseReason::kConnectFailed:
    case CloseReason::kHandshakeTimeout:
      t.last_failed = true;
      return;
    case CloseReason::kProtocol:
      if (IsRefusal(detail) || detail == ChannelResult::kBadAuth || detail == ChannelResult::kBadMac) {
        t.last_failed = true;
      } else {
        t.last_failed = false;  // the stream ended inside a hello: closed by a live peer
      }
      return;
    case CloseReason::kPeerClosed:
      t.last_failed = false;
      return;
    case CloseReason::kSocketError:
      t.last_failed = !IsHangUp(sys_error);
      return;
    default:
      return;  // ours (a disconnect): nothing learnt
  }
}

int64_t SecureChannelHub::DeadlineOf(const Connection& c) const {
  if (c.closed) return kNever;
  if (!c.established) return c.created_ms + options_.handshake_timeout_ms;
  int64_t due = c.last_rx_ms + options_.idle_timeout_ms;
  if (c.queue.empty()) due = std::min(due, c.last_tx_ms + options_.keepalive_interval_ms);
  return due;
}

void SecureChannelHub::ScheduleTimer(Connection& c) {
  const int64_t due = DeadlineOf(c);
  if (due >= c.timer_due) return;
  if (c.timer_due != kNever) timers_.erase({c.timer_due, c.id});
  c.timer_due = due;
  timers_.emplace(due, c.id);
}

void SecureChannelHub::CheckTimers(Connection& c, int64_t now) {
  if (!c.established) {
    if (now - c.created_ms >= options_.handshake_timeout_ms) {
      Close(c, CloseReason::kHandshakeTimeout, ChannelResult::kOk, now);
    }
    return;
  }
  if (now - c.last_rx_ms >= options_.idle_timeout_ms) {
    Close(c, CloseReason::kIdleTimeout, ChannelResult::kOk, now);
    return;
  }
  // Only when nothing is waiting: queued bytes reach the peer first anyway.
  if (c.queue.empty() && now - c.last_tx_ms >= options_.keepalive_interval_ms) {
    Enqueue(c, kChannelPingType, {}, now);
  }
}

void SecureChannelHub::RunTimers(int64_t now) {
  while (!timers_.empty() && timers_.begin()->first <= now) {
    const uint64_t id = timers_.begin()->second;
    timers_.erase(timers_.begin());
    const auto it = conns_.find(id);
    if (it == conns_.end() || it->second->closed) continue;
    Connection& c = *it->second;
    c.timer_due = kNever;
    CheckTimers(c, now);
    if (c.closed) continue;
    // Its next deadline; never this turn again, even if a ping could not
    // be queued.
    c.timer_due = std::max(DeadlineOf(c), now + 1);
    timers_.emplace(c.timer_due, c.id);
  }
  while (!retries_.empty() && retries_.begin()->first <= now) {
    const auto [when, peer] = *retries_.begin();
    retries_.erase(retries_.begin());
    const auto it = targets_.find(peer);
    if (it == targets_.end() || it->second.conn_id != 0 || it->second.next_attempt_ms != when) continue;  // stale
    StartAttempt(peer, it->second, now);
  }
}

int64_t SecureChannelHub::NextDeadline(int64_t now) const {
  int64_t next = kNever;
  if (!timers_.empty()) next = timers_.begin()->first;
  if (!retries_.empty()) next = std::min(next, retries_.begin()->first);
  if (listen_fd_ >= 0 && !listener_armed_) {
    next = std::min(next, std::max(accept_paused_until_ms_, accept_deferred_until_ms_));
  }
  return next;
}

void SecureChannelHub::Poll(int timeout_ms) {
  ++turn_;
  Sweep();
  int64_t now = NowMs();
  RunTimers(now);
  FlushLinkEvents();
  // What the owner sent since the last turn, and the pings just queued.
  WriteQueued();
  if (listen_fd_ >= 0 && now >= accept_paused_until_ms_ &&
      (now >= accept_deferred_until_ms_ || pending_incoming_.size() < options_.max_pending_handshakes)) {
    SetListenerArmed(true);
  }

  int64_t wait = std::max(0, timeout_ms);
  const int64_t deadline = NextDeadline(now);
  if (deadline != kNever) wait = std::clamp<int64_t>(deadline - now, 0, wait);
  if (!link_events_.empty()) wait = 0;

  epoll_event events[kMaxEventsPerWait];
  int n = 0;
  if (epoll_fd_ >= 0) {
    n = ::epoll_wait(epoll_fd_, events, kMaxEventsPerWait, static_cast<int>(wait));
  } else if (wait > 0) {
    // Neither listening nor dialled yet (or no epoll to be had: each
    // attempt says why): only time passes.
    std::this_thread::sleep_for(std::chrono::milliseconds(wait));
  }
  now = NowMs();
  for (int i = 0; i < n; ++i) {
    const uint64_t id = events[i].data.u64;
    if (id == kListenerId) {
      if (listen_fd_ >= 0) AcceptAll(now);
      continue;
    }
    auto it = conns_.find(id);
    if (it != conns_.end() && !it->second->closed) HandleReady(*it->second, events[i].events, now);
  }
  // What handlers queued for other connections leaves now, not a turn later.
  WriteQueued();
  RunTimers(now);
  FlushLinkEvents();
  Sweep();
}

void SecureChannelHub::FlushLinkEvents() {
  // Handlers may close connections and so add events: drain until quiet.
  while (!link_events_.empty()) {
    std::vector<std::pair<uint32_t, bool>> events;
    events.swap(link_events_);
    for (const auto& [peer, up] : events) {
      spdlog::debug("coordination channel: link to node {} {}", peer, up ? "up" : "down");
      if (on_link_) on_link_(peer, up);
    }
  }
}

void SecureChannelHub::Sweep() {
  for (const uint64_t id : closed_) conns_.erase(id);
  closed_.clear();
}

void SecureChannelHub::LogLimited(const std::string& key, const std::string& message, int64_t now) {
  auto it = log_state_.find(key);
  if (it != log_state_.end() && now - it->second.last_ms < kLogIntervalMs) {
    ++it->second.suppressed;
    return;
  }
  if (it == log_state_.end()) {
    // Keys of unauthenticated addresses are unbounded: forget quiet ones.
    if (log_state_.size() >= kMaxLogKeys) {
      std::erase_if(log_state_, [&](const auto& kv) { return now - kv.second.last_ms >= kLogIntervalMs; });
      if (log_state_.size() >= kMaxLogKeys) return;  // a flood of sources: stay quiet
    }
    it = log_state_.emplace(key, LogState{}).first;
  }
  if (it->second.suppressed > 0) {
    spdlog::warn("coordination channel: {} ({} similar in the last minute not logged)", message,
                 it->second.suppressed);
  } else {
    spdlog::warn("coordination channel: {}", message);
  }
  it->second.last_ms = now;
  it->second.suppressed = 0;
}

}  // namespace chronolink
