// The coordination channel hub on real loopback sockets: handshakes,
// refusals, tampering through a byte-flipping proxy, timeouts, reconnects,
// the send-queue bound. No test asserts on timing: each polls until a
// condition holds or a generous deadline passes.
#include "agent/coord/secure_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/ci_rule.h"
#include "tests/support/connection_flood.h"

namespace chronolink {
namespace {

constexpr uint32_t kCluster = 7;
constexpr auto kDeadline = std::chrono::seconds(5);

ClusterKey TestKey() {
  ClusterKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(0x5A ^ (3 * i));
  return k;
}

struct Received {
  uint32_t peer;
  uint16_t type;
  std::string payload;
};

// A hub that records what its handlers see.
struct Node {
  explicit Node(uint32_t id, ChannelOptions options = {}, ClusterKey key = TestKey(),
                uint32_t cluster = kCluster) {
    hub = std::make_unique<SecureChannelHub>(
        ChannelIdentity{cluster, id, key}, options,
        [this](uint32_t peer, uint16_t type, std::string_view payload) {
          received.push_back({peer, type, std::string(payload)});
        },
        [this](uint32_t peer, bool up) {
          links.emplace_back(peer, up);
          if (on_link) on_link(peer, up);
        });
  }
  uint16_t Listen(const std::string& address = "127.0.0.1", uint16_t port = 0) {
    std::string error;
    EXPECT_TRUE(hub->Listen(address, port, &error)) << error;
    return hub->listen_port();
  }
  const ChannelStats& stats() const { return hub->stats(); }
  SecureChannelHub* operator->() { return hub.get(); }

  std::unique_ptr<SecureChannelHub> hub;
  std::vector<Received> received;
  std::vector<std::pair<uint32_t, bool>> links;
  std::function<void(uint32_t, bool)> on_link;
};

using Pump = std::function<void()>;

// Polls every hub (and `extra`, e.g. a proxy) until `done` or the deadline.
bool PollUntil(std::vector<Node*> nodes, const std::function<bool()>& done, const Pump& extra = {},
               std::chrono::milliseconds limit = kDeadline) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    for (Node* n : nodes) {
      if (n->hub) n->hub->Poll(2);
    }
    if (extra) extra();
  }
  return true;
}

// Polls for a fixed time: only for asserting that nothing happens.
void PollFor(std::vector<Node*> nodes, std::chrono::milliseconds d) {
  PollUntil(nodes, [] { return false; }, {}, d);
}

int RawConnect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Reads what is there; false once the peer closed.
bool DrainRaw(int fd, std::string* into) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      into->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

// A TCP relay 127.0.0.1:port() -> 127.0.0.1:target that can flip one byte of
// the client-to-server stream of its latest connection.
class TamperProxy {
 public:
  explicit TamperProxy(uint16_t target) : target_(target) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    EXPECT_EQ(::listen(listen_fd_, 8), 0);
    socklen_t len = sizeof(sa);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
  }
  ~TamperProxy() {
    for (Pair& p : pairs_) CloseBoth(p);
    ::close(listen_fd_);
  }
  uint16_t port() const { return port_; }
  size_t connections() const { return pairs_.size(); }

  // Flips a byte `ahead` bytes after what the latest connection relayed so
  // far (client to server).
  void ArmFlip(uint64_t ahead) { pairs_.back().flip_at = pairs_.back().relayed + ahead; }
  bool flipped() const { return !pairs_.empty() && pairs_.back().flipped; }

  void Pump() {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) pairs_.push_back({fd, RawConnect(target_)});
    for (Pair& p : pairs_) {
      if (p.client < 0) continue;
      if (!Relay(p, p.client, p.server, true) || !Relay(p, p.server, p.client, false)) CloseBoth(p);
    }
  }

 private:
  struct Pair {
    int client;
    int server;
    uint64_t relayed = 0;
    uint64_t flip_at = UINT64_MAX;
    bool flipped = false;
  };

  // Loopback writes of a few KiB never block, so a blocking-ish send is fine.
  bool Relay(Pair& p, int from, int to, bool client_to_server) {
    std::string data;
    const bool open = DrainRaw(from, &data);
    if (client_to_server && p.flip_at >= p.relayed && p.flip_at < p.relayed + data.size()) {
      data[p.flip_at - p.relayed] ^= 0x20;
      p.flipped = true;
    }
    if (client_to_server) p.relayed += data.size();
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(to, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN) return false;
      if (n > 0) off += static_cast<size_t>(n);
    }
    return open;
  }
  void CloseBoth(Pair& p) {
    if (p.client < 0) return;
    ::close(p.client);
    ::close(p.server);
    p.client = p.server = -1;
  }

  uint16_t target_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<Pair> pairs_;
};

