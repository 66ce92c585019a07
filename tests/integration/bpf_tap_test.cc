// The eBPF timestamp tap on a real test bed (two namespaces joined by a veth
// pair): every probe leaves node 1 through tc egress and dev_start_xmit and
// reaches node 2 through XDP and tc ingress; non-probe traffic makes no
// records; a SIGKILLed tap leaves nothing attached; stale classic tc filters
// of ours are removed and nobody else's are. Needs root (skips outside CI).
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/ci_rule.h"

#ifdef CHRONOLINK_HAVE_BPF
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <thread>

#include "agent/capture/bpf_tap.h"
#include "agent/capture/netlink_query.h"
#include "agent/runtime/privileges.h"
#include "agent/wire/probe_codec.h"
#include "tests/integration/testbed_fixture.h"

#include <bpf/libbpf.h>

#include <array>
#include <sstream>

namespace chronolink::testing {
namespace {

constexpr uint16_t kPort = 7319;
constexpr uint32_t kCluster = 7;
constexpr uint64_t kEpoch = 0x1122334455667788ull;

// ---------------------------------------------------------------- helpers

// Runs fn on a thread that has joined network namespace `ns` (setns is per
// thread). Sockets, ifindexes and tc/XDP attachments made there belong to ns.
void InNetns(const std::string& ns, const std::function<void()>& fn) {
  std::thread t([&] {
    const std::string path = "/var/run/netns/" + ns;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
      ADD_FAILURE() << "setns into " << path << ": " << strerror(errno);
      if (fd >= 0) close(fd);
      return;
    }
    close(fd);
    fn();
  });
  t.join();
}

bool EnterNetnsProcess(const std::string& ns) {
  const std::string path = "/var/run/netns/" + ns;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = setns(fd, CLONE_NEWNET) == 0;
  close(fd);
  return ok;
}

int64_t Now(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

ClusterKey TestKey() {
  ClusterKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(i * 7 + 1);
  return k;
}

std::array<uint8_t, kProbeWireSize> MakeProbe(uint64_t seq, uint32_t cluster = kCluster) {
  ProbeCodec codec(cluster, TestKey());
  ProbeMessage m;
  m.type = MessageType::kForward;
  m.sender_node = 1;
  m.receiver_node = 2;
  m.sender_epoch = kEpoch;
  m.seq = seq;
  m.index = static_cast<uint8_t>(seq & 1);
  std::array<uint8_t, kProbeWireSize> out{};
  codec.Encode(m, std::span<uint8_t, kProbeWireSize>(out));
  return out;
}

struct Key {
  uint32_t sender = 0, receiver = 0;
  uint64_t epoch = 0, seq = 0;
  uint8_t index = 0;
  auto operator<=>(const Key&) const = default;
};

uint64_t Be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

Key KeyOfPayload(const uint8_t* h) {
  Key k;
  k.sender = static_cast<uint32_t>(Be(h + CHRONOLINK_WIRE_SENDER_OFF, 4));
  k.receiver = static_cast<uint32_t>(Be(h + CHRONOLINK_WIRE_RECEIVER_OFF, 4));
  k.epoch = Be(h + CHRONOLINK_WIRE_EPOCH_OFF, 8);
  k.seq = Be(h + CHRONOLINK_WIRE_SEQ_OFF, 8);
  k.index = h[CHRONOLINK_WIRE_INDEX_OFF];
  return k;
}

int UdpSocket(int family, uint16_t port) {
  const int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // Room for every datagram and TX stamp of a test run: receivers read only
  // after all is sent (and veth+XDP skbs have a large truesize).
  const int big = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
  if (family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return close(fd), -1;
  } else {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return close(fd), -1;
  }
  return fd;
}

sockaddr_storage Dest(const std::string& addr, uint16_t port, socklen_t* len) {
  sockaddr_storage ss{};
  if (addr.find(':') == std::string::npos) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    inet_pton(AF_INET, addr.c_str(), &a->sin_addr);
    *len = sizeof(sockaddr_in);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    inet_pton(AF_INET6, addr.c_str(), &a->sin6_addr);
    *len = sizeof(sockaddr_in6);
  }
  return ss;
}

bool SendTo(int fd, const std::string& addr, uint16_t port, const uint8_t* data, size_t n) {
  socklen_t len;
  sockaddr_storage ss = Dest(addr, port, &len);
  return sendto(fd, data, n, 0, reinterpret_cast<sockaddr*>(&ss), len) == static_cast<ssize_t>(n);
}

void SpinFor(int64_t ns) {
  const int64_t end = Now(CLOCK_MONOTONIC) + ns;
  while (Now(CLOCK_MONOTONIC) < end) {
  }
}

// Receives datagrams until `want` arrived or the timeout; returns payload
// key -> RX_SOFTWARE stamp (0 if none) for 144-byte payloads.
std::map<Key, int64_t> ReceiveAll(int fd, size_t want, int timeout_ms, size_t* total) {
  std::map<Key, int64_t> got;
  *total = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (*total < want && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    uint8_t buf[2048];
    char ctrl[512];
    iovec iov{buf, sizeof(buf)};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctrl;
    m.msg_controllen = sizeof(ctrl);
    const ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
    if (n < 0) continue;
    ++*total;
    int64_t sw = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING) {
        timespec ts[3];
        std::memcpy(ts, CMSG_DATA(c), sizeof(ts));
        sw = static_cast<int64_t>(ts[0].tv_sec) * 1'000'000'000LL + ts[0].tv_nsec;
      }
    }
    if (n == static_cast<ssize_t>(kProbeWireSize)) got[KeyOfPayload(buf)] = sw;
  }
  return got;
}

// Reads TX_SOFTWARE stamps (OPT_ID|OPT_TSONLY) from the error queue: id -> ns.
std::map<uint32_t, int64_t> ReadTxStamps(int fd, size_t want, int timeout_ms) {
  std::map<uint32_t, int64_t> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
    char ctrl[512];
    uint8_t data[64];
    iovec iov{data, sizeof(data)};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctrl;
    m.msg_controllen = sizeof(ctrl);
    if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    int64_t sw = 0;
    uint32_t id = UINT32_MAX;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING) {
        timespec ts[3];
        std::memcpy(ts, CMSG_DATA(c), sizeof(ts));
        sw = static_cast<int64_t>(ts[0].tv_sec) * 1'000'000'000LL + ts[0].tv_nsec;
      } else if ((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                 (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) {
        sock_extended_err e;
        std::memcpy(&e, CMSG_DATA(c), sizeof(e));
        if (e.ee_origin == SO_EE_ORIGIN_TIMESTAMPING) id = e.ee_data;
      }
    }
    if (id != UINT32_MAX && sw != 0) out[id] = sw;
  }
  return out;
}

double Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[v.size() / 2]);
}
double Pct(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]);
}

const char* HookName(uint32_t h) {
  switch (h) {
    case CHRONOLINK_HOOK_TC_EGRESS: return "tc_egress";
    case CHRONOLINK_HOOK_TC_INGRESS: return "tc_ingress";
    case CHRONOLINK_HOOK_XDP: return "xdp";
    case CHRONOLINK_HOOK_DEV_XMIT: return "dev_xmit";
  }
  return "?";
}

std::string Describe(const std::vector<BpfTapAttachment>& as) {
  std::string s;
  for (const auto& a : as) {
    s += a.interface + "(ifindex " + std::to_string(a.ifindex) + "): tc_mode=" + a.tc_mode +
         " egress=" + std::to_string(a.tc_egress) + " ingress=" + std::to_string(a.tc_ingress) +
         " xdp=" + std::to_string(a.xdp) + " xdp_hw=" + std::to_string(a.xdp_hw_rx_timestamp) +
         " note=[" + a.note + "]\n";
  }
  return s;
}

std::string DescribeHooks(const std::vector<BpfHookInfo>& hs) {
  std::string s;
  for (const auto& h : hs) s += h.kind + ":" + h.prog_name + "#" + std::to_string(h.prog_id) + " ";
  return s;
}

int CountOurs(const std::vector<BpfHookInfo>& hs, const std::string& kind = "") {
  int n = 0;
  for (const auto& h : hs) {
    if (h.prog_name.rfind("chronolink_", 0) == 0 && (kind.empty() || h.kind == kind)) ++n;
  }
  return n;
}

// Trivial sched_cls program named `name` returning `verdict`: somebody else's
// tc filter, for the tests that check we leave foreign hooks alone.
int LoadForeignTcProgram(const char* name, int verdict) {
  bpf_insn insns[2] = {};
  insns[0].code = 0xb7;  // BPF_ALU64 | BPF_MOV | BPF_K: r0 = verdict
  insns[0].imm = verdict;
  insns[1].code = 0x95;  // BPF_JMP | BPF_EXIT
  return bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, name, "GPL", insns, 2, nullptr);
}

int RunShell(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool ProgExists(uint32_t id) {
  const int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return false;
  close(fd);
  return true;
}

// ---------------------------------------------------------------- fixture

class BpfTapTest : public TestbedFixture {
 public:  // RunProbeFlow (a free function) uses these
  std::string Ns(int i) const { return testbed_["nodes"][i - 1]["netns"]; }
  std::string Addr(int i) const { return testbed_["nodes"][i - 1]["address"]; }
  std::string Ifname(int i) const { return testbed_["nodes"][i - 1]["ifname"]; }

  BpfTapOptions Options(int node) const {
    BpfTapOptions o;
    o.udp_port = kPort;
    o.magic = kProbeMagic;
    o.cluster_id = kCluster;
    o.interfaces = {Ifname(node)};
    return o;
  }

  void OpenIn(int node, BpfTap* tap, const BpfTapOptions& o) {
    std::string err;
    bool ok = false;
    InNetns(Ns(node), [&] { ok = tap->Open(o, &err); });
    ASSERT_TRUE(ok) << err;
    std::printf("node %d tap: %s", node, Describe(tap->attachments()).c_str());
  }

  std::vector<BpfHookInfo> HooksIn(int node) {
    std::vector<BpfHookInfo> hs;
    InNetns(Ns(node), [&] {
      std::string err;
      hs = BpfTap::ListHooks(static_cast<int>(if_nametoindex(Ifname(node).c_str())), &err);
    });
    return hs;
  }

  int IfindexIn(int node) {
    int idx = 0;
    InNetns(Ns(node), [&] { idx = static_cast<int>(if_nametoindex(Ifname(node).c_str())); });
    return idx;
  }

  int SocketIn(int node, int family, uint16_t port) {
    int fd = -1;
    InNetns(Ns(node), [&] { fd = UdpSocket(family, port); });
    return fd;
  }

  static std::vector<chronolink_tap_record> Drain(BpfTap& tap) {
    std::vector<chronolink_tap_record> recs;
    tap.Consume([&](const chronolink_tap_record& r) { recs.push_back(r); });
    return recs;
  }

  // Waits for a forked child to say "ready" (one line on the pipe), returns its text.
  static std::string ReadLine(int fd, int timeout_ms) {
    std::string s;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char c;
      if (read(fd, &c, 1) != 1) break;
      if (c == '\n') return s;
      s += c;
    }
    return s;
  }
};

// ---------------------------------------------------------------- tests

// The main path: N probes node 1 -> node 2, plus non-probe traffic.
void RunProbeFlow(BpfTapTest* t, BpfTap& tap1, BpfTap& tap2, int family, const std::string& dst,
                  int fd1, int fd2, int n_probes, bool xdp2 = true);

TEST_F(BpfTapTest, EveryProbeStampedAtAllFourHooks) {
  if (!RequirePrivileges()) return;
  const int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);  // per-program run time, while held
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  BpfTap tap1, tap2;
  ASSERT_NO_FATAL_FAILURE(OpenIn(1, &tap1, Options(1)));
  ASSERT_NO_FATAL_FAILURE(OpenIn(2, &tap2, Options(2)));
  ASSERT_EQ(tap1.attachments().size(), 1u);
  const auto& a1 = tap1.attachments()[0];
  EXPECT_TRUE(a1.tc_egress && a1.tc_ingress && a1.xdp) << a1.note;
  EXPECT_EQ(a1.tc_mode, "tcx") << "kernel 6.6+ should take tcx links: " << a1.note;
  // veth has no RX hardware stamps: said once, plain XDP used
  EXPECT_NE(a1.note.find("no RX hardware timestamp on veth0 (veth)"), std::string::npos) << a1.note;
  EXPECT_FALSE(a1.xdp_hw_rx_timestamp);

  const int fd1 = SocketIn(1, AF_INET, kPort);
  const int fd2 = SocketIn(2, AF_INET, kPort);
  ASSERT_GE(fd1, 0);
  ASSERT_GE(fd2, 0);
  RunProbeFlow(this, tap1, tap2, AF_INET, Addr(2), fd1, fd2, 300);
  close(fd1);
  close(fd2);
  if (stats_fd >= 0) close(stats_fd);
}

