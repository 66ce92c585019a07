#include "bench/coordination/simulated_agents.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "agent/config/agent_config.h"
#include "agent/coord/etcd/etcd_client.h"
#include "agent/coord/etcd/etcd_coordinator.h"
#include "clock/clock_reader.h"

namespace chronolink::bench {

namespace {

// A thread serves its nodes as one event loop: the nodes whose sockets are
// ready at once (a handshake answered within a turn, as an agent's own
// thread would), and each pass the nodes whose timers or window closes are
// due. At 10 000 nodes, serving every node every pass was most of the
// simulated nodes' CPU.
constexpr auto kPass = std::chrono::milliseconds(10);  // a thread's pass over its due nodes
// Reads of the leader's registration in flight at once: agents read all at
// once; this process has two cores.
constexpr int kLeaderReaders = 8;
constexpr int kMaxReady = 256;

}  // namespace

std::string AddressOf(uint32_t id) {
  return "127." + std::to_string(10 + id / 62500) + "." + std::to_string((id / 250) % 250 + 1) + "." +
         std::to_string(id % 250 + 1);
}

Member SimulatedMember(uint32_t id) { return Member{id, AddressOf(id), kSimulatedProbePort}; }

namespace {

EtcdClientOptions ClientOptions(const std::string& url) {
  EtcdClientOptions o;
  o.endpoints = {url};
  o.connect_timeout_ms = 2000;
  o.request_timeout_ms = 5000;
  return o;
}

}  // namespace

double DefaultFitSpanMaxS() { return static_cast<double>(AgentConfig{}.estimation.FitSpan()) / 1e9; }

void SetBenchDefaults(SimulatedAgentsOptions* options) {
  options->cluster_id = kBenchClusterId;
  options->etcd_prefix = kBenchEtcdPrefix;
  const AgentConfig defaults;
  options->retention_ns = defaults.cluster_settings.retention_ns;
  options->resend_ns = TakeoverResendNs(defaults);
}

struct SimulatedAgents::Node {
  uint32_t id = 0;
  std::unique_ptr<SecureChannelHub> hub;
  std::unique_ptr<LeaderExchange> exchange;
  int64_t lease = 0;
  int64_t next_keepalive_ns = 0;  // CLOCK_MONOTONIC
  int64_t next_window = 0;        // index of the next window to close, on the node's clock
  uint64_t version = 0;
  std::optional<LeaderClaim> followed;
  int64_t due_ns = 0;  // CLOCK_MONOTONIC: when it must be served, I/O apart
  // Read by Totals from other threads.
  std::atomic<uint64_t> bytes_sent{0}, bytes_received{0};
  std::atomic<bool> up{false};
  std::atomic<uint32_t> holding_from{0};
  uint64_t peers_version = 0;
  std::atomic<uint32_t> peers_from{0};  // the leader of the peer list held; 0: none
  std::atomic<bool> peers_right{false};
  std::atomic<bool> peers_held{false};  // from the leader it follows, over a link that is up
  std::atomic<int64_t> leader_read_term{0};  // the term whose leader's registration it has read
};

int64_t SimulatedAgents::KeepalivePeriodNs() const { return options_.member_lease_ttl_s * 1'000'000'000 / 2; }

SimulatedAgents::SimulatedAgents(SimulatedAgentsOptions options)
    : options_(std::move(options)), codec_(options_.key, options_.etcd_prefix, 0) {}

SimulatedAgents::~SimulatedAgents() { Stop(); }

bool SimulatedAgents::Start(std::string* error) {
  ChannelOptions channel;
  for (uint32_t id : options_.ids) {
    auto n = std::make_unique<Node>();
    n->id = id;
    n->exchange = std::make_unique<LeaderExchange>(id, options_.retention_ns, "simulated node", options_.resend_ns);
    channel.source_address = AddressOf(id);
    LeaderExchange* exchange = n->exchange.get();
    n->hub = std::make_unique<SecureChannelHub>(
        ChannelIdentity{options_.cluster_id, id, options_.key}, channel,
        [exchange](uint32_t peer, uint16_t type, std::string_view payload) { exchange->OnMessage(peer, type, payload); });
    nodes_.push_back(std::move(n));
  }
  // Registration, paced as a rolling start would come: each thread its share.
  std::atomic<bool> failed{false};
  std::string first_error;
  std::mutex error_mutex;
  std::vector<std::thread> registering;
  const int threads = std::max(1, options_.threads);
  for (int t = 0; t < threads; ++t) {
    registering.emplace_back([&, t] {
      EtcdClient etcd(ClientOptions(options_.etcd_url));
      const auto start = std::chrono::steady_clock::now();
      int done = 0;
      for (size_t i = static_cast<size_t>(t); i < nodes_.size() && !failed; i += threads) {
        Node& n = *nodes_[i];
        EtcdValueCodec writer(options_.key, options_.etcd_prefix, n.id);
        std::string why;
        const Member self = SimulatedMember(n.id);
        const bool ok = etcd.GrantLease(options_.member_lease_ttl_s, &n.lease, &why) &&
                        etcd.Put(writer.MemberKey(n.id), writer.SealMember(self, n.lease, ReadClockNs(CLOCK_REALTIME)),
                                 n.lease, &why);
        if (!ok) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!failed.exchange(true)) first_error = "registering node " + std::to_string(n.id) + ": " + why;
          return;
        }
        // Keepalives every half TTL as the agent sends them, spread evenly
        // over that period as agents that started at different times send
        // them: a short run sees the steady rate.
        n.next_keepalive_ns = ReadClockNs(CLOCK_MONOTONIC) +
                              KeepalivePeriodNs() * static_cast<int64_t>(i) / static_cast<int64_t>(nodes_.size());
        ++done;
        const auto due = start + std::chrono::microseconds(1'000'000LL * done * threads /
                                                            std::max(1, options_.registrations_per_second));
        std::this_thread::sleep_until(due);
      }
    });
  }
  for (std::thread& t : registering) t.join();
  if (failed) {
    *error = first_error;
    return false;
  }
  if (!ReadLeader(error)) return false;
  EtcdWatcher::Options o;
  o.client = ClientOptions(options_.etcd_url);
  o.key = codec_.LeaderKey();
  leader_watch_ = std::make_unique<EtcdWatcher>(
      o, [this](const std::vector<EtcdEvent>& events, int64_t) { OnLeaderEvents(events); },
      [this](int64_t) {
        std::string why;
        if (!ReadLeader(&why)) spdlog::warn("simulated nodes: reading the leader: {}", why);
      });
  leader_watch_->Start();
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t] { Run(static_cast<size_t>(t)); });
  threads_.emplace_back([this] { KeepLeasesAlive(); });
  threads_.emplace_back([this] { ReadLeaderRegistrations(); });
  return true;
}