// Two hubs, node 2 dialling node 1, both up.
struct Linked {
  explicit Linked(ChannelOptions o1 = {}, ChannelOptions o2 = {}) : a(1, o1), b(2, o2) {
    port = a.Listen();
    b->Connect(1, "127.0.0.1", port);
    ok = PollUntil({&a, &b}, [&] { return a->IsUp(2) && b->IsUp(1); });
  }
  Node a;
  Node b;
  uint16_t port = 0;
  bool ok = false;
};

TEST(SecureChannel, HandshakeAndMessagesBothWays) {
  Node a(1), b(2);
  // A handler may send: greet every peer as its link comes up.
  a.on_link = [&](uint32_t peer, bool up) {
    if (up) {
      EXPECT_TRUE(a->Send(peer, 20, "welcome"));
    }
  };
  const uint16_t port = a.Listen();
  EXPECT_FALSE(b->ConnectAttemptFailed(1));
  b->Connect(1, "127.0.0.1", port);
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return a->IsUp(2) && b->IsUp(1); }));
  EXPECT_EQ(a->UpPeers(), std::vector<uint32_t>{2});
  EXPECT_EQ(b->UpPeers(), std::vector<uint32_t>{1});

  EXPECT_TRUE(a->Send(2, 16, "to two"));
  EXPECT_TRUE(b->Send(1, 17, "to one"));
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return a.received.size() == 1 && b.received.size() == 2; }));
  EXPECT_EQ(a.received[0].peer, 2u);
  EXPECT_EQ(a.received[0].type, 17);
  EXPECT_EQ(a.received[0].payload, "to one");
  EXPECT_EQ(b.received[0].payload, "welcome");
  EXPECT_EQ(b.received[1].peer, 1u);
  EXPECT_EQ(b.received[1].type, 16);
  EXPECT_EQ(b.received[1].payload, "to two");
  EXPECT_EQ(a.links, (std::vector<std::pair<uint32_t, bool>>{{2, true}}));
  EXPECT_EQ(b.links, (std::vector<std::pair<uint32_t, bool>>{{1, true}}));
  EXPECT_EQ(a.stats().accepts, 1u);
  EXPECT_EQ(b.stats().connects, 1u);
  EXPECT_EQ(a.stats().handshakes_ok, 1u);
  EXPECT_EQ(b.stats().handshakes_ok, 1u);
  EXPECT_FALSE(b->ConnectAttemptFailed(1));
}

// An owner of many hubs (the coordination load bench) polls a hub only when
// its epoll descriptor is ready or NextTimerMs is due. That must be enough:
// the keepalive pings flow and neither side times the other out.
TEST(SecureChannel, PollingOnlyWhenReadyOrDueKeepsALinkAlive) {
  ChannelOptions quick;
  quick.keepalive_interval_ms = 200;
  quick.idle_timeout_ms = 1000;  // loose: a loaded machine may stall this thread for a while
  Node a(1, quick), b(2, quick);
  EXPECT_EQ(b->NextTimerMs(), std::numeric_limits<int64_t>::max()) << "no connection, no timer";
  const uint16_t port = a.Listen();
  b->Connect(1, "127.0.0.1", port);
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return a->IsUp(2) && b->IsUp(1); }));
  const auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  EXPECT_LE(b->NextTimerMs(), now_ms() + quick.idle_timeout_ms);
  const uint64_t frames_before = a.stats().frames_received;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);  // 2.5 idle timeouts
  int polls = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (Node* n : {&a, &b}) {
      pollfd ready{n->hub->ready_fd(), POLLIN, 0};
      if (::poll(&ready, 1, 0) > 0 || now_ms() >= n->hub->NextTimerMs()) {
        n->hub->Poll(0);
        ++polls;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(a->IsUp(2) && b->IsUp(1));
  EXPECT_EQ(a.stats().idle_timeouts + b.stats().idle_timeouts, 0u);
  EXPECT_GE(a.stats().frames_received - frames_before, 5u) << "pings kept the link";
  EXPECT_LT(polls, 500) << "polled only when ready or due, not every turn (at most 1000)";
}

// Outgoing connections leave from the configured source address (the load
// bench gives every simulated node one of its own); an address that is not
// this host's fails the attempt, with the reason, rather than connecting
// from elsewhere.
TEST(SecureChannel, OutgoingConnectionsLeaveFromTheSourceAddress) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  ChannelOptions from7;
  from7.source_address = "127.0.0.7";
  Node b(2, from7);
  b->Connect(1, "127.0.0.1", ntohs(sa.sin_port));
  int accepted = -1;
  ASSERT_TRUE(PollUntil({&b}, [&] { return accepted >= 0; },
                        [&] { accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC); }));
  sockaddr_in peer{};
  len = sizeof(peer);
  ASSERT_EQ(::getpeername(accepted, reinterpret_cast<sockaddr*>(&peer), &len), 0);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof(text));
  EXPECT_STREQ(text, "127.0.0.7");
  ::close(accepted);
  ::close(listener);

  ChannelOptions foreign;
  foreign.source_address = "192.0.2.1";  // TEST-NET-1: on no interface here
  Node c(3, foreign);
  c->Connect(1, "127.0.0.1", ntohs(sa.sin_port));
  EXPECT_TRUE(PollUntil({&c}, [&] { return c->ConnectAttemptFailed(1); }));
  EXPECT_EQ(c.stats().handshakes_ok, 0u);
}

