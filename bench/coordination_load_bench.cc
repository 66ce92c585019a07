// Coordination at scale (issue 32, docs/PERFORMANCE.md §15): a real
// etcd-server, two real chronolink-agents that campaign for leader (the real
// leader code: ingest, solve, offsets.jsonl, publish), and N − 2 simulated
// nodes in this process that register, follow the leader and exchange
// summaries and solutions with it as agents do (bench/coordination/).
// Prints per window: etcd's writes/s, key count and database size; the
// leader's CPU, memory and channel bytes; bytes per simulated node; and how
// long each instant took from its windows' close to solved and to every
// node holding its row. Then kills the leader (SIGKILL) and prints how long
// until every node holds a solution from the new one.
//
//   build/bench/coordination_load_bench --nodes 1000 --windows 20 --out /tmp/coord-1000
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/cluster/probe_graph.h"
#include "bench/coordination/simulated_agent_processes.h"
#include "bench/coordination/simulated_agents.h"
#include "bench/coordination/window_summaries.h"
#include "clock/clock_reader.h"
#include "tests/support/etcd_server.h"
#include "trace/correct/offsets_file.h"
#include "trace/correct/timebase_file.h"

namespace chronolink::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kWindowNs = 2'000'000'000;
constexpr int64_t kGraceNs = 300'000'000;  // the agent's --window-grace-ms default

struct Options {
  int nodes = 100;
  int windows = 20;
  int kill_after_windows = -1;  // -1: at 60 % of the windows; 0: never
  int threads = 2;
  int registrations_per_second = 2000;
  std::string agent_bin = CHRONOLINK_AGENT_BIN;
  std::string out = "/tmp/chronolink-coordination-bench";
  std::string offsets_format = "auto";  // the real agents' --offsets-format
  int processes = 1;                     // the simulated nodes split over this many
  std::vector<std::string> agent_args;   // more for both real agents
  double fit_span_max_s = DefaultFitSpanMaxS();  // every node's longest fit span: the agents' and the simulated nodes'
  std::string self_bin;                  // this binary, to start the shares
};

uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A real agent, started as a DaemonSet would start it, minus the probing
// privileges it does not need here.
struct RealAgent {
  uint32_t id = 0;
  uint16_t port = 0, metrics_port = 0;
  fs::path dir;
  pid_t pid = -1;

  bool Start(const Options& o, const std::string& etcd_url, const fs::path& key_file) {
    std::vector<std::string> args = {o.agent_bin,
                                     "--node-id",
                                     std::to_string(id),
                                     "--coordination",
                                     "etcd",
                                     "--etcd-endpoints",
                                     etcd_url,
                                     "--etcd-prefix",
                                     kBenchEtcdPrefix,
                                     "--cluster-id",
                                     std::to_string(kBenchClusterId),
                                     "--listen",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(port),
                                     "--key-file",
                                     key_file.string(),
                                     "--output-dir",
                                     dir.string(),
                                     "--clock-page",
                                     "off",
                                     "--metrics",
                                     "127.0.0.1:" + std::to_string(metrics_port),
                                     "--log-level",
                                     "warn",
                                     "--offsets-format",
                                     o.offsets_format};
    args.push_back("--fit-span-max-s=" + std::to_string(o.fit_span_max_s));
    args.insert(args.end(), o.agent_args.begin(), o.agent_args.end());
    pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      // Beside its directory, which the agent creates and hands to the user
      // it drops to.
      const int log = ::open((dir.string() + ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(log, 1);
      ::dup2(log, 2);
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return true;
  }
  void Kill(int sig) {
    if (pid <= 0) return;
    ::kill(pid, sig);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  // The agent drops its privileges, which clears the parent-death signal:
  // a bench that gives up early must not leave it running.
  ~RealAgent() { Kill(SIGKILL); }
};

// /proc/<pid>: CPU seconds (user + system) and resident memory.
struct ProcessSample {
  double cpu_s = 0;
  int64_t rss_bytes = 0;
};
ProcessSample SampleProcess(pid_t pid) {
  ProcessSample s;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  std::vector<std::string> f;
  while (rest >> field) f.push_back(field);
  if (f.size() > 13) s.cpu_s = static_cast<double>(std::stoll(f[11]) + std::stoll(f[12])) / sysconf(_SC_CLK_TCK);
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_bytes = std::stoll(line.substr(6)) * 1024;
  }
  return s;
}

// The sum of a Prometheus family's samples whose labels contain `match`.
double MetricSum(const std::string& text, const std::string& family, const std::string& match = "") {
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind(family, 0) != 0) continue;
    const char next = line.size() > family.size() ? line[family.size()] : ' ';
    if (next != ' ' && next != '{') continue;
    if (!match.empty() && line.find(match) == std::string::npos) continue;
    try {
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    } catch (const std::exception&) {
    }
  }
  return sum;
}