void SimulatedAgents::ReadLeaderRegistrations() {
  int64_t term_read = 0;
  while (!stopping_) {
    const std::optional<LeaderClaim> claim = leader();
    if (!claim || claim->term == term_read) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    std::atomic<size_t> next{0};
    std::atomic<bool> all_read{true};
    std::vector<std::thread> readers;
    for (int r = 0; r < kLeaderReaders; ++r) {
      readers.emplace_back([&] {
        EtcdClient etcd(ClientOptions(options_.etcd_url));
        for (size_t i = next++; i < nodes_.size() && !stopping_; i = next++) {
          if (nodes_[i]->leader_read_term == claim->term) continue;  // read on an earlier pass
          std::optional<EtcdKeyValue> kv;
          std::string why;
          Member m;
          if (etcd.Get(codec_.MemberKey(claim->id), &kv, &why) && kv && !codec_.OpenMember(*kv, claim->id, &m)) {
            nodes_[i]->leader_read_term = claim->term;
          } else {
            all_read = false;
            spdlog::warn("simulated node {}: reading the leader's registration: {}", nodes_[i]->id,
                         why.empty() ? "absent or refused" : why);
          }
        }
      });
    }
    for (std::thread& t : readers) t.join();
    if (all_read) {
      term_read = claim->term;
    } else {
      // Those that failed, again, at the agent's pace.
      std::this_thread::sleep_for(std::chrono::nanoseconds(kLeaderMemberRetryNs));
    }
  }
}

void SimulatedAgents::Stop() {
  stopping_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  if (leader_watch_) leader_watch_->Stop();
  leader_watch_.reset();
}

bool SimulatedAgents::ReadLeader(std::string* error) {
  EtcdClient etcd(ClientOptions(options_.etcd_url));
  std::optional<EtcdKeyValue> kv;
  if (!etcd.Get(codec_.LeaderKey(), &kv, error)) return false;
  LeaderClaim claim;
  std::lock_guard<std::mutex> lock(mutex_);
  if (kv && !codec_.OpenLeader(*kv, &claim)) {
    leader_ = claim;
  } else {
    leader_.reset();
  }
  return true;
}

void SimulatedAgents::OnLeaderEvents(const std::vector<EtcdEvent>& events) {
  for (const EtcdEvent& e : events) {
    LeaderClaim claim;
    const bool put = e.type == EtcdEvent::Type::kPut && !codec_.OpenLeader(e.kv, &claim);
    std::lock_guard<std::mutex> lock(mutex_);
    if (put) {
      leader_ = claim;
    } else {
      leader_.reset();
    }
  }
}