TEST(SecureChannel, ManyMessagesInOrderWithALargeOne) {
  Linked l;
  ASSERT_TRUE(l.ok);
  std::string big(4u << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) ^ (i >> 10));
  constexpr int kCount = 2000;
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE(l.b->Send(1, 16, i == kCount / 2 ? big : std::to_string(i)));
  }
  ASSERT_TRUE(PollUntil({&l.a, &l.b}, [&] { return l.a.received.size() == kCount; }));
  for (int i = 0; i < kCount; ++i) {
    if (i == kCount / 2) {
      EXPECT_TRUE(l.a.received[i].payload == big);
    } else {
      ASSERT_EQ(l.a.received[i].payload, std::to_string(i));
    }
  }
  EXPECT_GE(l.a.stats().bytes_received, big.size());
}

TEST(SecureChannel, Ipv6Loopback) {
  Node a(1), b(2);
  std::string error;
  if (!a->Listen("::1", 0, &error)) CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI("no IPv6 loopback: " + error);
  b->Connect(1, "::1", a->listen_port());
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return a->IsUp(2) && b->IsUp(1); }));
  EXPECT_TRUE(b->Send(1, 16, "v6"));
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return !a.received.empty(); }));
  EXPECT_EQ(a.received[0].payload, "v6");
}

TEST(SecureChannel, WrongKeyNeverLinksAndCountsAuthFailures) {
  ClusterKey other = TestKey();
  other[0] ^= 1;
  Node a(1), b(2, {}, other);
  b->Connect(1, "127.0.0.1", a.Listen());
  // Whichever side checks a MAC first counts it; the other may see the
  // connection end first. Both fail the handshake, and keep failing.
  ASSERT_TRUE(PollUntil({&a, &b}, [&] {
    return a.stats().auth_failures + b.stats().auth_failures > 0 && a.stats().handshakes_failed > 0 &&
           b.stats().handshakes_failed > 0 && b->ConnectAttemptFailed(1);
  }));
  EXPECT_TRUE(a.links.empty());
  EXPECT_TRUE(b.links.empty());
  EXPECT_EQ(a.stats().handshakes_ok + b.stats().handshakes_ok, 0u);
}

TEST(SecureChannel, OtherClusterIdIsRefused) {
  Node a(1), b(2, {}, TestKey(), kCluster + 1);
  b->Connect(1, "127.0.0.1", a.Listen());
  ASSERT_TRUE(PollUntil({&a, &b}, [&] {
    return a.stats().refused + b.stats().refused > 0 && a.stats().handshakes_failed > 0 &&
           b.stats().handshakes_failed > 0;
  }));
  EXPECT_TRUE(a.links.empty());
  EXPECT_TRUE(b.links.empty());
  EXPECT_TRUE(b->ConnectAttemptFailed(1));
}

TEST(SecureChannel, OwnNodeIdIsRefused) {
  Node a(1), impostor(1);
  impostor->Connect(5, "127.0.0.1", a.Listen());
  ASSERT_TRUE(PollUntil({&a, &impostor}, [&] { return a.stats().refused > 0; }));
  EXPECT_TRUE(a.links.empty());
  EXPECT_FALSE(a->IsUp(1));
  // Connect to our own id is ignored outright.
  a->Connect(1, "127.0.0.1", a->listen_port());
  a->Poll(0);
  EXPECT_EQ(a.stats().connects, 0u);
}

TEST(SecureChannel, AnotherNodeAnsweringIsRefused) {
  Node a(1), b(2);
  b->Connect(3, "127.0.0.1", a.Listen());  // b thinks node 3 listens there
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return b->ConnectAttemptFailed(3); }));
  EXPECT_GT(b.stats().refused, 0u);
  EXPECT_FALSE(b->IsUp(3));
  EXPECT_FALSE(b->IsUp(1));
}