std::string Scrape(const std::string& host, int port) {
  httplib::Client c(host, port);
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  const auto r = c.Get("/metrics");
  return r && r->status == 200 ? r->body : std::string();
}

// Tails the leaders' offsets.jsonl: when each instant T first appeared
// (CLOCK_MONOTONIC and REALTIME).
class SolvedInstants {
 public:
  // Polls the files every 5 ms on a thread of its own, so that the main
  // loop's scrapes do not delay when an instant is seen.
  explicit SolvedInstants(std::vector<fs::path> files) : files_(std::move(files)) {
    thread_ = std::thread([this] {
      while (!stop_) {
        Poll();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  ~SolvedInstants() {
    stop_ = true;
    thread_.join();
  }
  std::optional<std::pair<int64_t, int64_t>> When(int64_t t) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = seen_.find(t);
    if (it == seen_.end()) return std::nullopt;
    return it->second;
  }

 private:
  void Poll() {
    for (const fs::path& f : files_) {
      std::ifstream in(f);
      if (!in) continue;
      in.seekg(static_cast<std::streamoff>(offset_[f]));
      std::string line;
      while (std::getline(in, line)) {
        if (in.eof()) break;  // a line still being written
        offset_[f] += line.size() + 1;
        const size_t at = line.find("\"t_ns\":");
        if (at == std::string::npos) continue;
        const int64_t t = std::stoll(line.substr(at + 7));
        std::lock_guard<std::mutex> lock(mutex_);
        if (!seen_.count(t)) seen_[t] = {ReadClockNs(CLOCK_MONOTONIC), ReadClockNs(CLOCK_REALTIME)};
      }
    }
  }

  const std::vector<fs::path> files_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::map<fs::path, size_t> offset_;  // the thread's
  mutable std::mutex mutex_;
  std::map<int64_t, std::pair<int64_t, int64_t>> seen_;
};

// NaN for no values ("nan" printed, null in results.json): a run too short
// to measure something must not print 0 s, which reads as a target met.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// What offsets.jsonl costs to keep, from a leader's own file: bytes per
// node per instant as written and gzip -6 compressed (what a rotation
// stores), and per day of 2 s windows. The file is read back with the trace
// tools' reader, which counts its solutions whatever form holds them.
struct OffsetsStorage {
  int64_t instants = 0, lines = 0, solutions = 0, bytes = 0, gzip_bytes = 0;
  std::string error;  // the reader's, when it refused the file
  double BytesPerNodeInstant() const { return solutions > 0 ? static_cast<double>(bytes) / solutions : NAN; }
  double GzipPerNodeInstant() const { return solutions > 0 ? static_cast<double>(gzip_bytes) / solutions : NAN; }
};

OffsetsStorage MeasureOffsetsStorage(const fs::path& file) {
  OffsetsStorage m;
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty()) return m;
  trace::OffsetsReader reader;
  trace::OffsetsInput input;
  if (!reader.AddText(text, file.string(), &m.error) || !reader.Finish(&input, &m.error)) return m;
  std::set<int64_t> instants;
  for (const trace::OffsetRecord& r : input.records) instants.insert(r.t_ns);
  m.instants = static_cast<int64_t>(instants.size());
  m.lines = static_cast<int64_t>(input.lines_read);
  m.solutions = static_cast<int64_t>(input.solutions_read);
  m.bytes = static_cast<int64_t>(text.size());
  // gzip -6 is deflate at level 6 in a gzip wrapper (18 bytes more a file).
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return m;
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(text.data());
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) == Z_STREAM_END) m.gzip_bytes = static_cast<int64_t>(z.total_out);
  deflateEnd(&z);
  return m;
}

