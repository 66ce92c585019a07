// The cluster test bed (tests/integration/): up to six agents in network
// namespaces behind a router, each with its own injected clock (offsets
// over ±50 ms, drifts over ±100 ppm, test-only virtual clocks), coordinated
// through the static backend or a real etcd-server in the router's
// namespace; and the checks against the exact truth those clocks give:
// offsets.jsonl instants, clock pages, metrics. Used by cluster_test.cc and
// etcd_attack_test.cc.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "agent/coord/etcd/etcd_client.h"
#include "clock/virtual_clock.h"
#include "include/chronolink/clock_mapping_page.h"
#include "tests/integration/testbed_fixture.h"
#include "tests/support/etcd_server.h"
#include "tests/support/require_etcd.h"
#include <charconv>
#include <optional>

namespace chronolink::testing {

inline constexpr int kMaxNodes = 6;
inline constexpr int64_t kSecond = 1'000'000'000;
inline constexpr int64_t kWindow = 2 * kSecond;
inline constexpr double kBoundNs = 5000;  // the 5 us
// A clock page extrapolates the latest solution with its drift, a window or
// two ahead: it is held to the same fixed bound against the truth (about
// 0.4 us seen on a loaded 2-core machine), never widened by its claims.
inline constexpr double kPageBoundNs = kBoundNs;
inline constexpr int64_t kOffsetsNs[kMaxNodes] = {-50'000'000, -23'000'000, 4'000'000, 11'500'000, 37'000'000, 50'000'000};
inline constexpr double kDriftsPpm[kMaxNodes] = {80, -100, 25, 100, -45, -70};


// One (instant, node) of an offsets.jsonl; a recomputed line replaces the
// earlier one of the same instant.
struct Solved {
  bool reachable = false;
  double offset_ns = 0;
  uint32_t leader = 0;
  bool recomputed = false;
};
using SolvedByInstant = std::map<int64_t, std::map<uint32_t, Solved>>;

class ClusterFixture : public TestbedFixture {
 protected:
  // `nodes` agents (at most kMaxNodes), node i with the i-th injected clock.
  void SetUpCluster(int nodes = kMaxNodes) {
    ASSERT_LE(nodes, kMaxNodes);
    nodes_ = nodes;
    ASSERT_NO_FATAL_FAILURE(Up(nodes_, "routed"));
    WriteClusterFiles();
    t0_ = RealtimeNowNs();
    for (int i = 0; i < nodes_; ++i) clocks_.push_back(VirtualClockParams{kOffsetsNs[i], kDriftsPpm[i], t0_});
  }

  // Cheap probing (10 ms) so that six agents fit on a loaded 2-core machine.
  // Spans of at most 4 s: these runs are about what the cluster does with
  // its windows, most last under the 32 s an edge takes to choose a longer
  // span (docs/estimator.md §10), and the longest span is what delays every
  // window's record (5 s at the default 12 s, 1 s at 4 s).
  pid_t Start(int node, double duration_s, std::vector<std::string> args) {
    args.insert(args.end(), {"--probe-interval-us", "10000", "--fit-span-max-s", "4", "--clock-page",
                             PagePath(node), "--log-level", "info"});
    AgentSpec spec{node, clocks_[node - 1], duration_s, args};
    spec.cluster_file = !addresses_from_etcd_;
    return StartAgent(spec);
  }
  void StartAll(double duration_s, const std::vector<std::string>& args) {
    for (int n = 1; n <= nodes_; ++n) pids_by_node_[n] = Start(n, duration_s, args);
  }
  std::string PagePath(int node) const { return (dir_ / ("clock-page-" + std::to_string(node))).string(); }
  std::string Logs() const {
    std::string all;
    for (int n = 1; n <= nodes_; ++n) all += "--- agent " + std::to_string(n) + "\n" + AgentLog(n);
    return all;
  }

  // Node `node`'s clock reading at real time t, and the reference's reading.
  int64_t NodeClockAt(int node, int64_t real_ns) const { return VirtualClock(clocks_[node - 1]).Apply(real_ns); }

  // The truth of node − reference when the reference reads T: a node id, or
  // 0 for the mean of `nodes`. The mean clock reads T when the anchor (any
  // node) reads T − D, D being mean − anchor: evaluated there, drifts of
  // 100 ppm over offsets of 50 ms cannot bend the truth (they would by 5 us).
  double TrueOffset(uint32_t node, uint32_t reference, int64_t t, const std::set<uint32_t>& nodes) const {
    if (reference != 0) return TrueRelativeOffset(clocks_[reference - 1], clocks_[node - 1], t).beta_ns;
    const uint32_t anchor = *nodes.begin();
    auto mean_minus_anchor = [&](int64_t x) {
      double sum = 0;
      for (uint32_t n : nodes) sum += TrueRelativeOffset(clocks_[anchor - 1], clocks_[n - 1], x).beta_ns;
      return sum / static_cast<double>(nodes.size());
    };
    int64_t x = t;
    for (int i = 0; i < 3; ++i) x = t - static_cast<int64_t>(std::llround(mean_minus_anchor(x)));
    return TrueRelativeOffset(clocks_[anchor - 1], clocks_[node - 1], x).beta_ns - mean_minus_anchor(x);
  }