TEST(SecureChannel, TamperedByteDropsTheConnectionThenItRecovers) {
  Node a(1), b(2);
  TamperProxy proxy(a.Listen());
  const Pump pump = [&] { proxy.Pump(); };
  b->Connect(1, "127.0.0.1", proxy.port());
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return a->IsUp(2) && b->IsUp(1); }, pump));
  proxy.ArmFlip(20);  // inside the next frame b sends, whatever it is
  EXPECT_TRUE(b->Send(1, 16, std::string(100, 'm')));
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return a.stats().auth_failures > 0; }, pump));
  EXPECT_TRUE(proxy.flipped());
  EXPECT_EQ(a.links.back(), std::make_pair(2u, false));
  // b redials through the proxy (untampered now) and traffic flows again.
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return a->IsUp(2) && b->IsUp(1) && proxy.connections() >= 2; }, pump));
  EXPECT_TRUE(b->Send(1, 16, "after"));
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return !a.received.empty() && a.received.back().payload == "after"; }, pump));
  for (const Received& r : a.received) {
    EXPECT_TRUE(r.payload == "after" || r.payload == std::string(100, 'm'));
  }
}

TEST(SecureChannel, OversizeFrameIsRefusedBothWays) {
  ChannelOptions small;
  small.max_frame_bytes = 64 * 1024;
  Linked l(small, {});
  ASSERT_TRUE(l.ok);
  // The sender refuses what its own limit forbids ...
  EXPECT_FALSE(l.a->Send(2, 16, std::string(small.max_frame_bytes + 1, 'x')));
  EXPECT_TRUE(l.a->Send(2, 16, std::string(small.max_frame_bytes, 'x')));
  // ... and a receiver with a smaller limit than its peer drops the link.
  EXPECT_TRUE(l.b->Send(1, 16, std::string(100 * 1024, 'y')));
  ASSERT_TRUE(PollUntil({&l.a, &l.b}, [&] { return l.a.stats().frame_errors > 0; }));
  EXPECT_TRUE(l.a.received.empty());
  EXPECT_EQ(l.a.links.back(), std::make_pair(2u, false));
}

TEST(SecureChannel, HandshakeTimeoutClosesASilentSocket) {
  ChannelOptions o;
  o.handshake_timeout_ms = 200;
  Node a(1, o);
  const int fd = RawConnect(a.Listen());
  std::string got;
  bool open = true;
  ASSERT_TRUE(PollUntil({&a}, [&] {
    open = open && DrainRaw(fd, &got);
    return !open;
  }));
  ::close(fd);
  EXPECT_EQ(got.size(), kChannelHelloSize);  // its hello, nothing else
  EXPECT_EQ(a.stats().handshake_timeouts, 1u);
  EXPECT_EQ(a.stats().handshakes_failed, 1u);
}