void RunProbeFlow(BpfTapTest* t, BpfTap& tap1, BpfTap& tap2, int family, const std::string& dst,
                  int fd1, int fd2, int n_probes, bool xdp2) {
  const int hooks2 = xdp2 ? 2 : 1;
  // RX software stamps on node 2 (also makes the kernel fill skb->tstamp);
  // TX software stamps with OPT_ID on node 1.
  const int rxflags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
  ASSERT_EQ(setsockopt(fd2, SOL_SOCKET, SO_TIMESTAMPING, &rxflags, sizeof(rxflags)), 0);
  const int txflags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
                      SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
  ASSERT_EQ(setsockopt(fd1, SOL_SOCKET, SO_TIMESTAMPING, &txflags, sizeof(txflags)), 0);
  const int fd_other = [&] {
    int fd = -1;
    InNetns(t->Ns(1), [&] { fd = UdpSocket(family, kPort + 1); });
    return fd;
  }();
  ASSERT_GE(fd_other, 0);

  // Sends, in this order on fd1 (so OPT_ID i = i-th send on fd1): probes
  // 0..n-1; then non-probes to our port: wrong magic, wrong cluster, short.
  std::vector<Key> sent;
  std::map<Key, std::array<uint8_t, CHRONOLINK_WIRE_MAC_BYTES>> mac_of;  // what binds a record to its packet
  int bad_to_port = 0;
  const int64_t mono0 = Now(CLOCK_MONOTONIC);
  for (int i = 0; i < n_probes; ++i) {
    auto p = MakeProbe(static_cast<uint64_t>(i));
    ASSERT_TRUE(SendTo(fd1, dst, kPort, p.data(), p.size())) << strerror(errno);
    sent.push_back(KeyOfPayload(p.data()));
    std::copy_n(p.data() + CHRONOLINK_WIRE_MAC_OFF, CHRONOLINK_WIRE_MAC_BYTES,
                mac_of[sent.back()].begin());
    SpinFor(i % 2 == 0 ? 100'000 : 700'000);  // coded-pair-like pacing
  }
  for (int i = 0; i < 20; ++i) {
    auto wrong_magic = MakeProbe(1'000'000 + i);
    wrong_magic[0] ^= 0xFF;
    auto wrong_cluster = MakeProbe(2'000'000 + i, kCluster + 1);
    auto shorty = MakeProbe(3'000'000 + i);
    ASSERT_TRUE(SendTo(fd1, dst, kPort, wrong_magic.data(), wrong_magic.size()));
    ASSERT_TRUE(SendTo(fd1, dst, kPort, wrong_cluster.data(), wrong_cluster.size()));
    ASSERT_TRUE(SendTo(fd1, dst, kPort, shorty.data(), 100));
    bad_to_port += 3;
    // a real-looking probe between two unrelated ports: not ours at all
    auto other = MakeProbe(4'000'000 + i);
    ASSERT_TRUE(SendTo(fd_other, dst, 9999, other.data(), other.size()));
    SpinFor(200'000);
  }
  const int64_t mono1 = Now(CLOCK_MONOTONIC);

  const int64_t mono_sent = Now(CLOCK_MONOTONIC);
  size_t received_total = 0;
  const auto rx_sw = ReceiveAll(fd2, n_probes + bad_to_port, 3000, &received_total);
  const auto tx_sw = ReadTxStamps(fd1, n_probes, 2000);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto recs1 = BpfTapTest::Drain(tap1);
  const auto recs2 = BpfTapTest::Drain(tap2);
  close(fd_other);
  EXPECT_EQ(received_total, static_cast<size_t>(n_probes + bad_to_port))
      << "the tap must not disturb delivery";

  // hook -> key -> record
  std::map<uint32_t, std::map<Key, chronolink_tap_record>> by1, by2;
  std::set<uint64_t> seqs_seen;
  const int ifidx1 = t->IfindexIn(1), ifidx2 = t->IfindexIn(2);
  for (const auto* recs : {&recs1, &recs2}) {
    auto& by = recs == &recs1 ? by1 : by2;
    for (const auto& r : *recs) {
      const Key k = KeyOfPayload(r.head);
      EXPECT_EQ(by[r.hook].count(k), 0u) << "duplicate " << HookName(r.hook) << " seq " << k.seq;
      by[r.hook][k] = r;
      seqs_seen.insert(k.seq);
      EXPECT_EQ(Be(r.head, 4), kProbeMagic);
      EXPECT_EQ(Be(r.head + CHRONOLINK_WIRE_CLUSTER_OFF, 4), kCluster);
      // Every hook copies the packet's MAC along with its head.
      if (mac_of.count(k) != 0) {
        EXPECT_EQ(std::memcmp(r.mac, mac_of[k].data(), CHRONOLINK_WIRE_MAC_BYTES), 0)
            << HookName(r.hook) << " seq " << k.seq;
      }
      EXPECT_EQ(r.ifindex, static_cast<uint32_t>(recs == &recs1 ? ifidx1 : ifidx2))
          << HookName(r.hook);
      EXPECT_GE(static_cast<int64_t>(r.mono_ns), mono0);
      EXPECT_EQ(r.hw_rx_ns, 0u);
    }
  }
  // Only probes, nothing from the wrong-magic / wrong-cluster / short / foreign-port traffic.
  for (uint64_t s : seqs_seen) EXPECT_LT(s, static_cast<uint64_t>(n_probes)) << "seq " << s;
  // node 1 only sends: egress + dev_xmit; node 2 only receives: xdp + ingress.
  // (dev_xmit is global, but each tap keeps its own network namespace.)
  EXPECT_EQ(recs1.size(), static_cast<size_t>(2 * n_probes));
  EXPECT_EQ(recs2.size(), static_cast<size_t>(hooks2 * n_probes));
  EXPECT_EQ(by1[CHRONOLINK_HOOK_TC_EGRESS].size(), static_cast<size_t>(n_probes));
  EXPECT_EQ(by1[CHRONOLINK_HOOK_DEV_XMIT].size(), static_cast<size_t>(n_probes));
  EXPECT_EQ(by2[CHRONOLINK_HOOK_XDP].size(), static_cast<size_t>(xdp2 ? n_probes : 0));
  EXPECT_EQ(by2[CHRONOLINK_HOOK_TC_INGRESS].size(), static_cast<size_t>(n_probes));
  EXPECT_TRUE(by1[CHRONOLINK_HOOK_XDP].empty() && by1[CHRONOLINK_HOOK_TC_INGRESS].empty());
  EXPECT_TRUE(by2[CHRONOLINK_HOOK_TC_EGRESS].empty() && by2[CHRONOLINK_HOOK_DEV_XMIT].empty());

  // Causality per packet. All namespaces share one kernel clock, so the
  // order also holds across the two nodes.
  const int64_t real_minus_mono = Now(CLOCK_REALTIME) - Now(CLOCK_MONOTONIC);
  std::vector<int64_t> eg_to_xmit, xmit_to_xdp, xdp_to_ing, xmit_to_txsw, xdp_to_rxsw,
      rxsw_to_ing, tai_err, xmit_to_rxsw;
  int ingress_tstamp_equals_rxsw = 0, ingress_tstamp_set = 0;
  for (int i = 0; i < n_probes; ++i) {
    const Key& k = sent[i];
    if (!by1[CHRONOLINK_HOOK_TC_EGRESS].count(k) || !by1[CHRONOLINK_HOOK_DEV_XMIT].count(k) ||
        (xdp2 && !by2[CHRONOLINK_HOOK_XDP].count(k)) ||
        !by2[CHRONOLINK_HOOK_TC_INGRESS].count(k)) {
      ADD_FAILURE() << "probe seq " << k.seq << " misses a hook";
      continue;
    }
    const auto& eg = by1[CHRONOLINK_HOOK_TC_EGRESS][k];
    const auto& xm = by1[CHRONOLINK_HOOK_DEV_XMIT][k];
    const auto& in = by2[CHRONOLINK_HOOK_TC_INGRESS][k];
    if (auto it = rx_sw.find(k); it != rx_sw.end() && it->second != 0) {
      xmit_to_rxsw.push_back(it->second - int64_t(xm.tai_ns));
    }
    if (auto it = tx_sw.find(static_cast<uint32_t>(i)); it != tx_sw.end()) {
      xmit_to_txsw.push_back(it->second - int64_t(xm.tai_ns));
    }
    EXPECT_LE(eg.mono_ns, xm.mono_ns) << "seq " << k.seq;
    EXPECT_LE(xm.mono_ns, in.mono_ns) << "seq " << k.seq;
    EXPECT_LE(eg.tai_ns, xm.tai_ns);
    eg_to_xmit.push_back(int64_t(xm.mono_ns - eg.mono_ns));
    for (const auto* r : {&eg, &xm, &in}) {
      tai_err.push_back(std::llabs(int64_t(r->tai_ns - r->mono_ns) - real_minus_mono));
    }
    const auto rx = rx_sw.find(k);
    const int64_t rxsw = rx != rx_sw.end() ? rx->second : 0;
    if (rxsw != 0) {
      // TAI == REALTIME on these machines (kernel TAI offset 0)
      rxsw_to_ing.push_back(int64_t(in.tai_ns) - rxsw);
      if (in.skb_tstamp_ns != 0) {
        ++ingress_tstamp_set;
        if (int64_t(in.skb_tstamp_ns) == rxsw) ++ingress_tstamp_equals_rxsw;
      }
    }
    if (!xdp2) continue;
    const auto& xd = by2[CHRONOLINK_HOOK_XDP][k];
    EXPECT_LE(xm.mono_ns, xd.mono_ns) << "seq " << k.seq;
    EXPECT_LE(xd.mono_ns, in.mono_ns) << "seq " << k.seq;
    EXPECT_LE(xd.tai_ns, in.tai_ns);
    xmit_to_xdp.push_back(int64_t(xd.mono_ns - xm.mono_ns));
    xdp_to_ing.push_back(int64_t(in.mono_ns - xd.mono_ns));
    tai_err.push_back(std::llabs(int64_t(xd.tai_ns - xd.mono_ns) - real_minus_mono));
    if (rxsw != 0) xdp_to_rxsw.push_back(rxsw - int64_t(xd.tai_ns));
  }
  // tai - mono of the BPF stamps matches userspace REALTIME - MONOTONIC
  EXPECT_LT(Pct(tai_err, 0.99), 100'000.0) << "TAI-MONO of BPF stamps vs REALTIME-MONO";
  // RX: XDP <= RX_SOFTWARE <= tc ingress (1 us slack for the clock reads)
  ASSERT_FALSE(rxsw_to_ing.empty()) << "no RX software stamps";
  if (xdp2) {
    ASSERT_FALSE(xdp_to_rxsw.empty());
    EXPECT_GT(*std::min_element(xdp_to_rxsw.begin(), xdp_to_rxsw.end()), -1000);
  }
  EXPECT_GT(*std::min_element(rxsw_to_ing.begin(), rxsw_to_ing.end()), -1000);
  EXPECT_EQ(ingress_tstamp_equals_rxsw, ingress_tstamp_set)
      << "tc ingress skb->tstamp is the RX_SOFTWARE stamp";
  EXPECT_GT(ingress_tstamp_set, n_probes / 2);

  const BpfTapCounters c1 = tap1.counters(), c2 = tap2.counters();
  std::printf("counters node1: seen %lu records %lu ringbuf_full %lu parse_short %lu\n",
              (unsigned long)c1.seen, (unsigned long)c1.records, (unsigned long)c1.ringbuf_full,
              (unsigned long)c1.parse_short);
  std::printf("counters node2: seen %lu records %lu ringbuf_full %lu parse_short %lu\n",
              (unsigned long)c2.seen, (unsigned long)c2.records, (unsigned long)c2.ringbuf_full,
              (unsigned long)c2.parse_short);
  for (const auto& c : {c1, c2}) {
    EXPECT_EQ(c.seen, c.records + c.ringbuf_full);
    EXPECT_EQ(c.ringbuf_full, 0u);
  }
  EXPECT_EQ(c1.records, static_cast<uint64_t>(2 * n_probes));
  EXPECT_EQ(c2.records, static_cast<uint64_t>(hooks2 * n_probes));
  EXPECT_EQ(c1.parse_short, static_cast<uint64_t>(2 * bad_to_port)) << "2 hooks per bad packet";
  EXPECT_EQ(c2.parse_short, static_cast<uint64_t>(hooks2 * bad_to_port));
  std::printf("%s XDP on the receiver: dev_xmit->peer RX_SOFTWARE %.0f / %.0f ns (p50 / p90)\n",
              xdp2 ? "with" : "without", Median(xmit_to_rxsw), Pct(xmit_to_rxsw, 0.9));
  std::printf("%s, %d probes, ns (p50 / p90): tc_egress->dev_xmit %.0f / %.0f, dev_xmit->xdp(peer) "
              "%.0f / %.0f, xdp->tc_ingress %.0f / %.0f\n",
              family == AF_INET ? "IPv4" : "IPv6", n_probes, Median(eg_to_xmit),
              Pct(eg_to_xmit, 0.9), Median(xmit_to_xdp), Pct(xmit_to_xdp, 0.9),
              Median(xdp_to_ing), Pct(xdp_to_ing, 0.9));
  std::printf("  dev_xmit->TX_SOFTWARE %.0f / %.0f (%zu tx stamps), xdp->RX_SOFTWARE %.0f / %.0f, "
              "RX_SOFTWARE->tc_ingress %.0f / %.0f, |tai-mono - (real-mono)| p50 %.0f\n",
              Median(xmit_to_txsw), Pct(xmit_to_txsw, 0.9), xmit_to_txsw.size(),
              Median(xdp_to_rxsw), Pct(xdp_to_rxsw, 0.9), Median(rxsw_to_ing),
              Pct(rxsw_to_ing, 0.9), Median(tai_err));
  std::printf("  tc ingress skb->tstamp set on %d probes, equal to RX_SOFTWARE on %d; run took %.1f ms\n",
              ingress_tstamp_set, ingress_tstamp_equals_rxsw, (mono1 - mono0) / 1e6);
  (void)mono_sent;
  // Cost per program run (kernel BPF run-time statistics, enabled by the test).
  for (auto* tap : {&tap1, &tap2}) {
    for (uint32_t id : tap->ProgramIds()) {
      const int fd = bpf_prog_get_fd_by_id(id);
      if (fd < 0) continue;
      bpf_prog_info info{};
      uint32_t len = sizeof(info);
      if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.run_cnt > 0) {
        std::printf("  node %d %-16s runs %6llu  avg %5.0f ns/run  (xlated %u B, jited %u B)\n",
                    tap == &tap1 ? 1 : 2, info.name, (unsigned long long)info.run_cnt,
                    double(info.run_time_ns) / double(info.run_cnt), info.xlated_prog_len,
                    info.jited_prog_len);
      }
      close(fd);
    }
  }
}

// XDP on a veth moves its receive path into NAPI (ptr_ring): measure what
// that costs against the plain backlog path, tc hooks only on the receiver.
TEST_F(BpfTapTest, ReceiverWithoutXdp) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  BpfTap tap1, tap2;
  ASSERT_NO_FATAL_FAILURE(OpenIn(1, &tap1, Options(1)));
  BpfTapOptions o2 = Options(2);
  o2.xdp_on_veth = false;
  ASSERT_NO_FATAL_FAILURE(OpenIn(2, &tap2, o2));
  EXPECT_FALSE(tap2.attachments()[0].xdp);
  EXPECT_NE(tap2.attachments()[0].note.find("no XDP on veth0 (veth)"), std::string::npos);
  const int fd1 = SocketIn(1, AF_INET, kPort);
  const int fd2 = SocketIn(2, AF_INET, kPort);
  ASSERT_GE(fd1, 0);
  ASSERT_GE(fd2, 0);
  RunProbeFlow(this, tap1, tap2, AF_INET, Addr(2), fd1, fd2, 300, /*xdp2=*/false);
  close(fd1);
  close(fd2);
}

