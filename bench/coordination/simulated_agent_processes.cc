#include "bench/coordination/simulated_agent_processes.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "agent/cluster/probe_graph.h"
#include "agent/wire/cluster_key.h"
#include "bench/coordination/window_summaries.h"

namespace chronolink::bench {

namespace {

using Json = nlohmann::json;

constexpr int kReportMs = 100;

// One report line: what SimulatedAgentProcesses::Report reads.
std::string ReportLine(SimulatedAgents& sims) {
  const SimulatedAgentsTotals t = sims.Totals();
  Json deliveries = Json::array();
  for (auto& [instant, when] : sims.TakeDeliveries()) deliveries.push_back({instant, when});
  Json holding = Json::array();
  for (const auto& [leader, count] : sims.HoldingCounts()) holding.push_back({leader, count});
  const std::optional<LeaderClaim> leader = sims.leader();
  const Json j = {
      {"bytes_sent", t.bytes_sent},   {"bytes_received", t.bytes_received},
      {"links_up", t.links_up},       {"windows_pending", t.windows_pending},
      {"peers_held", t.peers_held},   {"peers_wrong", t.peers_wrong},
      {"pass_ms_max", t.pass_ms_max}, {"deliveries", deliveries},
      {"holding", holding},           {"leader", leader ? Json::array({leader->id, leader->term}) : Json(nullptr)}};
  return j.dump();
}

void WriteLine(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace

std::vector<std::string> SimulatedShareArguments(const SimulatedShareOptions& o) {
  std::string ports;
  for (const auto& [id, port] : o.leader_ports) {
    ports += (ports.empty() ? "" : ",") + std::to_string(id) + "=" + std::to_string(port);
  }
  return {"--simulate-share",
          std::to_string(o.share),
          "--shares",
          std::to_string(o.shares),
          "--nodes",
          std::to_string(o.nodes),
          "--etcd-url",
          o.etcd_url,
          "--key-file",
          o.key_file,
          "--leader-ports",
          ports,
          "--threads",
          std::to_string(o.threads),
          "--registrations-per-s",
          std::to_string(o.registrations_per_second),
          "--fit-span-max-s",
          std::to_string(o.fit_span_max_s)};
}

bool ParseLeaderPorts(const std::string& text, std::map<uint32_t, uint16_t>* out) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    const size_t eq = item.find('=');
    try {
      if (eq == std::string::npos) return false;
      const unsigned long id = std::stoul(item.substr(0, eq));
      const unsigned long port = std::stoul(item.substr(eq + 1));
      if (id == 0 || id > UINT32_MAX || port == 0 || port > 65535) return false;
      (*out)[static_cast<uint32_t>(id)] = static_cast<uint16_t>(port);
    } catch (const std::exception&) {
      return false;
    }
    at = end + 1;
  }
  return !out->empty();
}

int RunSimulatedShare(const SimulatedShareOptions& o) {
  SimulatedAgentsOptions so;
  SetBenchDefaults(&so);
  std::string error;
  if (!LoadClusterKeyFile(o.key_file, &so.key, &error)) {
    WriteLine(Json({{"error", error}}).dump());
    return 1;
  }
  std::vector<uint32_t> all;
  for (int id = 1; id <= o.nodes; ++id) all.push_back(static_cast<uint32_t>(id));
  for (int id = 3; id <= o.nodes; ++id) {
    if ((id - 3) % o.shares == o.share) so.ids.push_back(static_cast<uint32_t>(id));
  }
  const WindowSummarySource summaries(ProbeGraph::Build(all), 1);  // as the bench draws them
  so.etcd_url = o.etcd_url;
  so.leader_ports = o.leader_ports;
  so.threads = o.threads;
  so.registrations_per_second = o.registrations_per_second;
  so.record_lag_ns = RecordLagNs(o.fit_span_max_s, so.window_ns);
  so.summaries = &summaries;
  SimulatedAgents sims(so);
  if (!sims.Start(&error)) {
    WriteLine(Json({{"error", error}}).dump());
    return 1;
  }
  WriteLine(Json({{"started", so.ids.size()}}).dump());
  // Until stdin closes: the bench stops this share, or died.
  pollfd in{STDIN_FILENO, POLLIN, 0};
  for (;;) {
    const int ready = ::poll(&in, 1, kReportMs);
    if (ready > 0) {
      char buf[64];
      if (::read(STDIN_FILENO, buf, sizeof(buf)) <= 0) break;
    }
    WriteLine(ReportLine(sims));
  }
  sims.Stop();
  WriteLine(ReportLine(sims));
  return 0;
}

SimulatedAgentProcesses::SimulatedAgentProcesses(std::string binary, SimulatedShareOptions options)
    : binary_(std::move(binary)), options_(std::move(options)) {}

SimulatedAgentProcesses::~SimulatedAgentProcesses() { Stop(); }

bool SimulatedAgentProcesses::Start(std::string* error) {
  for (int i = 0; i < options_.shares; ++i) {
    SimulatedShareOptions o = options_;
    o.share = i;
    o.registrations_per_second = std::max(1, options_.registrations_per_second / options_.shares);
    std::vector<std::string> args = SimulatedShareArguments(o);
    args.insert(args.begin(), binary_);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      *error = "pipe: " + std::string(std::strerror(errno));
      return false;
    }
    auto share = std::make_unique<Share>();
    share->pid = ::fork();
    if (share->pid < 0) {
      *error = "fork: " + std::string(std::strerror(errno));
      return false;
    }
    if (share->pid == 0) {  // between fork and exec, only what is async-signal-safe
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::execv(binary_.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    share->to_child = in[1];
    share->from_child = out[0];
    Share* raw = share.get();
    share->reader = std::thread([this, raw] { Read(raw); });
    shares_.push_back(std::move(share));
  }
  // Registration is paced: the shares' nodes at their pace, and a minute more.
  const int per_share = (options_.nodes - 2 + options_.shares - 1) / options_.shares;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(60 + per_share * options_.shares / options_.registrations_per_second);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      size_t started = 0;
      for (const auto& s : shares_) {
        if (!s->error.empty() || s->ended) {
          *error = "simulated share (pid " + std::to_string(s->pid) + "): " +
                   (s->error.empty() ? std::string("ended before it started") : s->error);
          return false;
        }
        started += s->started ? 1 : 0;
      }
      if (started == shares_.size()) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *error = "the simulated shares did not start within their registration time";
  return false;
}

void SimulatedAgentProcesses::Read(Share* share) {
  std::string pending;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(share->from_child, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
      Report(share, pending.substr(0, end));
      pending.erase(0, end + 1);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  share->ended = true;
}

void SimulatedAgentProcesses::Report(Share* share, const std::string& line) {
  const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!j.is_object()) {
    share->error = "a report that is not a JSON object: " + line.substr(0, 80);
    return;
  }
  if (j.contains("error")) {
    share->error = j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
    return;
  }
  if (j.contains("started")) {
    share->started = true;
    return;
  }
  try {
    SimulatedAgentsTotals& t = share->totals;
    t.bytes_sent = j.at("bytes_sent").get<uint64_t>();
    t.bytes_received = j.at("bytes_received").get<uint64_t>();
    t.links_up = j.at("links_up").get<uint64_t>();
    t.windows_pending = j.at("windows_pending").get<uint64_t>();
    t.peers_held = j.at("peers_held").get<uint64_t>();
    t.peers_wrong = j.at("peers_wrong").get<uint64_t>();
    t.pass_ms_max = j.at("pass_ms_max").get<double>();
    for (const Json& d : j.at("deliveries")) {
      auto& v = deliveries_[d.at(0).get<int64_t>()];
      for (const Json& when : d.at(1)) v.push_back(when.get<int64_t>());
    }
    share->holding.clear();
    for (const Json& h : j.at("holding")) share->holding[h.at(0).get<uint32_t>()] = h.at(1).get<size_t>();
    const Json& leader = j.at("leader");
    share->leader = leader.is_null() ? std::nullopt
                                     : std::optional<LeaderClaim>(LeaderClaim{leader.at(0).get<uint32_t>(),
                                                                              leader.at(1).get<int64_t>()});
  } catch (const Json::exception& e) {
    share->error = std::string("a malformed report: ") + e.what();
  }
}

void SimulatedAgentProcesses::Stop() {
  for (auto& s : shares_) {
    if (s->to_child >= 0) ::close(s->to_child);  // the share stops and revokes its leases
    s->to_child = -1;
  }
  for (auto& s : shares_) {
    // A share revokes thousands of leases: allow it half a minute.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    int status = 0;
    while (s->pid > 0 && ::waitpid(s->pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(s->pid, SIGKILL);
        ::waitpid(s->pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    s->pid = -1;
    if (s->reader.joinable()) s->reader.join();
    if (s->from_child >= 0) ::close(s->from_child);
    s->from_child = -1;
  }
}

SimulatedAgentsTotals SimulatedAgentProcesses::Totals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  SimulatedAgentsTotals sum;
  for (const auto& s : shares_) {
    sum.bytes_sent += s->totals.bytes_sent;
    sum.bytes_received += s->totals.bytes_received;
    sum.links_up += s->totals.links_up;
    sum.windows_pending += s->totals.windows_pending;
    sum.peers_held += s->totals.peers_held;
    sum.peers_wrong += s->totals.peers_wrong;
    sum.pass_ms_max = std::max(sum.pass_ms_max, s->totals.pass_ms_max);
  }
  return sum;
}

std::map<int64_t, std::vector<int64_t>> SimulatedAgentProcesses::TakeDeliveries() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<int64_t, std::vector<int64_t>> out;
  out.swap(deliveries_);
  return out;
}

std::map<uint32_t, size_t> SimulatedAgentProcesses::HoldingCounts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<uint32_t, size_t> sum;
  for (const auto& s : shares_) {
    for (const auto& [leader, count] : s->holding) sum[leader] += count;
  }
  return sum;
}

// The first share's view: every share watches the same key.
std::optional<LeaderClaim> SimulatedAgentProcesses::leader() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shares_.empty() ? std::nullopt : shares_.front()->leader;
}

}  // namespace chronolink::bench