std::optional<LeaderClaim> SimulatedAgents::leader() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return leader_;
}

void SimulatedAgents::Run(size_t thread_index) {
  const size_t threads = static_cast<size_t>(std::max(1, options_.threads));
  const int64_t window = options_.window_ns;
  const int ready_set = ::epoll_create1(EPOLL_CLOEXEC);
  if (ready_set < 0) spdlog::warn("simulated nodes: epoll_create1 failed; nodes are served each pass only");
  std::vector<Node*> mine;
  for (size_t i = thread_index; i < nodes_.size(); i += threads) {
    Node& n = *nodes_[i];
    const int64_t own_now = ReadClockNs(CLOCK_REALTIME) + options_.summaries->OffsetOf(n.id);
    n.next_window = own_now / window;  // the window now open: the first to close
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &n;
    if (ready_set >= 0 && n.hub->ready_fd() >= 0) ::epoll_ctl(ready_set, EPOLL_CTL_ADD, n.hub->ready_fd(), &ev);
    mine.push_back(&n);
  }
  std::vector<std::pair<int64_t, int64_t>> delivered;  // (T, when)
  auto serve = [&](Node& n, const std::optional<LeaderClaim>& leader) {
    const int64_t now_mono = ReadClockNs(CLOCK_MONOTONIC), now_real = ReadClockNs(CLOCK_REALTIME);
    Step(n, leader, now_mono, now_real);
    n.due_ns = DueNs(n, now_mono, now_real);
    // Waiting for its read of the leader's registration: look again soon.
    if (leader && n.followed != leader) n.due_ns = std::min<int64_t>(n.due_ns, now_mono + 10'000'000);
    if (n.exchange->LatestVersion() == n.version) return;
    uint64_t version = 0;
    const std::optional<OffsetsSnapshot> latest = n.exchange->Latest(&version);
    if (latest && version != n.version) {
      n.version = version;
      n.holding_from = latest->leader;
      delivered.emplace_back(latest->reference_instant_ns, ReadClockNs(CLOCK_MONOTONIC));
    }
  };
  epoll_event ready[kMaxReady];
  std::optional<LeaderClaim> served_leader;
  bool first = true;
  auto next_pass = std::chrono::steady_clock::now();
  while (!stopping_) {
    const std::optional<LeaderClaim> leader = this->leader();
    // A pass serves the nodes that are due (a timer, a window to close);
    // all of them when the leader changed, as every agent follows it at once.
    if (std::chrono::steady_clock::now() >= next_pass) {
      const bool all = first || leader != served_leader;
      first = false;
      served_leader = leader;
      const auto pass_start = std::chrono::steady_clock::now();
      const int64_t now = ReadClockNs(CLOCK_MONOTONIC);
      for (Node* n : mine) {
        if (stopping_) break;
        if (all || n->due_ns <= now) serve(*n, leader);
      }
      const int64_t pass_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - pass_start).count();
      if (pass_ns > pass_ns_max_) pass_ns_max_ = pass_ns;
      next_pass = pass_start + kPass;
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_pass - std::chrono::steady_clock::now());
    const int timeout = static_cast<int>(std::clamp<int64_t>(wait.count(), 0, 10));  // 10: a new leader is seen soon
    if (ready_set < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout));
    } else {
      const int count = ::epoll_wait(ready_set, ready, kMaxReady, timeout);
      for (int i = 0; i < count && !stopping_; ++i) serve(*static_cast<Node*>(ready[i].data.ptr), leader);
    }
    if (!delivered.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [t, when] : delivered) deliveries_[t].push_back(when);
      delivered.clear();
    }
  }
  if (ready_set >= 0) ::close(ready_set);
}

// When a node next needs serving without I/O: its hub's next timer, or its
// next window's close on its own clock, whichever comes first (CLOCK_MONOTONIC).
int64_t SimulatedAgents::DueNs(const Node& n, int64_t now_mono, int64_t now_real) const {
  const int64_t own_now = now_real + options_.summaries->OffsetOf(n.id);
  const int64_t close = (n.next_window + 1) * options_.window_ns + options_.record_lag_ns + options_.window_grace_ns;
  int64_t due = now_mono + std::max<int64_t>(0, close - own_now);
  const int64_t timer_ms = n.hub->NextTimerMs();
  if (timer_ms != std::numeric_limits<int64_t>::max()) {
    // The hub's steady clock is CLOCK_MONOTONIC, in ms.
    due = std::min(due, timer_ms * 1'000'000);
  }
  return due;
}