  static SolvedByInstant ReadOffsets(const std::vector<std::filesystem::path>& files) {
    SolvedByInstant out;
    for (const auto& f : files) {
      for (const auto& r : ReadJsonl(f)) {
        EXPECT_EQ(r["schema"], "chronolink.offset.v1");
        Solved s;
        s.reachable = r["reachable"].get<bool>();
        if (s.reachable) s.offset_ns = r["offset_ns"].get<double>();
        s.leader = r.value("leader", 0u);
        s.recomputed = r.value("recomputed", false);
        out[r["t_ns"].get<int64_t>()][r["node"].get<uint32_t>()] = s;
      }
    }
    return out;
  }

  // No instant is missing between the old leader's first and the new
  // leader's last: the new leader solves back over the gap (docs/leader.md).
  static void ExpectNoInstantMissing(const SolvedByInstant& old_leader, const SolvedByInstant& new_leader) {
    SolvedByInstant all = old_leader;
    for (const auto& [t, nodes] : new_leader) all[t] = nodes;
    int64_t expected = all.begin()->first;
    for (const auto& [t, nodes] : all) {
      EXPECT_EQ(t, expected) << "instant missing after the old leader's last, " << old_leader.rbegin()->first;
      expected = t + kWindow;
    }
  }

  // Checks every instant in [from, to] (reference clock): the nodes in
  // `alive` reachable within the bound, those in `dead` present and
  // unreachable. Returns the instants checked.
  int CheckInstants(const SolvedByInstant& solved, uint32_t reference, int64_t from, int64_t to,
                    const std::set<uint32_t>& alive, const std::set<uint32_t>& dead, double* worst) {
    int checked = 0;
    for (const auto& [t, nodes] : solved) {
      if (t < from || t > to) continue;
      ++checked;
      for (uint32_t n : alive) {
        auto it = nodes.find(n);
        if (it == nodes.end() || !it->second.reachable) {
          ADD_FAILURE() << "node " << n << (it == nodes.end() ? " missing" : " unreachable") << " at t=" << t;
          continue;
        }
        const double err = it->second.offset_ns - TrueOffset(n, reference, t, alive);
        *worst = std::max(*worst, std::abs(err));
        EXPECT_LT(std::abs(err), kBoundNs) << "node " << n << " at t=" << t;
      }
      for (uint32_t n : dead) {
        auto it = nodes.find(n);
        if (it == nodes.end()) {
          ADD_FAILURE() << "dead node " << n << " missing (not reported) at t=" << t;
          continue;
        }
        EXPECT_FALSE(it->second.reachable) << "dead node " << n << " still reachable at t=" << t;
      }
    }
    return checked;
  }

  // One reading of `node`'s clock page, checked against the injected truth:
  // it converts the node's clock to the reference's within kPageBoundNs, a
  // fixed bound that what the page claims (its uncertainty) cannot widen.
  // Returns the page's reference instant (0 when unreadable).
  int64_t CheckClockPageOnce(int node, uint32_t reference, double* worst) {
    ClockMappingReader reader;
    EXPECT_TRUE(reader.Open(PagePath(node))) << PagePath(node);
    ClockMapping m;
    if (!reader.Read(&m)) {
      ADD_FAILURE() << "clock page of node " << node << " unreadable";
      return 0;
    }
    EXPECT_TRUE(m.valid) << "node " << node << " has no mapping";
    if (!m.valid) return 0;
    EXPECT_EQ(m.node_id, static_cast<uint32_t>(node));
    const int64_t real = RealtimeNowNs();
    const int64_t local = NodeClockAt(node, real);
    const int64_t cluster = NodeClockAt(static_cast<int>(reference), real);
    EXPECT_LT(local, m.valid_until_ns) << "clock page of node " << node << " is stale";
    const double err = static_cast<double>(m.ToCluster(local) - cluster);
    *worst = std::max(*worst, std::abs(err));
    EXPECT_LT(std::abs(err), kPageBoundNs) << "clock page of node " << node << " at local " << local
                                           << " (it claims +-" << m.UncertaintyAt(local) << " ns)";
    return m.local_ref_ns;
  }