TEST_F(BpfTapTest, Ipv6ProbesStampedToo) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct", {"--ipv6"}));
  for (int i = 1; i <= 2; ++i) {
    ASSERT_EQ(RunShell("ip -n " + Ns(i) + " addr add fd77::" + std::to_string(i) + "/64 dev " +
                       Ifname(i) + " nodad"),
              0);
  }
  // static neighbours, so that no probe waits for neighbour discovery
  for (int i = 1; i <= 2; ++i) {
    const int peer = 3 - i;
    ASSERT_EQ(RunShell("ip -n " + Ns(i) + " neigh replace fd77::" + std::to_string(peer) +
                       " lladdr " + testbed_["nodes"][peer - 1]["mac"].get<std::string>() +
                       " dev " + Ifname(i) + " nud permanent"),
              0);
  }
  BpfTap tap1, tap2;
  ASSERT_NO_FATAL_FAILURE(OpenIn(1, &tap1, Options(1)));
  ASSERT_NO_FATAL_FAILURE(OpenIn(2, &tap2, Options(2)));
  const int fd1 = SocketIn(1, AF_INET6, kPort);
  const int fd2 = SocketIn(2, AF_INET6, kPort);
  ASSERT_GE(fd1, 0);
  ASSERT_GE(fd2, 0);
  RunProbeFlow(this, tap1, tap2, AF_INET6, "fd77::2", fd1, fd2, 60);
  close(fd1);
  close(fd2);
}