TEST(SecureChannel, IdleTimeoutClosesASilentAuthenticatedPeer) {
  ChannelOptions o;
  o.keepalive_interval_ms = 50;
  o.idle_timeout_ms = 500;
  Node a(1, o);
  const int fd = RawConnect(a.Listen());
  // Node 9 done by hand: the handshake, then nothing at all.
  ChannelSession s(ChannelIdentity{kCluster, 9, TestKey()}, ChannelRole::kInitiator, 1u, 1 << 20);
  std::string out = s.hello();
  size_t pings = 0;
  bool open = true;
  ASSERT_TRUE(PollUntil({&a}, [&] {
    if (!out.empty()) {
      EXPECT_EQ(::send(fd, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
      out.clear();
    }
    std::string in;
    open = open && DrainRaw(fd, &in);
    s.Feed(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(in.data()), in.size()));
    ChannelEvent ev;
    while (s.Next(&ev, &out) == ChannelResult::kOk) {
      pings += ev.kind == ChannelEvent::Kind::kFrame && ev.frame.type == kChannelPingType;
    }
    return !open;
  }));
  ::close(fd);
  EXPECT_TRUE(s.established());
  EXPECT_GT(pings, 0u);  // the hub kept the link alive from its side
  EXPECT_EQ(a.stats().idle_timeouts, 1u);
  EXPECT_EQ(a.links, (std::vector<std::pair<uint32_t, bool>>{{9, true}, {9, false}}));
}

TEST(SecureChannel, KeepaliveHoldsAQuietLink) {
  ChannelOptions o;
  o.keepalive_interval_ms = 50;
  o.idle_timeout_ms = 1500;
  Linked l(o, o);
  ASSERT_TRUE(l.ok);
  PollFor({&l.a, &l.b}, std::chrono::milliseconds(2000));
  EXPECT_TRUE(l.a->IsUp(2));
  EXPECT_TRUE(l.b->IsUp(1));
  EXPECT_EQ(l.a.stats().idle_timeouts + l.b.stats().idle_timeouts, 0u);
  EXPECT_GT(l.a.stats().frames_received, 5u);  // pings
  EXPECT_TRUE(l.a.received.empty());           // never handed to the owner
}

// A leader's hub holds every node of the cluster (the etcd backend). With
// the deadlines of all its connections in one index, each one's keepalive
// and idle timeout still fire: every link stays up through a quiet spell,
// every message arrives, and the one peer that falls silent is timed out.
TEST(SecureChannel, AHubWithManyPeersKeepsEveryLinkAndTimesOutTheSilentOne) {
  constexpr uint32_t kPeers = 200;
  ChannelOptions o;
  o.keepalive_interval_ms = 100;
  o.idle_timeout_ms = 3000;
  o.max_pending_handshakes = 2 * kPeers;  // all dial from 127.0.0.1 at once
  o.max_pending_per_address = 2 * kPeers;
  Node leader(1, o);
  const uint16_t port = leader.Listen();
  std::vector<std::unique_ptr<Node>> peers;
  for (uint32_t i = 0; i < kPeers; ++i) {
    peers.push_back(std::make_unique<Node>(100 + i, o));
    (*peers.back())->Connect(1, "127.0.0.1", port);
  }
  size_t silent = kPeers;  // none yet
  auto pass = [&] {
    leader->Poll(0);
    for (size_t i = 0; i < peers.size(); ++i) {
      if (i != silent) (*peers[i])->Poll(0);
    }
  };
  auto until = [&](const std::function<bool()>& done, std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      pass();
    }
    return true;
  };
  auto all_up = [&] {
    if (leader->UpPeers().size() != kPeers) return false;
    return std::all_of(peers.begin(), peers.end(), [](const auto& p) { return (*p)->IsUp(1); });
  };
  ASSERT_TRUE(until(all_up, std::chrono::seconds(60))) << leader->UpPeers().size() << " of " << kPeers << " up";

  for (uint32_t i = 0; i < kPeers; ++i) ASSERT_TRUE((*peers[i])->Send(1, 20, std::to_string(100 + i)));
  ASSERT_TRUE(until([&] { return leader.received.size() == kPeers; }, std::chrono::seconds(30)));
  for (const Received& r : leader.received) {
    EXPECT_EQ(r.payload, std::to_string(r.peer));
    EXPECT_TRUE(leader->Send(r.peer, 21, "to " + r.payload));
  }
  ASSERT_TRUE(until([&] { return std::all_of(peers.begin(), peers.end(), [](const auto& p) { return p->received.size() == 1; }); },
                    std::chrono::seconds(30)));
  for (uint32_t i = 0; i < kPeers; ++i) EXPECT_EQ(peers[i]->received[0].payload, "to " + std::to_string(100 + i));

  // Quiet: only pings flow, and hold every link.
  const uint64_t frames_before = leader.stats().frames_received;
  until([] { return false; }, std::chrono::seconds(1));
  EXPECT_TRUE(all_up());
  EXPECT_EQ(leader.stats().idle_timeouts, 0u);
  EXPECT_GE(leader.stats().frames_received - frames_before, kPeers) << "a ping from every peer, at least";

  // One peer falls silent (its process hangs; its sockets stay open).
  silent = 0;
  ASSERT_TRUE(until([&] { return !leader->IsUp(100); }, std::chrono::seconds(30)));
  EXPECT_EQ(leader.stats().idle_timeouts, 1u);
  EXPECT_EQ(leader->UpPeers().size(), kPeers - 1);
  EXPECT_EQ(leader.stats().disconnects, 1u);
}

TEST(SecureChannel, ReconnectsAfterTheListenerRestarts) {
  Linked l;
  ASSERT_TRUE(l.ok);
  l.a.hub.reset();
  ASSERT_TRUE(PollUntil({&l.b}, [&] { return !l.b->IsUp(1); }));
  Node a2(1);
  std::string error;
  ASSERT_TRUE(a2->Listen("127.0.0.1", l.port, &error)) << error;
  ASSERT_TRUE(PollUntil({&a2, &l.b}, [&] { return a2->IsUp(2) && l.b->IsUp(1); }));
  EXPECT_TRUE(l.b->Send(1, 16, "again"));
  ASSERT_TRUE(PollUntil({&a2, &l.b}, [&] { return !a2.received.empty(); }));
  EXPECT_EQ(a2.received[0].payload, "again");
  EXPECT_GE(l.b.stats().connects, 2u);
  EXPECT_EQ(l.b.links, (std::vector<std::pair<uint32_t, bool>>{{1, true}, {1, false}, {1, true}}));
}