int Run(const Options& o) {
  // Two descriptors per simulated node in the process that serves it (its
  // socket and its hub's epoll), one per node in the leader's process
  // (which inherits this limit), and a few dozen besides (etcd clients,
  // logs). With
  // CAP_SYS_RESOURCE the hard limit is raised too, if it is short.
  const rlim_t per_process = (static_cast<rlim_t>(o.nodes) + o.processes - 1) / o.processes;
  const rlim_t need = std::max<rlim_t>(2 * per_process, o.nodes) + 64;
  struct rlimit lim {};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) {
    struct rlimit raised = lim;
    raised.rlim_max = need;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim.rlim_max = need;
  }
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < need) {
    std::fprintf(stderr,
                 "coordination_load_bench: %d nodes need about %llu file descriptors; the limit is %llu (raising "
                 "the hard limit needs CAP_SYS_RESOURCE)\n",
                 o.nodes, static_cast<unsigned long long>(need), static_cast<unsigned long long>(lim.rlim_cur));
    return 1;
  }
  fs::remove_all(o.out);
  fs::create_directories(o.out);
  testing::EtcdServerProcess etcd;
  std::string error;
  if (!etcd.Start(&error)) {
    std::fprintf(stderr, "coordination_load_bench: etcd: %s\n", error.c_str());
    return 1;
  }
  const std::string etcd_url = etcd.client_url();
  ClusterKey key{};
  std::mt19937_64 rng(42);
  for (auto& b : key) b = static_cast<uint8_t>(rng());
  const fs::path key_file = fs::path(o.out) / "cluster.key";
  {
    std::ofstream k(key_file);
    for (uint8_t b : key) k << "0123456789abcdef"[b >> 4] << "0123456789abcdef"[b & 15];
    k << "\n";
  }
  fs::permissions(key_file, fs::perms::owner_read | fs::perms::owner_write);

  // Two real agents: node 1 first, so that it leads; node 2 stands by.
  std::vector<RealAgent> agents(2);
  for (uint32_t i = 0; i < 2; ++i) {
    agents[i].id = i + 1;
    agents[i].port = FreePort();
    agents[i].metrics_port = FreePort();
    agents[i].dir = fs::path(o.out) / ("agent-" + std::to_string(i + 1));
  }
  std::vector<uint32_t> sim_ids;
  for (int id = 3; id <= o.nodes; ++id) sim_ids.push_back(static_cast<uint32_t>(id));
  std::vector<uint32_t> all = sim_ids;
  all.insert(all.begin(), {1, 2});
  const ProbeGraph graph = ProbeGraph::Build(all);
  const WindowSummarySource summaries(graph, 1);
  {
    // What one node sends per window and gets back per instant, as sent
    // (docs/formats.md quotes these).
    const std::vector<WindowSummary> one = summaries.Window(3, 900'000'000, kWindowNs);
    OffsetsSnapshot s;
    s.leader = 1;
    s.sequence = 12345;
    s.reference_instant_ns = 1'800'000'001'000'000'000;
    NodeSolution row{3, true, 12345.678901, 1.2345e-7, 12.34, 3.21, 0, 6};
    row.discipline = FitDiscipline{-123456, 2.5e-8};
    s.nodes.push_back(row);
    // Its peer list as the leader sends it (its neighbours as simulated nodes register).
    PeerList peers{1, {}};
    for (uint32_t p : graph.PeersOf(3)) peers.peers.push_back(SimulatedMember(p));
    std::printf(
        "a node's window of %zu summaries: %zu B grouped (as sent), %zu B as an array; its row of a "
        "solution: %zu B; its peer list (%zu peers): %zu B\n",
        one.size(), EncodeWindowBatch(one).size(), EncodeWindowSummaries(one).size(), EncodeOffsetsSnapshot(s).size(),
        peers.peers.size(), EncodePeerList(peers).size());
  }

  SimulatedAgentsOptions so;
  SetBenchDefaults(&so);
  so.ids = sim_ids;
  so.key = key;
  so.etcd_url = etcd_url;
  so.threads = o.threads;
  so.registrations_per_second = o.registrations_per_second;
  so.record_lag_ns = RecordLagNs(o.fit_span_max_s, kWindowNs);
  so.summaries = &summaries;
  for (const RealAgent& a : agents) so.leader_ports[a.id] = a.port;
  std::unique_ptr<SimulatedNodes> simulated;
  if (o.processes > 1) {
    SimulatedShareOptions share;
    share.shares = o.processes;
    share.nodes = o.nodes;
    share.etcd_url = etcd_url;
    share.key_file = key_file.string();
    share.leader_ports = so.leader_ports;
    share.threads = o.threads;
    share.registrations_per_second = o.registrations_per_second;
    share.fit_span_max_s = o.fit_span_max_s;
    simulated = std::make_unique<SimulatedAgentProcesses>(o.self_bin, share);
  } else {
    simulated = std::make_unique<SimulatedAgents>(so);
  }
  SimulatedNodes& sims = *simulated;

  if (!agents[0].Start(o, etcd_url, key_file)) return 1;
  std::this_thread::sleep_for(std::chrono::seconds(2));
  if (!agents[1].Start(o, etcd_url, key_file)) return 1;
  std::printf("etcd %s; agents 1 and 2 on ports %u, %u; registering %zu simulated nodes\n", etcd_url.c_str(),
              agents[0].port, agents[1].port, sim_ids.size());
  std::fflush(stdout);
  const auto reg_start = Clock::now();
  const double events_at_start =
      MetricSum(Scrape("127.0.0.1", etcd.client_port()), "etcd_debugging_mvcc_events_total");
  if (!sims.Start(&error)) {
    std::fprintf(stderr, "coordination_load_bench: %s\n", error.c_str());
    return 1;
  }
  std::printf("registered in %.1f s; waiting for every link to the leader\n",
              std::chrono::duration<double>(Clock::now() - reg_start).count());
  std::fflush(stdout);
  const auto links_deadline = Clock::now() + std::chrono::seconds(30 + o.nodes / 100);
  while (sims.Totals().links_up < sim_ids.size() && Clock::now() < links_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const std::optional<LeaderClaim> first_leader = sims.leader();
  std::printf("%llu of %zu links up after %.1f s; leader %s\n",
              static_cast<unsigned long long>(sims.Totals().links_up), sim_ids.size(),
              std::chrono::duration<double>(Clock::now() - reg_start).count(),
              first_leader ? std::to_string(first_leader->id).c_str() : "none");
  std::fflush(stdout);
  if (!first_leader) return 1;
  // Like agents, the simulated nodes watch no members: each is given its
  // peers by the leader, over its link.
  while (sims.Totals().peers_held < sim_ids.size() && Clock::now() < links_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  {
    const SimulatedAgentsTotals t = sims.Totals();
    // One event per registration for the leader's members watch, and the
    // other agent's few: were every agent watching members/, n per join.
    const double start_events =
        MetricSum(Scrape("127.0.0.1", etcd.client_port()), "etcd_debugging_mvcc_events_total") - events_at_start;
    std::printf("%llu of %zu nodes hold their peers from the leader after %.1f s (%llu not the probe graph's); "
                "etcd sent %.0f watch events meanwhile\n",
                static_cast<unsigned long long>(t.peers_held), sim_ids.size(),
                std::chrono::duration<double>(Clock::now() - reg_start).count(),
                static_cast<unsigned long long>(t.peers_wrong), start_events);
    std::fflush(stdout);
    if (t.peers_wrong != 0) return 1;
  }

  // ---- the measured windows --------------------------------------------------
  const int kill_at = o.kill_after_windows >= 0 ? o.kill_after_windows : o.windows * 6 / 10;
  SolvedInstants solved({agents[0].dir / "offsets.jsonl", agents[1].dir / "offsets.jsonl"});
  int64_t last_instant_reported = 0;
  std::map<int64_t, std::vector<int64_t>> deliveries;
  nlohmann::json rows = nlohmann::json::array();
  auto leader_agent = [&](uint32_t id) -> RealAgent& { return agents[id == 1 ? 0 : 1]; };
  // Writes: raft proposals (puts, transactions, lease grants and revokes);
  // lease renewals (keepalives) apart, which etcd 3.4 answers on its leader
  // without a proposal.
  std::string etcd_metrics_prev = Scrape("127.0.0.1", etcd.client_port());
  double etcd_writes_prev = MetricSum(etcd_metrics_prev, "etcd_server_proposals_committed_total");
  double etcd_renewals_prev = MetricSum(etcd_metrics_prev, "etcd_debugging_lease_renewed_total");
  // Watch events etcd sent (one per event per watcher that matched).
  double etcd_events_prev = MetricSum(etcd_metrics_prev, "etcd_debugging_mvcc_events_total");
  // Reads (ranges): the agents' re-reads, and each node's read of a new
  // leader's registration.
  double etcd_reads_prev = MetricSum(etcd_metrics_prev, "etcd_debugging_mvcc_range_total");
  SimulatedAgentsTotals totals_prev = sims.Totals();
  uint32_t leading = first_leader->id;
  ProcessSample cpu_prev = SampleProcess(leader_agent(leading).pid);
  std::string leader_metrics = Scrape("127.0.0.1", leader_agent(leading).metrics_port);
  double leader_in_prev = MetricSum(leader_metrics, "chronolink_channel_events_total", "bytes_received");
  double leader_out_prev = MetricSum(leader_metrics, "chronolink_channel_events_total", "bytes_sent");
  std::optional<int64_t> killed_at;  // CLOCK_MONOTONIC
  uint32_t killed = 0;
  std::optional<double> failover_s;
  // The failover's steps, seconds after the kill: a new leader named in
  // etcd (as the nodes see it), every node's link to it up, the first and
  // then every node holding its solution.
  std::optional<double> named_s, linked_s, first_held_s, peers_s;
  auto next = Clock::now();
  const int64_t run_start_ns = ReadClockNs(CLOCK_MONOTONIC);
  const SimulatedAgentsTotals totals_start = sims.Totals();
  std::printf("%6s %8s %8s %7s %9s %7s %8s %9s %9s %9s %9s %11s\n", "window", "etcd w/s", "renew/s", "keys",
              "db bytes", "leader", "rss MB", "in kB/s", "out kB/s", "B/node/w", "solved s", "deliv p99 s");
  for (int w = 1; w <= o.windows; ++w) {
    next += std::chrono::nanoseconds(kWindowNs);
    while (Clock::now() < next) {
      for (auto& [t, when] : sims.TakeDeliveries()) {
        auto& v = deliveries[t];
        v.insert(v.end(), when.begin(), when.end());
      }
      if (killed_at && !failover_s) {
        const std::optional<LeaderClaim> now_leading = sims.leader();
        const double since = static_cast<double>(ReadClockNs(CLOCK_MONOTONIC) - *killed_at) / 1e9;
        if (now_leading && now_leading->id != killed) {
          if (!named_s) named_s = since;
          const SimulatedAgentsTotals t = sims.Totals();
          if (!linked_s && t.links_up == sim_ids.size()) linked_s = since;
          if (!peers_s && t.peers_held == sim_ids.size()) peers_s = since;
          const size_t holding = sims.HoldingFrom(now_leading->id);
          if (!first_held_s && holding > 0) first_held_s = since;
          if (holding == sim_ids.size()) failover_s = since;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double dt = static_cast<double>(kWindowNs) / 1e9;
    const std::string etcd_metrics = Scrape("127.0.0.1", etcd.client_port());
    const double etcd_writes = MetricSum(etcd_metrics, "etcd_server_proposals_committed_total");
    const double etcd_events = MetricSum(etcd_metrics, "etcd_debugging_mvcc_events_total");
    const double etcd_reads = MetricSum(etcd_metrics, "etcd_debugging_mvcc_range_total");
    const double etcd_renewals = MetricSum(etcd_metrics, "etcd_debugging_lease_renewed_total");
    const SimulatedAgentsTotals totals = sims.Totals();
    const std::optional<LeaderClaim> claim = sims.leader();
    const bool leader_changed = claim && claim->id != leading && leader_agent(claim->id).pid > 0;
    if (leader_changed) {
      leading = claim->id;
      cpu_prev = SampleProcess(leader_agent(leading).pid);
      leader_metrics = Scrape("127.0.0.1", leader_agent(leading).metrics_port);
      leader_in_prev = MetricSum(leader_metrics, "chronolink_channel_events_total", "bytes_received");
      leader_out_prev = MetricSum(leader_metrics, "chronolink_channel_events_total", "bytes_sent");
    }
    RealAgent& la = leader_agent(leading);
    const ProcessSample cpu = la.pid > 0 ? SampleProcess(la.pid) : ProcessSample{};
    leader_metrics = la.pid > 0 ? Scrape("127.0.0.1", la.metrics_port) : std::string();
    const double in = MetricSum(leader_metrics, "chronolink_channel_events_total", "bytes_received");
    const double out = MetricSum(leader_metrics, "chronolink_channel_events_total", "bytes_sent");
    const double per_node =
        static_cast<double>((totals.bytes_sent - totals_prev.bytes_sent) +
                            (totals.bytes_received - totals_prev.bytes_received)) /
        static_cast<double>(sim_ids.size());
    // The newest instant every node should hold by now, and how it went.
    nlohmann::json row = {{"window", w},
                          {"etcd_writes_per_s", (etcd_writes - etcd_writes_prev) / dt},
                          {"etcd_renewals_per_s", (etcd_renewals - etcd_renewals_prev) / dt},
                          {"etcd_keys", MetricSum(etcd_metrics, "etcd_debugging_mvcc_keys_total")},
                          {"etcd_db_bytes", MetricSum(etcd_metrics, "etcd_mvcc_db_total_size_in_bytes")},
                          {"leader", leading},
                          {"bytes_per_node_per_window", per_node},
                          {"etcd_watch_events_per_s", (etcd_events - etcd_events_prev) / dt},
                          {"etcd_reads_per_s", (etcd_reads - etcd_reads_prev) / dt},
                          {"links_up", totals.links_up},
                          {"peers_held", totals.peers_held},
                          {"peers_wrong", totals.peers_wrong},
                          {"windows_pending", totals.windows_pending}};
    // The leader's figures only while it runs (not across its death).
    const bool leader_sampled = la.pid > 0 && cpu_prev.cpu_s > 0;
    if (leader_sampled) {
      row["leader_cores"] = (cpu.cpu_s - cpu_prev.cpu_s) / dt;
      row["leader_rss_bytes"] = cpu.rss_bytes;
      row["leader_in_bytes_per_s"] = (in - leader_in_prev) / dt;
      row["leader_out_bytes_per_s"] = (out - leader_out_prev) / dt;
    }
    double solved_s = NAN, deliv_p99 = NAN;
    for (auto it = deliveries.rbegin(); it != deliveries.rend(); ++it) {
      const auto when = solved.When(it->first);
      if (!when || it->second.size() < sim_ids.size()) continue;  // not everyone yet
      if (it->first == last_instant_reported) break;  // nothing newer since the last row
      last_instant_reported = it->first;
      const int64_t close_real = it->first + kWindowNs / 2 + kGraceNs;
      std::vector<double> lag;
      for (int64_t t : it->second) lag.push_back(static_cast<double>(t - when->first) / 1e9);
      solved_s = static_cast<double>(when->second - close_real) / 1e9;
      deliv_p99 = Percentile(lag, 0.99);
      row["instant_t_ns"] = it->first;
      row["close_to_solved_s"] = solved_s;
      row["solved_to_delivered_p50_s"] = Percentile(lag, 0.5);
      row["solved_to_delivered_p99_s"] = deliv_p99;
      row["solved_to_delivered_max_s"] = Percentile(lag, 1.0);
      // The measure: from the window's end (before the agents'
      // grace), until all but 1 % of the nodes hold the instant's solution.
      row["window_end_to_held_p99_s"] = solved_s + static_cast<double>(kGraceNs) / 1e9 + deliv_p99;
      break;
    }
    auto num = [&](const char* key, double scale) { return row.contains(key) ? row[key].get<double>() * scale : NAN; };
    std::printf("%6d %8.1f %8.1f %7.0f %9.0f %6.2fc %8.1f %9.1f %9.1f %9.0f %9.2f %11.3f\n", w,
                row["etcd_writes_per_s"].get<double>(), row["etcd_renewals_per_s"].get<double>(),
                row["etcd_keys"].get<double>(), row["etcd_db_bytes"].get<double>(), num("leader_cores", 1),
                num("leader_rss_bytes", 1e-6), num("leader_in_bytes_per_s", 1e-3), num("leader_out_bytes_per_s", 1e-3),
                per_node, solved_s, deliv_p99);
    std::fflush(stdout);
    rows.push_back(row);
    etcd_writes_prev = etcd_writes;
    etcd_events_prev = etcd_events;
    etcd_reads_prev = etcd_reads;
    etcd_renewals_prev = etcd_renewals;
    totals_prev = totals;
    cpu_prev = la.pid > 0 ? cpu : ProcessSample{};
    leader_in_prev = in;
    leader_out_prev = out;
    if (w == kill_at && kill_at > 0) {
      killed = leading;
      std::printf("killing the leader, node %u (SIGKILL)\n", killed);
      std::fflush(stdout);
      killed_at = ReadClockNs(CLOCK_MONOTONIC);
      leader_agent(killed).Kill(SIGKILL);
    }
  }
  // The run in one line each: what the targets are about.
  const SimulatedAgentsTotals end = sims.Totals();
  std::vector<double> etcd_rate, cores, solved_lag, deliv99, held99;
  double rss_max = 0;
  for (const nlohmann::json& r : rows) {
    etcd_rate.push_back(r["etcd_writes_per_s"].get<double>() + r["etcd_renewals_per_s"].get<double>());
    if (r.contains("leader_cores")) cores.push_back(r["leader_cores"].get<double>());
    if (r.contains("leader_rss_bytes")) rss_max = std::max(rss_max, r["leader_rss_bytes"].get<double>());
    if (r.contains("close_to_solved_s")) solved_lag.push_back(r["close_to_solved_s"].get<double>());
    if (r.contains("solved_to_delivered_p99_s")) deliv99.push_back(r["solved_to_delivered_p99_s"].get<double>());
    if (r.contains("window_end_to_held_p99_s")) held99.push_back(r["window_end_to_held_p99_s"].get<double>());
  }
  const double bytes_per_node_window = static_cast<double>(end.bytes_sent + end.bytes_received -
                                                           totals_start.bytes_sent - totals_start.bytes_received) /
                                       static_cast<double>(sim_ids.size()) /
                                       (static_cast<double>(ReadClockNs(CLOCK_MONOTONIC) - run_start_ns) / kWindowNs);
  nlohmann::json summary = {{"etcd_writes_and_renewals_per_s_median", Percentile(etcd_rate, 0.5)},
                            {"etcd_writes_and_renewals_per_node_per_min", Percentile(etcd_rate, 0.5) * 60 / o.nodes},
                            {"bytes_per_node_per_window_mean", bytes_per_node_window},
                            {"leader_cores_median", Percentile(cores, 0.5)},
                            {"leader_cores_max", Percentile(cores, 1.0)},
                            {"leader_rss_max_bytes", rss_max},
                            {"close_to_solved_s_median", Percentile(solved_lag, 0.5)},
                            {"solved_to_delivered_p99_s_max", Percentile(deliv99, 1.0)},
                            {"window_end_to_held_p99_s_median", Percentile(held99, 0.5)},
                            {"window_end_to_held_p99_s_max", Percentile(held99, 1.0)},
                            {"sim_pass_ms_max", end.pass_ms_max}};
  std::printf(
      "\n%d nodes: etcd %.1f writes+renewals/s (%.2f per node per minute); %.0f B per node per window; "
      "leader %.2f cores (max %.2f), %.0f MB; close to solved %.2f s (the solve's lag), solved to every "
      "node p99 <= %.3f s; window end to 99 %% of the nodes holding its solution %.2f s (max %.2f s); "
      "simulated nodes' slowest pass %.0f ms\n",
      o.nodes, Percentile(etcd_rate, 0.5), Percentile(etcd_rate, 0.5) * 60 / o.nodes, bytes_per_node_window,
      Percentile(cores, 0.5), Percentile(cores, 1.0), rss_max / 1e6, Percentile(solved_lag, 0.5),
      Percentile(deliv99, 1.0), Percentile(held99, 0.5), Percentile(held99, 1.0), end.pass_ms_max);
  if (killed_at) {
    auto after = [](const std::optional<double>& s) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.2f s", s.value_or(NAN));
      return s ? std::string(buf) : std::string("(not within the run)");
    };
    std::printf(
        "leader killed: a new leader named after %s, every link to it up after %s, every node held its "
        "peers from it after %s, the first node held its solution after %s, every node after %s\n",
        after(named_s).c_str(), after(linked_s).c_str(), after(peers_s).c_str(), after(first_held_s).c_str(),
        after(failover_s).c_str());
  }
  sims.Stop();
  for (RealAgent& a : agents) a.Kill(SIGTERM);
  // The first leader's file: every instant it solved, each a line per node.
  const OffsetsStorage stored = MeasureOffsetsStorage(leader_agent(first_leader->id).dir / "offsets.jsonl");
  constexpr double kInstantsPerDay = 86400.0 * 1e9 / kWindowNs;
  if (!stored.error.empty()) {
    std::fprintf(stderr, "coordination_load_bench: the leader's offsets.jsonl does not read back: %s\n",
                 stored.error.c_str());
    return 1;
  }
  if (stored.solutions > 0) {
    const double per_line = stored.BytesPerNodeInstant(), per_line_gz = stored.GzipPerNodeInstant();
    std::printf("offsets.jsonl as the leader wrote it (%lld lines): %lld instants, %.1f B per node per instant "
                "(%.1f B gzip -6); "
                "a day: %.2f GB (%.2f GB gzip) at %d nodes, %.1f GB (%.1f GB gzip) at 10 000\n",
                static_cast<long long>(stored.lines), static_cast<long long>(stored.instants), per_line,
                per_line_gz,
                per_line * o.nodes * kInstantsPerDay / 1e9, per_line_gz * o.nodes * kInstantsPerDay / 1e9, o.nodes,
                per_line * 1e4 * kInstantsPerDay / 1e9, per_line_gz * 1e4 * kInstantsPerDay / 1e9);
    summary["offsets_bytes_per_node_instant"] = per_line;
    summary["offsets_gzip_bytes_per_node_instant"] = per_line_gz;
    summary["offsets_gzip_gb_per_day_at_10000"] = per_line_gz * 1e4 * kInstantsPerDay / 1e9;
  }
  // The leader's cluster-timebase.jsonl (columns from 1 000 nodes) must
  // read back with the trace tools' reader. Its cost is timebase_form_bench's
  // to measure: the simulated nodes' knots are straight lines.
  {
    trace::TimebaseReader reader;
    std::map<uint32_t, trace::NodeTimebase> nodes;
    std::string error;
    const fs::path file = leader_agent(first_leader->id).dir / "cluster-timebase.jsonl";
    if (!reader.AddFile(file.string(), &error) || !reader.Finish(&nodes, &error)) {
      std::fprintf(stderr, "coordination_load_bench: the leader's cluster-timebase.jsonl does not read back: %s\n",
                   error.c_str());
      return 1;
    }
    size_t knots = 0;
    for (const auto& [node, t] : nodes) {
      for (const auto& stretch : t.stretches) knots += stretch.knots.size();
    }
    std::printf("cluster-timebase.jsonl as the leader wrote it: %zu knots of %zu nodes read back, %lld bytes\n", knots,
                nodes.size(), static_cast<long long>(fs::file_size(file)));
    summary["cluster_timebase_knots"] = knots;
    summary["cluster_timebase_nodes"] = nodes.size();
  }
  nlohmann::json result = {
      {"nodes", o.nodes},
      {"summary", summary},
      {"windows", rows},
      {"failover_s", failover_s ? nlohmann::json(*failover_s) : nlohmann::json(nullptr)},
      {"failover_steps_s",
       {{"leader_named", named_s ? nlohmann::json(*named_s) : nlohmann::json(nullptr)},
        {"every_link_up", linked_s ? nlohmann::json(*linked_s) : nlohmann::json(nullptr)},
        {"every_node_held_peers", peers_s ? nlohmann::json(*peers_s) : nlohmann::json(nullptr)},
        {"first_node_held", first_held_s ? nlohmann::json(*first_held_s) : nlohmann::json(nullptr)}}}};
  std::ofstream(fs::path(o.out) / "results.json") << result.dump(1) << "\n";
  std::printf("results: %s\n", (fs::path(o.out) / "results.json").c_str());
  return 0;
}

}  // namespace
}  // namespace chronolink::bench

int main(int argc, char** argv) {
  chronolink::bench::Options o;
  CLI::App app{"Coordination load bench: a real etcd, two real agents, N - 2 simulated nodes (docs/PERFORMANCE.md)"};
  app.add_option("--nodes", o.nodes, "Nodes in all, the two real agents included")->check(CLI::Range(3, 100000));
  app.add_option("--windows", o.windows, "Windows (2 s) measured after every link is up")->check(CLI::Range(1, 1000));
  app.add_option("--kill-after", o.kill_after_windows, "Kill the leader after this many windows (0: never; default 60 %)");
  app.add_option("--threads", o.threads, "Threads driving the simulated nodes")->check(CLI::Range(1, 64));
  app.add_option("--registrations-per-s", o.registrations_per_second, "Pace of the simulated nodes' registration")
      ->check(CLI::Range(1, 100000));
  app.add_option("--agent-bin", o.agent_bin, "chronolink-agent to run as the two real nodes");
  app.add_option("--out", o.out, "Output directory (results.json, the agents' files)");
  app.add_option("--offsets-format", o.offsets_format, "The leader's offsets.jsonl form (its cost is printed)")
      ->check(CLI::IsMember({"rows", "columns", "auto"}));
  app.add_option("--fit-span-max-s", o.fit_span_max_s,
                 "Every node's longest fit span: the real agents' --fit-span-max-s, and when the simulated nodes "
                 "send a window's summaries, (this - 2 s) / 2 after its end as an agent does (default: the agent's, 6)")
      ->check(CLI::Range(2.0, 16.0));
  app.add_option("--agent-arg", o.agent_args, "One more argument for both real agents, repeatable")
      ->allow_extra_args(false);
  app.add_option("--processes", o.processes,
                 "Simulated nodes split over this many processes (each holds two descriptors per node; the limit "
                 "is per process)")
      ->check(CLI::Range(1, 64));
  // A share of the simulated nodes, started by the bench itself (--processes).
  chronolink::bench::SimulatedShareOptions share;
  std::string leader_ports;
  auto* share_mode = app.add_option("--simulate-share", share.share, "(internal) run this share of the nodes")
                         ->group("");
  app.add_option("--shares", share.shares, "(internal)")->group("")->check(CLI::Range(1, 64));
  app.add_option("--etcd-url", share.etcd_url, "(internal)")->group("");
  app.add_option("--key-file", share.key_file, "(internal)")->group("");
  app.add_option("--leader-ports", leader_ports, "(internal)")->group("");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  if (share_mode->count() > 0) {
    share.nodes = o.nodes;
    share.threads = o.threads;
    share.registrations_per_second = o.registrations_per_second;
    share.fit_span_max_s = o.fit_span_max_s;
    if (share.share < 0 || share.share >= share.shares || !chronolink::bench::ParseLeaderPorts(leader_ports, &share.leader_ports)) {
      std::fprintf(stderr, "coordination_load_bench: a bad --simulate-share invocation\n");
      return 2;
    }
    // stdout carries the share's reports: its log goes to stderr.
    spdlog::set_default_logger(spdlog::stderr_color_mt("share"));
    spdlog::set_level(spdlog::level::warn);
    return chronolink::bench::RunSimulatedShare(share);
  }
  o.self_bin = std::filesystem::read_symlink("/proc/self/exe").string();
  return chronolink::bench::Run(o);
}