// Our tc programs return TCX_NEXT / TC_ACT_UNSPEC (-1): a classic filter
// behind ours still runs. A foreign "drop everything" filter at a later
// priority must drop the probes after our egress hook has seen them.
TEST_F(BpfTapTest, OtherTcFiltersStillRunAfterOurs) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  const int ifidx = IfindexIn(1);
  for (const std::string mode : {"tcx", "classic"}) {
    SCOPED_TRACE(mode);
    BpfTap tap1;
    BpfTapOptions o = Options(1);
    o.tc_mode = mode;
    ASSERT_NO_FATAL_FAILURE(OpenIn(1, &tap1, o));
    ASSERT_EQ(tap1.attachments()[0].tc_mode, mode == "tcx" ? "tcx" : "tc");
    const int shot = LoadForeignTcProgram("foreign_shot", 2 /* TC_ACT_SHOT */);
    ASSERT_GE(shot, 0) << strerror(errno);
    bool attached = false;
    InNetns(Ns(1), [&] {
      bpf_tc_hook hook{};
      hook.sz = sizeof(hook);
      hook.ifindex = ifidx;
      hook.attach_point = BPF_TC_EGRESS;
      bpf_tc_hook_create(&hook);  // EEXIST when clsact is there
      bpf_tc_opts opts{};
      opts.sz = sizeof(opts);
      opts.prog_fd = shot;
      opts.handle = 0x77;
      opts.priority = 0xC1C2;  // after ours (0xC1C1) in classic mode
      attached = bpf_tc_attach(&hook, &opts) == 0;
    });
    ASSERT_TRUE(attached);
    const int fd1 = SocketIn(1, AF_INET, kPort);
    const int fd2 = SocketIn(2, AF_INET, kPort);
    for (int i = 0; i < 10; ++i) {
      auto p = MakeProbe(i);
      SendTo(fd1, Addr(2), kPort, p.data(), p.size());
    }
    size_t got = 0;
    ReceiveAll(fd2, 1, 300, &got);
    EXPECT_EQ(got, 0u) << "the foreign drop filter did not run after ours";
    int egress = 0, xmit = 0;
    for (const auto& r : Drain(tap1)) {
      egress += r.hook == CHRONOLINK_HOOK_TC_EGRESS;
      xmit += r.hook == CHRONOLINK_HOOK_DEV_XMIT;
    }
    EXPECT_EQ(egress, 10);
    EXPECT_EQ(xmit, 0) << "dropped packets never reach the driver";
    InNetns(Ns(1), [&] {
      bpf_tc_hook hook{};
      hook.sz = sizeof(hook);
      hook.ifindex = ifidx;
      hook.attach_point = BPF_TC_EGRESS;
      bpf_tc_opts opts{};
      opts.sz = sizeof(opts);
      opts.handle = 0x77;
      opts.priority = 0xC1C2;
      EXPECT_EQ(bpf_tc_detach(&hook, &opts), 0);
    });
    close(shot);
    close(fd1);
    close(fd2);
    tap1.Close();
    EXPECT_EQ(CountOurs(HooksIn(1)), 0) << DescribeHooks(HooksIn(1));
  }
}