TEST(SecureChannel, DisconnectStopsReconnecting) {
  Linked l;
  ASSERT_TRUE(l.ok);
  l.b->Disconnect(1);
  EXPECT_FALSE(l.b->IsUp(1));  // at once; the event comes from Poll
  ASSERT_TRUE(PollUntil({&l.a, &l.b}, [&] { return !l.a->IsUp(2) && l.b.links.size() == 2; }));
  const uint64_t accepts = l.a.stats().accepts;
  const uint64_t connects = l.b.stats().connects;
  PollFor({&l.a, &l.b}, std::chrono::milliseconds(600));  // several backoff periods
  EXPECT_EQ(l.a.stats().accepts, accepts);
  EXPECT_EQ(l.b.stats().connects, connects);
  EXPECT_FALSE(l.b->ConnectAttemptFailed(1));
  EXPECT_FALSE(l.b->Send(1, 16, "gone"));
}

TEST(SecureChannel, BothDirectionsConnectedBothUsable) {
  Node a(1), b(2);
  const uint16_t pa = a.Listen();
  const uint16_t pb = b.Listen();
  a->Connect(2, "127.0.0.1", pb);
  b->Connect(1, "127.0.0.1", pa);
  ASSERT_TRUE(PollUntil({&a, &b}, [&] {
    return a.stats().handshakes_ok == 2 && b.stats().handshakes_ok == 2;
  }));
  EXPECT_EQ(a->ConnectionCount(2), 2u);
  EXPECT_EQ(a.links, (std::vector<std::pair<uint32_t, bool>>{{2, true}}));  // one event per peer
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(a->Send(2, 16, "a" + std::to_string(i)));
    ASSERT_TRUE(b->Send(1, 16, "b" + std::to_string(i)));
  }
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return a.received.size() == 50 && b.received.size() == 50; }));
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(a.received[i].payload, "b" + std::to_string(i));  // one connection: in order
    EXPECT_EQ(b.received[i].payload, "a" + std::to_string(i));
  }
  // Dropping a's outgoing connection leaves b's: still up, still usable.
  a->Disconnect(2);
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return a->ConnectionCount(2) == 1 && b->ConnectionCount(1) == 1; }));
  EXPECT_TRUE(a->IsUp(2));
  EXPECT_TRUE(b->IsUp(1));
  EXPECT_TRUE(a->Send(2, 16, "still"));
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return b.received.size() == 51; }));
  EXPECT_EQ(a.links.size(), 1u);
}

TEST(SecureChannel, SendQueueIsBounded) {
  ChannelOptions o;
  o.max_queued_bytes = 1 << 20;
  Linked l(o, o);
  ASSERT_TRUE(l.ok);
  const std::string chunk(64 * 1024, 'q');
  int queued = 0;
  while (l.b->Send(1, 16, chunk)) ++queued;  // no Poll: nothing leaves the queue
  // Up to a keepalive ping that may sit in the queue too.
  const int fit = static_cast<int>(o.max_queued_bytes / (chunk.size() + kChannelFrameOverhead));
  EXPECT_LE(queued, fit);
  EXPECT_GE(queued, fit - 1);
  EXPECT_EQ(l.b.stats().send_queue_full, 1u);
  ASSERT_TRUE(PollUntil({&l.a, &l.b}, [&] { return l.a.received.size() == static_cast<size_t>(queued); }));
  EXPECT_TRUE(l.b->Send(1, 16, chunk));  // drained: room again
}

TEST(SecureChannel, SendWithoutALinkOrWithAReservedTypeFails) {
  Linked l;
  ASSERT_TRUE(l.ok);
  EXPECT_FALSE(l.a->Send(99, 16, "nobody"));
  EXPECT_FALSE(l.a->Send(2, kChannelPingType, ""));
  EXPECT_FALSE(l.a->Send(2, kChannelFirstUserType - 1, "reserved"));
  EXPECT_TRUE(l.a->Send(2, kChannelFirstUserType, "ok"));
  EXPECT_FALSE(l.a->IsUp(99));
  EXPECT_FALSE(l.a->ConnectAttemptFailed(99));
}