  // Reads every node's clock page `readings` times, `spacing_s` apart
  // (while the agents run), so that the span covers more than two windows:
  // every reading within the fixed bound, and every page republished (its
  // reference instant moved) during the span, not one lucky instant.
  void CheckClockPages(const std::set<uint32_t>& nodes, uint32_t reference, int readings = 4,
                       double spacing_s = 1.5) {
    ASSERT_GT((readings - 1) * spacing_s * kSecond, 2.0 * kWindow) << "the span must cover two windows";
    std::map<uint32_t, std::set<int64_t>> ref_instants;
    double worst = 0;
    for (int i = 0; i < readings; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(spacing_s * 1000)));
      for (uint32_t n : nodes) ref_instants[n].insert(CheckClockPageOnce(static_cast<int>(n), reference, &worst));
    }
    for (uint32_t n : nodes) {
      ref_instants[n].erase(0);
      EXPECT_GE(ref_instants[n].size(), 2u) << "clock page of node " << n << " was not republished over "
                                            << (readings - 1) * spacing_s << " s";
    }
    std::printf("clock pages: %d readings of %zu nodes, worst |error| %.0f ns\n", readings, nodes.size(), worst);
  }

  // Runs fn on a thread inside the named network namespace (network
  // namespaces are per thread): how the test reaches what listens there.
  template <typename Fn>
  static void InNetns(const std::string& ns, Fn fn) {
    std::thread t([&] {
      const std::string path = "/var/run/netns/" + ns;
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      ASSERT_GE(fd, 0) << path;
      ASSERT_EQ(setns(fd, CLONE_NEWNET), 0) << std::strerror(errno);
      close(fd);
      fn();
    });
    t.join();
  }

  // GET /metrics of a node's agent (--metrics 127.0.0.1:9319 in its namespace).
  std::string ScrapeMetrics(int node) {
    std::string body;
    const std::string ns = testbed_["nodes"][node - 1]["netns"].get<std::string>();
    InNetns(ns, [&] {
      // A plain HTTP/1.0 GET: the answer ends when the server closes.
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      timeval tv{2, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(9319);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
        const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
          char buf[65536];
          ssize_t n;
          while ((n = read(fd, buf, sizeof(buf))) > 0) body.append(buf, static_cast<size_t>(n));
        }
      }
      close(fd);
    });
    return body;
  }

  std::set<uint32_t> AllNodes() const {
    std::set<uint32_t> s;
    for (int n = 1; n <= nodes_; ++n) s.insert(static_cast<uint32_t>(n));
    return s;
  }

  int nodes_ = kMaxNodes;
  // etcd tests: no cluster file, every address comes from etcd (and is
  // believed only once an authentic probe comes from it).
  bool addresses_from_etcd_ = false;
  int64_t t0_ = 0;
  std::vector<VirtualClockParams> clocks_;
  std::map<int, pid_t> pids_by_node_;
};


class EtcdClusterFixture : public ClusterFixture {
 protected:
  bool StartEtcd() {
    RequireEtcd();
    if (IsSkipped() || HasFatalFailure()) return false;
    addresses_from_etcd_ = true;
    EtcdServerOptions o;
    o.host = testbed_["router"]["interfaces"][0]["address"].get<std::string>();
    o.wrapper = {"ip", "netns", "exec", testbed_["router"]["netns"].get<std::string>()};
    o.netns = testbed_["router"]["netns"].get<std::string>();
    // Fixed ports: the fixture cannot probe for free ones in another namespace.
    o.client_port = 23790;
    o.peer_port = 23791;
    etcd_ = std::make_unique<EtcdServerProcess>(o);
    std::string error;
    if (!etcd_->Start(&error)) {
      ADD_FAILURE() << "etcd did not start: " << error;
      return false;
    }
    return true;
  }
  std::vector<std::string> EtcdArgs(const std::string& reference) const {
    return {"--coordination", "etcd", "--etcd-endpoints", etcd_->client_url(), "--etcd-prefix", "/test/",
            "--lease-ttl-s", "3", "--reference", reference};
  }
  // etcd listens inside the router's namespace: the test's own etcd
  // requests run on a thread that has entered it (network namespaces are
  // per thread).
  template <typename Fn>
  void InRouterNetns(Fn fn) {
    InNetns(testbed_["router"]["netns"].get<std::string>(), fn);
  }
  EtcdClientOptions ClientOptions() const {
    EtcdClientOptions o;
    o.endpoints = {etcd_->client_url()};
    return o;
  }
  std::optional<uint32_t> LeaderId() {
    std::optional<uint32_t> id;
    InRouterNetns([&] {
      EtcdClient c(ClientOptions());
      std::optional<EtcdKeyValue> kv;
      std::string error;
      if (!c.Get("/test/leader", &kv, &error) || !kv) return;
      // The value is sealed (docs/formats.md): the id is the body, after
      // the header line.
      const size_t newline = kv->value.find('\n');
      const std::string body = newline == std::string::npos ? kv->value : kv->value.substr(newline + 1);
      uint32_t parsed = 0;
      const auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), parsed);
      if (ec == std::errc() && ptr == body.data() + body.size()) id = parsed;
    });
    return id;
  }
  std::unique_ptr<EtcdServerProcess> etcd_;
};

inline void SleepS(double s) {
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(s * 1000)));
}

}  // namespace chronolink::testing