// A SIGKILLed tap (tcx + XDP links, global tracepoint link) leaves nothing
// behind; reopening gives exactly one set; a live tap's links are never
// taken for stale ones.
TEST_F(BpfTapTest, KilledTapLeavesNothingAttached) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const BpfTapOptions o = Options(1);
  const std::string ns1 = Ns(1);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipefd[0]);
    std::string msg;
    BpfTap tap;
    std::string err;
    if (!EnterNetnsProcess(ns1)) {
      msg = "error setns";
    } else if (!tap.Open(o, &err)) {
      msg = "error " + err;
    } else {
      msg = "ok " + tap.attachments()[0].tc_mode;
      for (uint32_t id : tap.ProgramIds()) msg += " " + std::to_string(id);
    }
    msg += "\n";
    (void)!write(pipefd[1], msg.data(), msg.size());
    for (;;) pause();
  }
  close(pipefd[1]);
  const std::string line = ReadLine(pipefd[0], 10000);
  close(pipefd[0]);
  ASSERT_EQ(line.rfind("ok ", 0), 0u) << line;
  std::vector<uint32_t> ids;
  {
    std::istringstream ss(line.substr(3));
    std::string mode;
    ss >> mode;
    EXPECT_EQ(mode, "tcx");
    uint32_t id;
    while (ss >> id) ids.push_back(id);
  }
  EXPECT_EQ(ids.size(), 4u) << line;  // tc egress, tc ingress, xdp, dev_xmit
  const auto live = HooksIn(1);
  std::printf("child's hooks: %s\n", DescribeHooks(live).c_str());
  EXPECT_EQ(CountOurs(live, "tcx_ingress"), 1);
  EXPECT_EQ(CountOurs(live, "tcx_egress"), 1);
  EXPECT_EQ(CountOurs(live, "xdp_drv"), 1);

  // The live child's links are not stale: the cleanup must leave them.
  int removed = -1;
  std::string log;
  InNetns(Ns(1), [&] { removed = BpfTap::RemoveStaleHooks(IfindexIn(1), &log); });
  EXPECT_EQ(removed, 0) << log;
  EXPECT_EQ(CountOurs(HooksIn(1)), 3) << log;
  std::printf("RemoveStaleHooks next to a live tap: %d removed; log: %s\n", removed, log.c_str());

  const int64_t t_kill = Now(CLOCK_MONOTONIC);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // Links are released with the process's files; programs are freed after
  // an RCU grace period.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = CountOurs(HooksIn(1)) == 0 &&
           std::none_of(ids.begin(), ids.end(), [](uint32_t id) { return ProgExists(id); });
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "after SIGKILL: " << DescribeHooks(HooksIn(1));
  std::printf("after SIGKILL: hooks and programs gone within %.1f ms\n",
              (Now(CLOCK_MONOTONIC) - t_kill) / 1e6);

  BpfTap tap;
  ASSERT_NO_FATAL_FAILURE(OpenIn(1, &tap, o));
  EXPECT_EQ(tap.attachments()[0].note.find("stale"), std::string::npos)
      << "nothing stale expected: " << tap.attachments()[0].note;
  const auto again = HooksIn(1);
  EXPECT_EQ(CountOurs(again, "tcx_ingress"), 1) << DescribeHooks(again);
  EXPECT_EQ(CountOurs(again, "tcx_egress"), 1) << DescribeHooks(again);
  EXPECT_EQ(CountOurs(again, "xdp_drv"), 1) << DescribeHooks(again);
  EXPECT_EQ(CountOurs(again), 3) << DescribeHooks(again);
  tap.Close();
  EXPECT_EQ(CountOurs(HooksIn(1)), 0);
}

// Classic tc filters outlive their process: the next start removes ours,
// and only ours.
TEST_F(BpfTapTest, StaleClassicFiltersRemovedForeignOnesKept) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  BpfTapOptions o = Options(1);
  o.tc_mode = "classic";
  const std::string ns1 = Ns(1);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    BpfTap tap;
    std::string err;
    if (!EnterNetnsProcess(ns1) || !tap.Open(o, &err)) _exit(3);
    for (;;) pause();
  }
  // wait until the child's filters are there
  bool up = false;
  for (int i = 0; i < 500 && !up; ++i) {
    const auto hs = HooksIn(1);
    up = CountOurs(hs, "tc_ingress") == 1 && CountOurs(hs, "tc_egress") == 1 &&
         CountOurs(hs, "xdp_drv") == 1;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(up) << DescribeHooks(HooksIn(1));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto left = HooksIn(1);
  std::printf("after SIGKILL of a classic-mode tap: %s\n", DescribeHooks(left).c_str());
  EXPECT_EQ(CountOurs(left, "tc_ingress"), 1) << "classic filters survive their process";
  EXPECT_EQ(CountOurs(left, "tc_egress"), 1);
  EXPECT_EQ(CountOurs(left, "xdp_drv"), 0) << "the XDP link died with the process";

  // Foreign filters: a u32 filter added with the tc command, and somebody
  // else's BPF program at another priority.
  const int ifidx = IfindexIn(1);
  ASSERT_EQ(RunShell("tc -n " + Ns(1) + " filter add dev " + Ifname(1) +
                     " egress prio 7 protocol ip u32 match u32 0 0 classid 1:1"),
            0);
  const int foreign = LoadForeignTcProgram("foreign_pass", -1);
  ASSERT_GE(foreign, 0);
  InNetns(Ns(1), [&] {
    bpf_tc_hook hook{};
    hook.sz = sizeof(hook);
    hook.ifindex = ifidx;
    hook.attach_point = BPF_TC_INGRESS;
    bpf_tc_opts opts{};
    opts.sz = sizeof(opts);
    opts.prog_fd = foreign;
    opts.handle = 0xC1C1;
    opts.priority = 0xC1C2;
    ASSERT_EQ(bpf_tc_attach(&hook, &opts), 0);
  });

  int removed = -1;
  std::string log;
  InNetns(Ns(1), [&] { removed = BpfTap::RemoveStaleHooks(ifidx, &log); });
  std::printf("RemoveStaleHooks: %d; %s\n", removed, log.c_str());
  EXPECT_EQ(removed, 2) << log;
  EXPECT_EQ(CountOurs(HooksIn(1)), 0);
  int egress_filters = -1, ingress_filters = -1;
  InNetns(Ns(1), [&] {
    std::string err;
    egress_filters = CountTcFilters(ifidx, kClsactEgressParent, &err);
    ingress_filters = CountTcFilters(ifidx, kClsactIngressParent, &err);
  });
  EXPECT_GT(egress_filters, 0) << "the u32 filter must survive";
  EXPECT_GT(ingress_filters, 0) << "the foreign BPF filter must survive";

  // A foreign program at exactly our handle/priority is not ours either.
  InNetns(Ns(1), [&] {
    bpf_tc_hook hook{};
    hook.sz = sizeof(hook);
    hook.ifindex = ifidx;
    hook.attach_point = BPF_TC_EGRESS;
    bpf_tc_opts opts{};
    opts.sz = sizeof(opts);
    opts.prog_fd = foreign;
    opts.handle = 0xC1C1;
    opts.priority = 0xC1C1;
    ASSERT_EQ(bpf_tc_attach(&hook, &opts), 0);
    removed = BpfTap::RemoveStaleHooks(ifidx, &log);
  });
  EXPECT_EQ(removed, 0) << log;
  std::printf("foreign program at 0xC1C1: %s\n", log.c_str());
  const auto hs = HooksIn(1);
  bool foreign_kept = false;
  for (const auto& h : hs) foreign_kept |= (h.kind == "tc_egress" && h.prog_name == "foreign_pass");
  EXPECT_TRUE(foreign_kept) << DescribeHooks(hs);

  // And the tap still opens next to all of it (tcx), and closing it leaves
  // the foreign filters and the clsact qdisc alone.
  BpfTap tap;
  ASSERT_NO_FATAL_FAILURE(OpenIn(1, &tap, Options(1)));
  tap.Close();
  InNetns(Ns(1), [&] {
    std::string err;
    EXPECT_GT(CountTcFilters(ifidx, kClsactEgressParent, &err), 0);
    EXPECT_GT(CountTcFilters(ifidx, kClsactIngressParent, &err), 0);
  });
  close(foreign);
}