void SimulatedAgents::KeepLeasesAlive() {
  // Each agent's etcd loop keeps its own lease; one thread does it for all
  // here, so that a slow answer holds up no node's channel.
  EtcdClient etcd(ClientOptions(options_.etcd_url));
  while (!stopping_) {
    const int64_t now = ReadClockNs(CLOCK_MONOTONIC);
    for (const auto& node : nodes_) {
      Node& n = *node;
      if (stopping_ || now < n.next_keepalive_ns) continue;
      int64_t remaining = 0;
      std::string why;
      if (!etcd.KeepAliveOnce(n.lease, &remaining, &why) || remaining <= 0) {
        spdlog::warn("simulated node {}: keeping its lease alive: {}", n.id, why.empty() ? "expired" : why);
      }
      n.next_keepalive_ns = now + KeepalivePeriodNs();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void SimulatedAgents::Step(Node& n, const std::optional<LeaderClaim>& named, int64_t now_mono, int64_t now_real) {
  // As the agent: a leader is followed once its registration is read.
  const std::optional<LeaderClaim> leader =
      named && n.leader_read_term == named->term ? named : std::optional<LeaderClaim>();
  if (leader != n.followed) {
    // As FollowLeader does: the new leader is dialled at its address and
    // coordination port; the exchange resends everything to it.
    if (n.followed && (!leader || leader->id != n.followed->id)) n.hub->Disconnect(n.followed->id);
    const auto port = leader ? options_.leader_ports.find(leader->id) : options_.leader_ports.end();
    if (port != options_.leader_ports.end()) {
      n.exchange->SetLeader(leader->id, leader->term);
      n.hub->Connect(leader->id, "127.0.0.1", port->second);
    } else {
      n.exchange->SetLeader(std::nullopt, 0);
    }
    n.followed = leader;
  }
  const int64_t own_now = now_real + options_.summaries->OffsetOf(n.id);
  while (own_now >= (n.next_window + 1) * options_.window_ns + options_.record_lag_ns + options_.window_grace_ns) {
    n.exchange->PublishWindows(options_.summaries->Window(n.id, n.next_window, options_.window_ns));
    ++n.next_window;
  }
  n.hub->Poll(0);
  n.exchange->Flush(*n.hub, now_mono);
  if (n.hub->QueuedBytes() > 0) n.hub->Poll(0);  // what Flush queued leaves now, not a pass later
  const ChannelStats& s = n.hub->stats();
  n.bytes_sent = s.bytes_sent;
  n.bytes_received = s.bytes_received;
  n.up = n.followed && n.hub->IsUp(n.followed->id);
  uint64_t peers_version = 0;
  const std::optional<PeerList> peers = n.exchange->Peers(&peers_version);
  if (peers_version != n.peers_version) {
    n.peers_version = peers_version;
    const std::vector<uint32_t>& want = options_.summaries->PeersOf(n.id);
    n.peers_right = peers && std::equal(peers->peers.begin(), peers->peers.end(), want.begin(), want.end(),
                                        [](const Member& m, uint32_t id) { return m.id == id; });
    n.peers_from = peers ? peers->leader : 0;
  }
  n.peers_held = n.up && n.peers_from == n.followed->id;
}

SimulatedAgentsTotals SimulatedAgents::Totals() const {
  SimulatedAgentsTotals t;
  for (const auto& n : nodes_) {
    t.bytes_sent += n->bytes_sent;
    t.bytes_received += n->bytes_received;
    t.links_up += n->up ? 1 : 0;
    t.peers_held += n->peers_held ? 1 : 0;
    t.peers_wrong += n->peers_from != 0 && !n->peers_right ? 1 : 0;
    CoordinatorStatus status;  // the exchange is thread-safe; the hub is not
    n->exchange->FillStatus(&status);
    t.windows_pending += status.windows_pending;
  }
  t.pass_ms_max = static_cast<double>(pass_ns_max_) / 1e6;
  return t;
}

std::map<int64_t, std::vector<int64_t>> SimulatedAgents::TakeDeliveries() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<int64_t, std::vector<int64_t>> out;
  out.swap(deliveries_);
  return out;
}

std::map<uint32_t, size_t> SimulatedAgents::HoldingCounts() const {
  std::map<uint32_t, size_t> counts;
  for (const auto& n : nodes_) {
    const uint32_t from = n->holding_from;  // 0: none yet (node ids of leaders start at 1)
    if (from != 0) ++counts[from];
  }
  return counts;
}

}  // namespace chronolink::bench