TEST(SecureChannel, ConnectAttemptFailedUntilTheListenerAppears) {
  // A port that was free a moment ago; nobody listens on it now.
  uint16_t port = 0;
  {
    Node probe(3);
    port = probe.Listen();
  }
  Node b(2);
  b->Connect(1, "127.0.0.1", port);
  EXPECT_FALSE(b->ConnectAttemptFailed(1));
  ASSERT_TRUE(PollUntil({&b}, [&] { return b->ConnectAttemptFailed(1); }));
  EXPECT_GT(b.stats().connect_failures, 0u);
  Node a(1);
  std::string error;
  ASSERT_TRUE(a->Listen("127.0.0.1", port, &error)) << error;
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return b->IsUp(1); }));
  EXPECT_FALSE(b->ConnectAttemptFailed(1));
}

TEST(SecureChannel, BadAddressesAreReportedNotFatal) {
  Node b(2);
  std::string error;
  EXPECT_FALSE(b->Listen("not-an-address", 0, &error));
  EXPECT_FALSE(error.empty());
  b->Connect(1, "example.invalid", 1);  // no DNS: a literal is required
  ASSERT_TRUE(PollUntil({&b}, [&] { return b->ConnectAttemptFailed(1); }));
  EXPECT_FALSE(b->IsUp(1));
}

// ---- issue 14, finding 4: handshake slots cannot be exhausted ----------------------

// Loopback source addresses for attackers: 127.0.0.0/8 is all local, so each
// is a distinct remote address to the hub at 127.0.0.1.
std::vector<std::string> LoopbackSources(int first, int count) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back("127.0.0." + std::to_string(first + i));
  return out;
}

// A listener that the test drives by hand: it accepts and then closes each
// connection before any handshake (with an RST when `reset`).
class ClosingListener {
 public:
  ClosingListener(uint16_t port, bool reset) : reset_(reset) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 && ::listen(fd_, 16) == 0;
  }
  ~ClosingListener() { ::close(fd_); }
  bool ok() const { return ok_; }
  size_t closed() const { return closed_; }
  void Pump() {
    for (int c; (c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
      if (reset_) {
        const linger abort{1, 0};
        ::setsockopt(c, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
      }
      ::close(c);
      ++closed_;
    }
  }

 private:
  int fd_ = -1;
  bool ok_ = false, reset_ = false;
  size_t closed_ = 0;
};

// One address opens far more connections than the hub holds unauthenticated
// (64 in all here) and keeps reopening them: it holds at most
// max_pending_per_address of them, and a peer still gets in.
TEST(SecureChannel, AFloodFromOneAddressDoesNotKeepAPeerOut) {
  ChannelOptions o;
  o.max_pending_handshakes = 64;
  Node a(1, o), b(2);
  const uint16_t port = a.Listen();
  testing::ConnectionFlood flood("127.0.0.1", port, {"127.0.0.2"}, 100);
  ASSERT_TRUE(PollUntil({&a}, [&] { return a.stats().accepts >= 100; })) << "the flood did not arrive";
  b->Connect(1, "127.0.0.1", port);
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return b->IsUp(1) && a->IsUp(2); }, {}, std::chrono::seconds(10)))
      << "shed " << a.stats().handshakes_shed << ", flood opened " << flood.opened();
  EXPECT_FALSE(b->ConnectAttemptFailed(1));
  EXPECT_GT(a.stats().handshakes_shed, 0u);
  EXPECT_TRUE(b->Send(1, 16, "through"));
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return !a.received.empty(); }));
  EXPECT_EQ(a.received[0].payload, "through");
}

// Many addresses, each under the per-address cap, fill the slots in all (64
// here): a newcomer pushes out the oldest connection of the address holding
// the most, so a peer's handshake still completes.
TEST(SecureChannel, AFloodFromManyAddressesDoesNotKeepAPeerOut) {
  ChannelOptions o;
  o.max_pending_handshakes = 64;
  Node a(1, o), b(2);
  const uint16_t port = a.Listen();
  testing::ConnectionFlood flood("127.0.0.1", port, LoopbackSources(10, 40), 3);
  ASSERT_TRUE(PollUntil({&a}, [&] { return a.stats().accepts >= 120; })) << "the flood did not arrive";
  b->Connect(1, "127.0.0.1", port);
  ASSERT_TRUE(PollUntil({&a, &b}, [&] { return b->IsUp(1) && a->IsUp(2); }, {}, std::chrono::seconds(10)))
      << "shed " << a.stats().handshakes_shed << ", flood opened " << flood.opened();
  EXPECT_FALSE(b->ConnectAttemptFailed(1));
  EXPECT_GT(a.stats().handshakes_shed, 0u);
}