// Classic mode opened and closed in-process: Close removes the filters and
// the clsact qdisc it created (nothing else was there).
TEST_F(BpfTapTest, ClassicModeCloseCleansUp) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  BpfTapOptions o = Options(1);
  o.tc_mode = "classic";
  BpfTap tap;
  ASSERT_NO_FATAL_FAILURE(OpenIn(1, &tap, o));
  EXPECT_EQ(tap.attachments()[0].tc_mode, "tc");
  EXPECT_EQ(CountOurs(HooksIn(1), "tc_egress"), 1);
  const int fd1 = SocketIn(1, AF_INET, kPort);
  for (int i = 0; i < 5; ++i) {
    auto p = MakeProbe(i);
    SendTo(fd1, Addr(2), kPort, p.data(), p.size());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  int egress = 0;
  for (const auto& r : Drain(tap)) egress += r.hook == CHRONOLINK_HOOK_TC_EGRESS;
  EXPECT_EQ(egress, 5);
  tap.Close();  // on purpose from the host namespace: Close must not depend on it
  EXPECT_EQ(CountOurs(HooksIn(1)), 0);
  EXPECT_EQ(RunShell("tc -n " + Ns(1) + " qdisc show dev " + Ifname(1) +
                     " | grep -q clsact"),
            1)
      << "the clsact qdisc we created should be gone";
  close(fd1);
}

// The ring buffer never blocks the data path: when it is full, records are
// dropped and counted.
TEST_F(BpfTapTest, FullRingBufferIsCounted) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  BpfTap tap1;
  BpfTapOptions o = Options(1);
  o.attach_xdp = false;
  ASSERT_NO_FATAL_FAILURE(OpenIn(1, &tap1, o));
  const int fd1 = SocketIn(1, AF_INET, kPort);
  const int n = 8000;  // 16000 records of 112 bytes (with header) > 1 MiB
  for (int i = 0; i < n; ++i) {
    auto p = MakeProbe(i);
    while (!SendTo(fd1, Addr(2), kPort, p.data(), p.size()) && errno == ENOBUFS) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto recs = Drain(tap1);
  const BpfTapCounters c = tap1.counters();
  std::printf("ring full: seen %lu consumed %lu ringbuf_full %lu\n", (unsigned long)c.seen,
              (unsigned long)c.records, (unsigned long)c.ringbuf_full);
  EXPECT_GT(c.ringbuf_full, 0u);
  EXPECT_EQ(c.seen, c.records + c.ringbuf_full);
  EXPECT_EQ(c.records, recs.size());
  // after draining, there is room again
  auto p = MakeProbe(999'999);
  SendTo(fd1, Addr(2), kPort, p.data(), p.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(Drain(tap1).size(), 2u);
  close(fd1);
}

// veth offers no RX hardware stamps; forcing the device-bound program
// exercises that path anyway (kfunc answers 0 with a zero stamp).
TEST_F(BpfTapTest, DeviceBoundXdpOnVeth) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  BpfTap tap2;
  BpfTapOptions o = Options(2);
  o.force_device_bound_xdp = true;
  ASSERT_NO_FATAL_FAILURE(OpenIn(2, &tap2, o));
  const auto& a = tap2.attachments()[0];
  EXPECT_TRUE(a.xdp);
  EXPECT_FALSE(a.xdp_hw_rx_timestamp) << "veth has no RX hardware stamps";
  const bool dev_bound = a.note.find("device-bound XDP forced") != std::string::npos;
  EXPECT_TRUE(dev_bound) << a.note;
  const int fd1 = SocketIn(1, AF_INET, kPort);
  for (int i = 0; i < 10; ++i) {
    auto p = MakeProbe(i);
    SendTo(fd1, Addr(2), kPort, p.data(), p.size());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  int xdp = 0;
  for (const auto& r : Drain(tap2)) {
    if (r.hook != CHRONOLINK_HOOK_XDP) continue;
    ++xdp;
    EXPECT_EQ(r.hw_rx_ns, 0u);
  }
  EXPECT_EQ(xdp, 10);
  const auto ids = tap2.ProgramIds();
  EXPECT_EQ(ids.size(), 5u) << "main object (xdp_hw not loaded there) + device-bound object";
  close(fd1);
}

// After attaching, the agent drops every capability and keeps working:
// the ring buffer is mapped, counters are map lookups on held fds.
TEST_F(BpfTapTest, KeepsWorkingAfterDroppingCapabilities) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const BpfTapOptions o = Options(1);
  const std::string ns1 = Ns(1), dst = Addr(2);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipefd[0]);
    std::string msg;
    BpfTap tap;
    std::string err;
    const Capabilities before = CurrentCapabilities();
    if (!EnterNetnsProcess(ns1) || !tap.Open(o, &err)) {
      msg = "error open " + err;
    } else {
      const int fd = UdpSocket(AF_INET, kPort);
      if (!DropAllCapabilities(&err)) {
        msg = "error drop " + err;
      } else {
        const Capabilities after = CurrentCapabilities();
        for (int i = 0; i < 20; ++i) {
          auto p = MakeProbe(i);
          SendTo(fd, dst, kPort, p.data(), p.size());
        }
        usleep(20000);
        int n = tap.Consume([](const chronolink_tap_record&) {});
        const BpfTapCounters c = tap.counters();
        std::string err2;
        const bool regain = DropAllCapabilities(&err2);  // harmless second time
        msg = "ok before=" + DescribeCapabilities(before) + " after=" +
              DescribeCapabilities(after) + " records=" + std::to_string(n) +
              " seen=" + std::to_string(c.seen) + " second_drop=" + std::to_string(regain);
        tap.Close();  // tcx/XDP/tracepoint links: closing fds needs no privilege
      }
    }
    msg += "\n";
    (void)!write(pipefd[1], msg.data(), msg.size());
    _exit(0);
  }
  close(pipefd[1]);
  const std::string line = ReadLine(pipefd[0], 10000);
  close(pipefd[0]);
  waitpid(child, nullptr, 0);
  std::printf("child: %s\n", line.c_str());
  ASSERT_EQ(line.rfind("ok ", 0), 0u) << line;
  EXPECT_NE(line.find("before=bpf,net_admin,perfmon,sys_admin"), std::string::npos) << line;
  EXPECT_NE(line.find("after=none"), std::string::npos) << line;
  EXPECT_NE(line.find("records=40"), std::string::npos) << line;
  EXPECT_NE(line.find("seen=40"), std::string::npos) << line;
  EXPECT_EQ(CountOurs(HooksIn(1)), 0);
}

