#include "tools/trace_fixture/xspace_fixture.h"

#include <cstdio>
#include <fstream>
#include <set>

#include <unistd.h>

#include "tools/trace_fixture/fixture_host_builder.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/run_directory.h"

namespace chronolink::trace {
namespace {

constexpr int64_t kMaxOffsetNs = 1'000'000'000'000'000;  // 1e15 ns: 11.6 days
constexpr double kMaxDriftPpm = 10'000.0;
constexpr int64_t kLatestTrueNs = 4'000'000'000'000'000'000;  // year 2096

std::string CheckClock(const FixtureHost& h, int64_t true_start_ns) {
  if (h.host.empty() || h.host.find('/') != std::string::npos || h.host == "." || h.host == "..") {
    return "host name '" + h.host + "' cannot be a file name";
  }
  if (!h.clock_state_file.empty()) {
    NodeClock clock;
    std::string error;
    if (!OpenFixtureHostClock(h, &clock, &error)) return "host " + h.host + ": " + error;
    if (clock.Ingest(true_start_ns) <= 0) return "host " + h.host + ": its clock reads <= 0 at the start";
    return "";
  }
  if (h.clock.offset_ns > kMaxOffsetNs || h.clock.offset_ns < -kMaxOffsetNs) {
    return "host " + h.host + ": offset beyond +-1e15 ns";
  }
  if (!(h.clock.drift_ppm <= kMaxDriftPpm && h.clock.drift_ppm >= -kMaxDriftPpm)) {
    return "host " + h.host + ": drift beyond +-10000 ppm";
  }
  if (h.clock.t0_ns < 0 || h.clock.t0_ns > kLatestTrueNs) return "host " + h.host + ": t0 out of range";
  if (VirtualClock(h.clock).Apply(true_start_ns) <= 0) {
    return "host " + h.host + ": its clock reads <= 0 at the start";
  }
  return "";
}

std::string CheckShape(const XSpaceFixtureOptions& o) {
  if (o.gpus_per_host < 0 || o.gpus_per_host >= kFixtureHostPlaneId) return "gpus per host must be 0..48";
  if (o.steps < 1) return "steps must be >= 1";
  if (o.kernels_per_step < 0) return "kernels per step must be >= 0";
  if (o.step_ns < 100'000) return "step must be >= 100000 ns";
  if (o.kernels_per_step > o.step_ns * 45 / 100 / 2) return "too many kernels for the step length";
  const int64_t slot = o.step_ns * 35 / 100 / static_cast<int64_t>(FixtureCollectives().size());
  if (o.collective_jitter_ns < 0 || o.collective_jitter_ns > slot / 8) {
    return "collective jitter must be 0.." + std::to_string(slot / 8) + " ns for this step length";
  }
  if (o.true_start_ns < kMaxOffsetNs + 86'400'000'000'000 ||
      o.true_start_ns > kLatestTrueNs - o.steps * o.step_ns || o.steps > 1'000'000'000) {
    return "true start must lie between 1e15+1 day ns and year 2096 with the whole run";
  }
  if (!(o.max_offset_ns >= 0 && o.max_offset_ns <= kMaxOffsetNs) ||
      !(o.max_drift_ppm >= 0 && o.max_drift_ppm <= kMaxDriftPpm)) {
    return "max offset must be 0..1e15 ns and max drift 0..10000 ppm";
  }
  return "";
}

// Host i's clock drawn from the seed: reproducible host by host.
FixtureHost DrawHost(const XSpaceFixtureOptions& o, int i) {
  uint64_t h = o.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(i);
  const auto draw = [&h](int64_t max) {  // uniform enough in [-max, max]
    h = h * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t r = (h >> 11) ^ (h << 7);
    return static_cast<int64_t>(r % static_cast<uint64_t>(2 * max + 1)) - max;
  };
  FixtureHost host;
  host.host = o.host_prefix + std::to_string(i);
  host.clock.offset_ns = draw(o.max_offset_ns);
  host.clock.drift_ppm = static_cast<double>(draw(static_cast<int64_t>(o.max_drift_ppm * 1000))) / 1000.0;
  host.clock.t0_ns = o.true_start_ns;
  return host;
}

bool WriteTextAtomically(const std::filesystem::path& path, const std::string& text,
                         std::string* error) {
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      *error = tmp.string() + ": cannot write";
      std::remove(tmp.c_str());
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    *error = path.string() + ": " + ec.message();
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

const std::vector<FixtureCollective>& FixtureCollectives() {
  static const std::vector<FixtureCollective> kCollectives = {
      {"all-reduce.1", nullptr, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"},
      {"all-gather.2", nullptr, "ncclDevKernel_AllGather_RING_LL"},
      {"reduce-scatter.3", nullptr, "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"},
      {"collective-permute.4", nullptr, "ncclDevKernel_SendRecv"},
      {"all-to-all.5", nullptr, "ncclDevKernel_SendRecv"},
      {"all-reduce-start.6", "all-reduce-done.6", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"},
  };
  return kCollectives;
}

bool OpenFixtureHostClock(const FixtureHost& host, NodeClock* clock, std::string* error) {
  if (host.clock_state_file.empty()) {
    *clock = NodeClock(host.clock);
    return true;
  }
  auto state = std::make_shared<TestbedNodeClock>();
  if (!state->Open(host.clock_state_file, error)) return false;
  *clock = NodeClock(std::move(state));
  return true;
}

bool ResolveFixtureHosts(const XSpaceFixtureOptions& options, std::vector<FixtureHost>* hosts,
                         std::string* error) {
  if (std::string why = CheckShape(options); !why.empty()) {
    *error = "fixture: " + why;
    return false;
  }
  hosts->clear();
  if (options.clocks.empty()) {
    if (options.hosts < 1 || options.hosts > 4096) {
      *error = "fixture: hosts must be 1..4096";
      return false;
    }
    for (int i = 0; i < options.hosts; ++i) hosts->push_back(DrawHost(options, i));
  } else {
    *hosts = options.clocks;
  }
  std::set<std::string> names;
  for (const auto& h : *hosts) {
    std::string why = CheckClock(h, options.true_start_ns);
    if (why.empty() && !names.insert(h.host).second) why = "host " + h.host + " appears twice";
    if (!why.empty()) {
      *error = "fixture: " + why;
      return false;
    }
  }
  return true;
}

bool GenerateFixtureHost(const XSpaceFixtureOptions& options, const FixtureHost& host,
                         HostTrace* out, std::string* error) {
  std::vector<FixtureHost> hosts;
  if (!ResolveFixtureHosts(options, &hosts, error)) return false;
  int index = -1;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].host == host.host) index = static_cast<int>(i);
  }
  if (index < 0) {
    *error = "fixture: host " + host.host + " is not one of the run's hosts";
    return false;
  }
  *out = HostTrace();
  NodeClock clock;
  if (!OpenFixtureHostClock(hosts[index], &clock, error)) return false;
  FixtureHostBuilder(options, hosts[index], clock, index, out).Build();
  return true;
}

int64_t FixtureCollectiveMarginNs(const XSpaceFixtureOptions& options) {
  return options.step_ns * 35 / 100 / static_cast<int64_t>(FixtureCollectives().size()) / 2;
}

nlohmann::json FixtureTruth(const XSpaceFixtureOptions& o, const std::vector<FixtureHost>& hosts) {
  nlohmann::json truth = {
      {"schema", "chronolink.trace_fixture_truth/1"},
      {"formula", "v = t + offset_ns + llround(drift_ppm * 1e-6 * (t - t0_ns)); t = true ns"},
      {"true_start_ns", o.true_start_ns},
      {"true_stop_ns", o.true_start_ns + o.steps * o.step_ns},
      {"step_ns", o.step_ns},
      {"steps", o.steps},
      {"gpus_per_host", o.gpus_per_host},
      {"kernels_per_step", o.kernels_per_step},
      {"collective_jitter_ns", o.collective_jitter_ns},
      {"collective_margin_ns", FixtureCollectiveMarginNs(o)},
      {"seed", o.seed},
      {"line_timestamps", o.absolute_line_timestamps ? "absolute" : "relative"},
  };
  nlohmann::json collectives = nlohmann::json::array();
  for (const auto& c : FixtureCollectives()) {
    collectives.push_back({{"hlo_op", c.hlo_op},
                           {"done_op", c.done_op ? nlohmann::json(c.done_op) : nlohmann::json()},
                           {"kernel", c.kernel}});
  }
  truth["collectives"] = collectives;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& h : hosts) {
    NodeClock clock;
    std::string ignored;  // ResolveFixtureHosts opened it
    OpenFixtureHostClock(h, &clock, &ignored);
    nlohmann::json entry = {{"host", h.host},
                            {"file", h.host + ".xplane.pb"},
                            {"offset_ns", h.clock.offset_ns},
                            {"drift_ppm", h.clock.drift_ppm},
                            {"t0_ns", h.clock.t0_ns},
                            {"profile_start_time", clock.Ingest(o.true_start_ns)}};
    if (!h.clock_state_file.empty()) entry["clock_state_file"] = h.clock_state_file;
    list.push_back(std::move(entry));
  }
  truth["hosts"] = list;
  return truth;
}

bool LoadFixtureTruth(const std::filesystem::path& path, std::vector<FixtureHost>* hosts,
                      std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = path.string() + ": cannot open";
    return false;
  }
  try {
    const auto truth = nlohmann::json::parse(in);
    hosts->clear();
    for (const auto& h : truth.at("hosts")) {
      FixtureHost host;
      host.host = h.at("host").get<std::string>();
      host.clock.offset_ns = h.at("offset_ns").get<int64_t>();
      host.clock.drift_ppm = h.at("drift_ppm").get<double>();
      host.clock.t0_ns = h.at("t0_ns").get<int64_t>();
      host.clock_state_file = h.value("clock_state_file", "");
      hosts->push_back(host);
    }
  } catch (const nlohmann::json::exception& e) {
    *error = path.string() + ": not a fixture truth file: " + e.what();
    return false;
  }
  return true;
}

bool WriteFixtureRun(const XSpaceFixtureOptions& options, const std::filesystem::path& logdir,
                     const std::string& run_name, const std::filesystem::path& truth_path,
                     FixtureRunSummary* summary, std::string* error) {
  std::vector<FixtureHost> hosts;
  if (!ResolveFixtureHosts(options, &hosts, error)) return false;
  *summary = FixtureRunSummary{};
  if (!CreateRunDirectory(logdir, run_name, &summary->run_dir, error)) return false;
  for (size_t i = 0; i < hosts.size(); ++i) {
    HostTrace trace;  // one host in memory at a time
    NodeClock clock;
    if (!OpenFixtureHostClock(hosts[i], &clock, error)) return false;
    FixtureHostBuilder(options, hosts[i], clock, static_cast<int>(i), &trace).Build();
    const auto path = summary->run_dir / (hosts[i].host + ".xplane.pb");
    if (!WriteXSpaceFile(trace, path, error)) return false;
    summary->files.push_back(path);
    summary->events += CountEvents(*trace.space);
  }
  return WriteTextAtomically(truth_path, FixtureTruth(options, hosts).dump(2) + "\n", error);
}

int64_t CountEvents(const xspace::XSpace& space) {
  int64_t n = 0;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) n += line.events_size();
  }
  return n;
}

}  // namespace chronolink::trace