// Many honest nodes dialling at once (a new leader after a failover) with
// every slot taken: newcomers wait for a slot (in the listen backlog)
// instead of pushing out handshakes in their first moments, and all get in.
TEST(SecureChannel, AnHonestBurstIsNotShedBeforeItsHandshakesComplete) {
  ChannelOptions small;
  small.max_pending_handshakes = 4;
  // This test's hubs take turns polling (tens of ms a round, not an
  // agent's thread each): the slots' first moments are longer here.
  small.min_shed_age_ms = 3000;
  Node a(1, small);
  const uint16_t port = a.Listen();
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<Node*> all = {&a};
  for (uint32_t id = 2; id < 42; ++id) {
    ChannelOptions own;
    own.source_address = "127.0.1." + std::to_string(id);  // one address each, as hosts have
    own.reconnect_min_ms = 20;
    own.reconnect_max_ms = 200;  // a refused node is soon back
    nodes.push_back(std::make_unique<Node>(id, own));
    all.push_back(nodes.back().get());
  }
  for (auto& n : nodes) (*n)->Connect(1, "127.0.0.1", port);
  ASSERT_TRUE(PollUntil(all, [&] { return a->UpPeers().size() == nodes.size(); }, {}, std::chrono::seconds(60)))
      << a->UpPeers().size() << " of " << nodes.size() << " up; shed " << a.stats().handshakes_shed
      << ", accepts deferred " << a.stats().accepts_deferred;
  EXPECT_EQ(a.stats().handshakes_shed, 0u);
  EXPECT_GT(a.stats().accepts_deferred, 0u);
}

// The per-address cap itself: a fifth pending connection from one address
// closes that address's oldest, and no other's.
TEST(SecureChannel, PendingConnectionsPerAddressAreCapped) {
  ChannelOptions o;
  o.handshake_timeout_ms = 60'000;  // nothing times out meanwhile
  Node a(1, o);
  const uint16_t port = a.Listen();
  std::vector<int> mine;
  for (int i = 0; i < 4; ++i) mine.push_back(RawConnect(port));
  ASSERT_TRUE(PollUntil({&a}, [&] { return a.stats().accepts == 4; }));
  testing::ConnectionFlood other("127.0.0.1", port, {"127.0.0.3"}, 6);
  ASSERT_TRUE(PollUntil({&a}, [&] { return a.stats().accepts >= 10 && a.stats().handshakes_shed >= 2; }));
  // Every shed connection was the other address's: ours are all open.
  PollFor({&a}, std::chrono::milliseconds(100));
  for (int fd : mine) {
    std::string hello;
    EXPECT_TRUE(DrainRaw(fd, &hello)) << "a connection from 127.0.0.1 was closed";
    EXPECT_EQ(hello.size(), kChannelHelloSize);
    ::close(fd);
  }
}

// A listener that accepts and closes (or resets) before the handshake is
// alive: the dialler does not report the attempt failed, and a refused
// connect before it did.
TEST(SecureChannel, AListenerThatClosesBeforeTheHandshakeIsNotAFailedAttempt) {
  for (const bool reset : {false, true}) {
    SCOPED_TRACE(reset ? "reset" : "closed");
    uint16_t port = 0;
    {
      Node probe(3);
      port = probe.Listen();
    }
    Node b(2);
    b->Connect(1, "127.0.0.1", port);
    ASSERT_TRUE(PollUntil({&b}, [&] { return b->ConnectAttemptFailed(1); }));  // refused: nobody there
    ClosingListener listener(port, reset);
    ASSERT_TRUE(listener.ok());
    ASSERT_TRUE(PollUntil({&b}, [&] { return listener.closed() >= 3; }, [&] { listener.Pump(); },
                          std::chrono::seconds(10)));
    PollUntil({&b}, [&] { return b->ConnectionCount(1) == 0; }, [&] { listener.Pump(); });
    EXPECT_FALSE(b->ConnectAttemptFailed(1));
    EXPECT_FALSE(b->IsUp(1));
  }
}

// But a listener that accepts and then never answers is a hung peer: the
// handshake timeout counts as a failed attempt (a hung leader cannot lead).
TEST(SecureChannel, AListenerThatNeverAnswersIsAFailedAttempt) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);  // the kernel accepts; nobody answers
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ChannelOptions o;
  o.handshake_timeout_ms = 200;
  Node b(2, o);
  b->Connect(1, "127.0.0.1", ntohs(sa.sin_port));
  ASSERT_TRUE(PollUntil({&b}, [&] { return b->ConnectAttemptFailed(1); }));
  EXPECT_GT(b.stats().handshake_timeouts, 0u);
  ::close(fd);
}

}  // namespace
}  // namespace chronolink