// Without capabilities Open() fails with the reason, and attaches nothing.
TEST_F(BpfTapTest, WithoutCapabilitiesOpenSaysWhy) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const BpfTapOptions o = Options(1);
  const std::string ns1 = Ns(1);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipefd[0]);
    std::string msg, err;
    BpfTap tap;
    if (!EnterNetnsProcess(ns1) || !DropAllCapabilities(&err)) {
      msg = "setup failed " + err;
    } else if (tap.Open(o, &err)) {
      msg = "opened without capabilities?!";
    } else {
      msg = "refused: " + err;
    }
    msg += "\n";
    (void)!write(pipefd[1], msg.data(), msg.size());
    _exit(0);
  }
  close(pipefd[1]);
  const std::string line = ReadLine(pipefd[0], 10000);
  close(pipefd[0]);
  waitpid(child, nullptr, 0);
  std::printf("unprivileged Open: %s\n", line.c_str());
  EXPECT_EQ(line.rfind("refused: ", 0), 0u) << line;
  EXPECT_NE(line.find("CAP_BPF"), std::string::npos) << line;
  EXPECT_EQ(CountOurs(HooksIn(1)), 0);
}

TEST_F(BpfTapTest, InterfacesTowardsPeers) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  std::vector<std::string> devs;
  std::string err;
  InNetns(Ns(1), [&] {
    devs = InterfacesTowards({Addr(2), "127.0.0.1", Addr(1), Addr(2)}, &err);
  });
  EXPECT_EQ(devs, (std::vector<std::string>{Ifname(1), "lo"})) << err;
  EXPECT_TRUE(err.empty()) << err;
  InNetns(Ns(1), [&] { devs = InterfacesTowards({"192.0.2.1", "not-an-address"}, &err); });
  EXPECT_TRUE(devs.empty());
  EXPECT_NE(err.find("no route to 192.0.2.1"), std::string::npos) << err;
  EXPECT_NE(err.find("not a numeric"), std::string::npos) << err;
}

// Peers on the same node go through lo: all four hooks work there too
// (XDP in generic mode, lo has no native XDP).
TEST_F(BpfTapTest, LoopbackDevice) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  BpfTap tap;
  BpfTapOptions o = Options(1);
  o.interfaces = {"lo"};
  ASSERT_NO_FATAL_FAILURE(OpenIn(1, &tap, o));
  const auto& a = tap.attachments()[0];
  EXPECT_TRUE(a.tc_egress && a.tc_ingress && a.xdp) << a.note;
  const int tx = SocketIn(1, AF_INET, kPort);
  const int rx = SocketIn(1, AF_INET, kPort + 2);
  for (int i = 0; i < 10; ++i) {
    auto p = MakeProbe(i);
    ASSERT_TRUE(SendTo(tx, "127.0.0.1", kPort + 2, p.data(), p.size()));
  }
  size_t got = 0;
  ReceiveAll(rx, 10, 1000, &got);
  EXPECT_EQ(got, 10u);
  std::map<uint32_t, int> per_hook;
  for (const auto& r : Drain(tap)) ++per_hook[r.hook];
  EXPECT_EQ(per_hook[CHRONOLINK_HOOK_TC_EGRESS], 10);
  EXPECT_EQ(per_hook[CHRONOLINK_HOOK_DEV_XMIT], 10);
  EXPECT_EQ(per_hook[CHRONOLINK_HOOK_XDP], 10);
  EXPECT_EQ(per_hook[CHRONOLINK_HOOK_TC_INGRESS], 10);
  std::vector<BpfHookInfo> hs;
  InNetns(Ns(1), [&] {
    std::string err;
    hs = BpfTap::ListHooks(static_cast<int>(if_nametoindex("lo")), &err);
  });
  std::printf("lo hooks: %s\n", DescribeHooks(hs).c_str());
  EXPECT_EQ(CountOurs(hs, "xdp_skb"), 1) << "generic XDP on lo";
  close(tx);
  close(rx);
}

TEST_F(BpfTapTest, MissingInterfaceIsAClearError) {
  if (!RequirePrivileges()) return;
  ASSERT_NO_FATAL_FAILURE(Up(2, "direct"));
  BpfTap tap;
  BpfTapOptions o = Options(1);
  o.interfaces = {"nosuchdev0"};
  std::string err;
  bool ok = true;
  InNetns(Ns(1), [&] { ok = tap.Open(o, &err); });
  EXPECT_FALSE(ok);
  EXPECT_NE(err.find("no network device 'nosuchdev0'"), std::string::npos) << err;
  EXPECT_FALSE(tap.is_open());
}

}  // namespace
}  // namespace chronolink::testing

#else  // !CHRONOLINK_HAVE_BPF

TEST(BpfTapTest, BuiltWithoutTheTap) {
  // CI must build and test the tap; elsewhere a build without it is allowed.
  ::chronolink::testing::SkipOrFailOutsideCi(
      "chronolink was built without the eBPF tap (CHRONOLINK_WITH_BPF=OFF)");
}

#endif
