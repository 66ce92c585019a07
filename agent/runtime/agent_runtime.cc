#include "agent/runtime/agent_runtime.h"

#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/cluster/probe_graph.h"
#include "agent/estimate/max_margin_fit.h"
#include "agent/export/agent_metrics.h"
#include "agent/export/agent_stats_json.h"
#include "agent/export/prometheus_text.h"
#include "agent/probe/peer_sessions.h"
#include "agent/runtime/periodic_tasks.h"
#include "agent/runtime/run_as.h"
#include "agent/runtime/socket_transport.h"
#include "common/atomic_output_file.h"

namespace chronolink {

namespace {

// Every wake-up costs a system call or two: the loop wakes for the probes
// and otherwise no more than ten times a second.
constexpr int64_t kMaxSleepNs = 100'000'000;       // bounds every wait of the loop
constexpr int64_t kWindowCheckNs = 100'000'000;
constexpr int64_t kPeerStepLeadNs = 500'000'000;  // see SetPeerStepSink
constexpr int64_t kProgressEveryNs = 10'000'000'000;
constexpr int64_t kMetricsEveryNs = 1'000'000'000;
constexpr int64_t kShutdownDrainNs = 100'000'000;  // collect the last follow-ups
constexpr int64_t kClusterCheckNs = 100'000'000;   // membership and clock-page refresh

FitClockMode FitMode(const AgentConfig& c) {
  return c.estimation.fit_on_raw ? FitClockMode::kRaw : FitClockMode::kRealtime;
}

}  // namespace

AgentRuntime::AgentRuntime(AgentConfig config)
    : config_(std::move(config)),
      clock_(config_.test_mode ? NodeClock(config_.virtual_clock) : NodeClock(), FitMode(config_)),
      cluster_(config_, clock_) {}

AgentRuntime::~AgentRuntime() {
  if (signal_fd_ >= 0) ::close(signal_fd_);
}

// Start-up in three steps, split where the privileges go (docs/security.md
// §5): what needs them, the drop itself, what must run without them.
bool AgentRuntime::Start(std::string* error) {
  RunAsPlan run_as;
  return StartPrivileged(&run_as, error) && HandOverAndDrop(run_as, error) && StartUnprivileged(run_as, error);
}

bool AgentRuntime::StartPrivileged(RunAsPlan* run_as, std::string* error) {
  if (config_.test_mode && !config_.virtual_clock_state_file.empty()) {
    // The test bed's node clock replaces the linear one before anything reads it.
    auto testbed = std::make_shared<TestbedNodeClock>();
    if (!testbed->Open(config_.virtual_clock_state_file, error)) return false;
    clock_ = FitClock(NodeClock(std::move(testbed)), FitMode(config_));
  }
  if (sodium_init() < 0) {
    *error = "libsodium failed to initialise";
    return false;
  }
  // Precise wake-ups for the 100 us probe spacing (default slack is 50 us).
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  epoch_ = NewSessionEpoch();

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal_fd_ = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd_ < 0) {
    *error = std::string("signalfd: ") + std::strerror(errno);
    return false;
  }

  // Whom to become once the privileged work is done: decided (and an
  // impossible drop refused) before anything is attached or bound.
  if (!PlanRunAs(config_, run_as, error)) return false;

  // The tap goes on before the socket is bound, so that every probe the
  // socket ever receives has passed the hooks.
  if (!tap_.Start(config_, error)) return false;
  hardware_.Start(tap_.devices());
  if (!socket_.Open(config_.listen_address, config_.listen_port, error, hardware_.active())) {
    return false;
  }
  const bool stamp_log = !config_.capture.stamp_log_path.empty();  // shows every source
  socket_.SetAlwaysSched(config_.capture.forced_source == StampSource::kSocketSched || stamp_log);
  // Peers' pilots only warm the path here: dropped before they wake us.
  if (!socket_.DropDatagramsOfLength(kPilotWireSize, error)) return false;
  return BuildEngine(error);
}

bool AgentRuntime::BuildEngine(std::string* error) {
  codec_ = std::make_unique<ProbeCodec>(config_.cluster.cluster_id, config_.key);
  transport_ = std::make_unique<SocketTransport>(socket_, clock_);
  ProbeEngineOptions eo;
  eo.node_id = config_.node_id;
  eo.cluster_id = config_.cluster.cluster_id;
  eo.epoch = epoch_;
  eo.probed_peers = config_.peers;
  eo.probe = config_.probe;
  eo.forced_source = config_.capture.forced_source;
  eo.every_socket_stamp = !config_.capture.stamp_log_path.empty();
  for (const ClusterNode& n : config_.cluster.nodes) {
    eo.members.insert(n.id);
    if (n.id == config_.node_id) continue;
    UdpEndpoint ep;
    if (!UdpEndpoint::Parse(n.address, n.port, &ep, error)) return false;
    transport_->AddPeer(n.id, ep);
  }

  for (uint32_t peer : config_.peers) EnsureWindows(peer);
  engine_ = std::make_unique<ProbeEngine>(
      eo, *codec_, *transport_,
      [this](uint32_t peer, const FullTuple& t) { windows_.at(peer)->OnTupleFinalized(t); },
      [this](uint32_t peer, int64_t ns) { windows_.at(peer)->OnPairSent(ns); });
  if (config_.estimation.fit_peer_probes) {
    // The peer's session's tuples go into our fit of the same edge, where we
    // probe that peer too (docs/estimator.md §11).
    engine_->SetMirrorSink([this](uint32_t peer, const FullTuple& t) {
      if (auto it = windows_.find(peer); it != windows_.end()) it->second->OnPeerTuple(t);
    });
  }
  engine_->SetPeerRemapSink([this](uint32_t peer, const FitClockRemap& remap, int64_t now) {
    if (auto it = windows_.find(peer); it != windows_.end()) it->second->OnPeerClockRemap(remap, now);
  });
  engine_->SetPeerStepSink([this](uint32_t peer, int64_t now) {
    // The peer noticed within a loop turn (<= 100 ms) and its notice took a
    // round trip: its step lies within kPeerStepLeadNs before now.
    if (auto it = windows_.find(peer); it != windows_.end()) it->second->OnClockStep(now - kPeerStepLeadNs, now);
  });
  return true;
}

// Everything privileged is done (tap attached, socket bound, PHC open): the
// clock page is created as we are (so a root start's page stays root's),
// the output directory handed to the user we become, then every privilege
// goes, for good, or the agent does not run. SO_TIMESTAMPING needs none;
// the tap's links and ring buffer are descriptors we keep.
bool AgentRuntime::HandOverAndDrop(const RunAsPlan& run_as, std::string* error) {
  return cluster_.OpenClockPage(error) && PrepareFilesForRunAs(config_, run_as, error) &&
         CarryOutRunAs(run_as, error);
}

// Every file from here on is created as the unprivileged user, and threads
// start only now (capabilities are per thread).
bool AgentRuntime::StartUnprivileged(const RunAsPlan& run_as, std::string* error) {
  EdgeRecordContext context;
  context.session_epoch = epoch_;
  if (config_.capture.forced_source != StampSource::kNone) {
    context.timestamp_policy = std::string(StampSourceName(config_.capture.forced_source));
  }
  if (config_.test_mode) context.test_clock = config_.virtual_clock;
  if (const TestbedNodeClock* testbed = clock_.node().testbed()) context.test_clock_state = testbed->path();
  if (!writer_.Open(config_.output_dir, context, error) ||
      !timebase_writer_.Open(config_.output_dir, config_.node_id, epoch_, error)) {
    *error += RunAsFileHint(run_as);
    return false;
  }
  if (!config_.capture.stamp_log_path.empty()) {
    if (!stamp_log_.Open(config_.capture.stamp_log_path, error)) {
      *error += RunAsFileHint(run_as);
      return false;
    }
    engine_->SetStampObserver([this](const PacketKey& key, bool tx, const ProbeStamp& s) {
      stamp_log_.Add(key, tx, s, clock_.Now());
    });
  }

  if (!cluster_.Start(error)) return false;
  if (!config_.metrics_address.empty()) {
    if (!metrics_.Start(config_.metrics_address, config_.metrics_port, error)) return false;
    spdlog::info("metrics at http://{}:{}/metrics", config_.metrics_address, metrics_.port());
  }

  spdlog::info("node {} session {:x} listening on {}:{}, probing {} peer(s), writing {}",
               config_.node_id, epoch_, config_.listen_address, socket_.bound_port(),
               config_.peers.size(), writer_.path());
  if (config_.test_mode && !config_.virtual_clock.IsIdentity()) {
    spdlog::warn("TEST MODE: virtual clock offset {} ns, drift {} ppm, t0 {} ns",
                 config_.virtual_clock.offset_ns, config_.virtual_clock.drift_ppm,
                 config_.virtual_clock.t0_ns);
  }
  return true;
}

void AgentRuntime::EnsureWindows(uint32_t peer) {
  if (windows_.count(peer) != 0) return;
  WindowEstimatorOptions wo;
  wo.purity_tolerance_ns = config_.estimation.purity_tolerance_ns;
  wo.min_points_per_side = config_.estimation.min_points_per_side;
  wo.fit_every_probe = config_.estimation.fit_every_probe;
  wo.max_margin.floor_points = config_.estimation.floor_points;
  WindowScatterOptions so;
  so.path_asymmetry_ns = config_.estimation.path_asymmetry_ns;
  windows_[peer] = std::make_unique<EdgeWindows>(
      config_.node_id, peer, config_.estimation.window_ns, config_.estimation.source_classes, wo, so,
      config_.estimation.FitSpans(), EdgeDriftHistoryOptions{.windows = config_.estimation.drift_windows});
  // A window centred before our first clock reading (the one the agent
  // started in) has no REALTIME there to map it back with: its point would
  // be the first reading's rate carried back, 204 µs wrong in a 5-node run
  // of 2026-12-05 whose agent started in chronyd's -730 ppm start-up slew.
  windows_[peer]->CloseWithoutRecordBefore(clock_.FirstRead());
}

void AgentRuntime::ApplyMembership(const Membership& membership, int64_t now_ns) {
  std::set<uint32_t> ids{config_.node_id};
  for (const Member& m : membership.members) {
    ids.insert(m.id);
    if (m.id == config_.node_id) continue;
    UdpEndpoint ep;
    std::string why;
    if (!UdpEndpoint::Parse(m.address, m.port, &ep, &why)) {
      spdlog::warn("member {} has an unusable address: {}", m.id, why);
      continue;
    }
    // etcd vouches for no address: a new one is probed slowly until an
    // authentic probe comes from it (a cluster file is the operator's word).
    if (transport_->AddPeer(m.id, ep) && config_.cluster_settings.backend == CoordinationBackend::kEtcd) {
      engine_->RequireAddressConfirmation(m.id);
      spdlog::info("member {} at {}: probing at one pair a second until an authentic probe comes from there",
                   m.id, ep.ToString());
    }
  }
  std::vector<uint32_t> peers = config_.peers;
  if (membership.neighbours_only) {
    // The leader built the graph from every member: ours are all of these.
    peers.assign(ids.begin(), ids.end());
    std::erase(peers, config_.node_id);
  } else if (!config_.cluster_settings.peers_explicit) {
    ProbeGraphOptions go;
    go.k = config_.cluster_settings.probe_k;
    peers = ProbeGraph::Build(std::vector<uint32_t>(ids.begin(), ids.end()), go).PeersOf(config_.node_id);
  }
  if (peers != engine_->probed_peers()) {
    std::string list;
    for (uint32_t p : peers) list += (list.empty() ? "" : ",") + std::to_string(p);
    if (membership.neighbours_only) {
      spdlog::info("membership: {} peer(s) in the leader's probe graph; probing {}", peers.size(),
                   list.empty() ? "nobody" : list);
    } else {
      spdlog::info("membership: {} member(s); probing {}", ids.size(), list.empty() ? "nobody" : list);
    }
  }
  engine_->SetMembership(ids, peers, now_ns);
  for (uint32_t p : peers) EnsureWindows(p);
}

std::optional<FitWindowClock> AgentRuntime::WindowClock(int64_t window_start_ns) const {
  const int64_t centre = window_start_ns + config_.estimation.window_ns / 2;
  const std::optional<FitAnchor> anchor = clock_.AnchorFor(centre);
  if (!anchor) return std::nullopt;
  // The leader maps back through our knots over the window where we have
  // them (exact where the daemon bent REALTIME inside it), else the point.
  const int64_t raw_from = anchor->RawOfFit(window_start_ns);
  const int64_t raw_to = anchor->RawOfFit(window_start_ns + config_.estimation.window_ns);
  return FitWindowClock{*anchor, clock_.PointAt(centre), timebase_knots_.Covering(raw_from, raw_to, kMaxSummaryKnots)};
}

void AgentRuntime::CloseWindows(int64_t now_ns, bool shutting_down) {
  if (windows_.empty()) return;
  const EdgeWindows& any = *windows_.begin()->second;  // every edge's windows share one grid
  const int64_t closed_before = shutting_down ? any.ClosableAtEnd(now_ns)
                                              : any.ClosableBefore(now_ns - config_.estimation.window_grace_ns);
  engine_->FinalizeTuples(now_ns, closed_before);
  std::vector<EdgeWindowRecord> records;
  size_t unrecorded = 0;
  for (auto& [peer, w] : windows_) unrecorded += w->CloseUpTo(closed_before, &records);
  if (unrecorded != 0) {
    spdlog::info(
        "{} edge window(s) centred before the agent's first clock reading not written (no REALTIME there to "
        "map them back with)",
        unrecorded);
  }
  // Our REALTIME at each window's centre on the fit clock, which x0 and the
  // estimate are on: edges.jsonl and the leader map back to REALTIME with it.
  // Every edge's windows share one grid: one per window, not per edge.
  std::map<int64_t, std::optional<FitWindowClock>> by_window;
  std::vector<std::optional<FitWindowClock>> fits;
  for (const EdgeWindowRecord& r : records) {
    auto [it, fresh] = by_window.try_emplace(r.window_start_ns);
    if (fresh) it->second = WindowClock(r.window_start_ns);
    fits.push_back(it->second);
  }
  for (size_t i = 0; i < records.size(); ++i) {
    const EdgeWindowRecord& r = records[i];
    std::string error;
    if (!writer_.Write(r, fits[i], &error)) {
      if (!write_failed_) spdlog::error("{}", error);
      write_failed_ = true;
      continue;
    }
    ++windows_written_;
    if (r.estimate.estimator != EstimatorKind::kNone) ++windows_estimated_;
    last_records_[{r.peer, r.source_class}] = r;
    AdaptCadence(r, now_ns);
    if (r.span_changed && r.span_evidence) LogSpanChange(r);
    spdlog::debug("window {} peer {} {}: {} beta {:.1f} ns alpha {:.3f} ppm +/- {:.1f} ns",
                  r.window_start_ns, r.peer, SourceClassName(r.source_class),
                  EstimatorKindName(r.estimate.estimator), r.estimate.fit.beta_ns,
                  r.estimate.fit.alpha * 1e6, r.estimate.fit.uncertainty_ns);
  }
  cluster_.OnWindowsClosed(records, fits, epoch_);
}

void AgentRuntime::LogSpanChange(const EdgeWindowRecord& r) {
  const FitSpanEvidence& e = *r.span_evidence;
  spdlog::info(
      "peer {} {}: fit span now {:.0f} s (a window's own fit errs {:.1f} ns, wander {:.2f} ns/sqrt(s), "
      "beyond doubt {:.2f}, over {} windows)",
      r.peer, SourceClassName(r.source_class), static_cast<double>(e.best_span_ns) / 1e9, e.window_noise_ns,
      e.wander_ns_per_sqrt_s, e.wander_lower_ns_per_sqrt_s, e.windows);
}

// The windows of the first configured source class (the one the cluster
// uses) pace their edge; only edges we probe have a cadence of ours.
void AgentRuntime::AdaptCadence(const EdgeWindowRecord& r, int64_t now_ns) {
  const ProbeSettings& p = config_.probe;
  if (!p.adaptive || r.source_class != config_.estimation.source_classes.front()) return;
  if (engine_->IntervalOf(r.peer) == 0) return;
  auto it = cadence_.find(r.peer);
  if (it == cadence_.end()) {
    ProbeCadenceOptions o;
    o.slowest_interval_ns = p.interval_ns;
    o.fastest_interval_ns = p.fastest_interval_ns;
    o.target_pure_points = p.target_pure_points;
    o.target_uncertainty_ns = p.target_uncertainty_ns;
    o.every_probe_fit = config_.estimation.fit_every_probe;
    it = cadence_.emplace(r.peer, ProbeCadence(o)).first;
  }
  std::string why;
  if (!it->second.OnWindow(r.estimate, r.clock_step, &why)) return;
  engine_->SetInterval(r.peer, it->second.interval_ns(), now_ns);
  spdlog::debug("peer {}: probing every {:.2f} ms: {}", r.peer, it->second.interval_ns() / 1e6, why);
}

void AgentRuntime::LogProgress(int64_t now_ns) {
  const EngineCounters& c = engine_->counters();
  uint64_t sent = 0, received = 0;
  for (const auto& [peer, pc] : engine_->peer_counters()) {
    sent += pc.packets_sent;
    received += pc.packets_received;
  }
  spdlog::info("{} windows written ({} estimated); packets sent {} received {}; rejected {}; "
               "tx stamps {} ({} unmatched)",
               windows_written_, windows_estimated_, sent, received, c.decode.rejected(),
               c.tx_stamps, c.tx_stamps_unmatched);
}

void AgentRuntime::WriteStats(bool final) {
  AgentStatsSnapshot s;
  s.node_id = config_.node_id;
  s.session_epoch = epoch_;
  s.final = final;
  s.uptime_s = static_cast<double>(ReadClockNs(CLOCK_MONOTONIC) - start_monotonic_ns_) / 1e9;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  s.cpu_user_s = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec / 1e6;
  s.cpu_system_s = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec / 1e6;
  s.windows_written = windows_written_;
  s.windows_estimated = windows_estimated_;
  s.clock_steps = clock_steps_;
  s.floor_candidate_mismatches = FloorCandidateMismatches();
  s.fit_clock = FitClockJson(clock_);
  s.counters = engine_->counters();
  s.socket_receive_errors = socket_.receive_errors();
  s.socket_receive_calls = socket_.receive_calls();
  s.socket_error_queue_calls = socket_.error_queue_calls();
  s.peers = engine_->peer_counters();
  for (const auto& [peer, pc] : s.peers) s.probe_interval_ns[peer] = engine_->IntervalOf(peer);
  s.ebpf_tap = tap_.Stats();
  s.hardware_timestamping = hardware_.Stats();
  s.cluster = cluster_.Stats();
  // Whole or not at all, and never through a file another user left at a
  // guessable temporary name (mkstemp, then rename).
  std::string error;
  if (!WriteFileAtomically(std::filesystem::path(config_.output_dir) / "agent_stats.json",
                           AgentStatsJson(s).dump(2) + "\n", &error)) {
    spdlog::warn("agent_stats.json not written: {}", error);
  }
}

std::string AgentRuntime::RenderMetrics() const {
  AgentMetricsSnapshot snap;
  snap.node_id = config_.node_id;
  snap.last_records = &last_records_;
  snap.counters = engine_->counters();
  snap.peers = engine_->peer_counters();
  for (const auto& [peer, pc] : snap.peers) snap.probe_interval_ns[peer] = engine_->IntervalOf(peer);
  snap.windows_written = windows_written_;
  snap.clock_steps = clock_steps_;
  const MetricsRefusalCounts refused = metrics_.refused();
  for (size_t i = 0; i < kNumMetricsRefusals; ++i) {
    snap.metrics_requests_refused.emplace_back(MetricsRefusalName(static_cast<MetricsRefusal>(i)), refused[i]);
  }
  PrometheusText t;
  AppendAgentMetrics(snap, t);
  cluster_.AppendMetrics(t);
  t.Family("chronolink_ebpf_tap_up", "1 when the eBPF timestamp tap is attached", "gauge");
  t.Sample("chronolink_ebpf_tap_up", {{"node", std::to_string(config_.node_id)}}, tap_.running() ? 1 : 0);
  return t.str();
}

void AgentRuntime::OnClockStep(int64_t before, int64_t after, int64_t realtime_before, int64_t realtime_after) {
  const int64_t step = step_detector_.last_step_ns();
  ++clock_steps_;
  spdlog::warn("the clock stepped by {:+.6f} s: discarding the windows of every edge around it, telling the peers, "
               "and withdrawing the clock page until a solution after the step",
               static_cast<double>(step) / 1e9);
  // The fit clock on RAW does not take a step of REALTIME (its deadlines
  // stay), but the stamps around it may have been mapped across it; on
  // REALTIME, or a linear virtual clock (its own RAW), it does. What F did
  // between the two turns, less what REALTIME did besides the step:
  const int64_t fit_step = (after - before) - (realtime_after - realtime_before) + step;
  DiscardAroundStep(before, after, fit_step);
  cluster_.OnClockStep(realtime_before, realtime_after);
}

void AgentRuntime::DiscardAroundStep(int64_t before, int64_t after, int64_t step_ns) {
  for (auto& [peer, w] : windows_) w->OnClockStep(before, after);
  engine_->OnClockStep(step_ns, after);
}

// The start's check found F's rate off REALTIME's mean and gave F the mean
// from here on, F keeping its value (fit_clock.h): every edge fits across
// the bend, and every peer is told, so that its fits of our stamps do too.
void AgentRuntime::OnFitClockRemap(const FitClockRemap& remap) {
  const FitPoint here = clock_.PointAt(remap.at_fit_ns);
  spdlog::info(
      "the fit clock's rate ran {:+.3f} ppm off REALTIME's mean rate over the last baseline (taken during a "
      "daemon's start-up slews; F {:+.3f} ms from REALTIME): F runs at {:+.3f} ppm from now on, once at the "
      "start, without a step; the fits across the bend take it into account, and the peers are told",
      static_cast<double>(remap.rate_before_fine - remap.rate_after_fine) / 1e9,
      static_cast<double>(here.fit_ns - here.realtime_ns) / 1e6, static_cast<double>(remap.rate_after_fine) / 1e9);
  for (auto& [peer, w] : windows_) w->OnNodeClockRemap(remap);
  if (engine_) engine_->AnnounceClockRemap(remap, remap.at_fit_ns);
}

void AgentRuntime::SampleClock(int64_t monotonic_ns) {
  const FitClockPoll p = clock_.Poll(monotonic_ns);
  if (p.sample) {
    timebase_knots_.Add(*p.sample);
    last_sample_raw_ns_ = p.sample->raw_ns;
  }
  if (!p.reanchored) return;
  if (p.remap) {
    OnFitClockRemap(*p.remap);
    return;
  }
  // F jumped back to REALTIME: a step of the clock every window is on.
  const double fit_off_ms = static_cast<double>(p.fit_before_ns - p.fit_after_ns) / 1e6;
  const double rate_ppm = static_cast<double>(p.rate_after_fine) / 1e9;
  const double rate_off_ppm = static_cast<double>(p.rate_before_fine - p.rate_after_fine) / 1e9;
  if (p.at_start_check) {
    // The start's check, F too far from REALTIME to bend (fit_clock.h).
    spdlog::info(
        "the fit clock's rate ran {:+.3f} ppm off REALTIME's mean rate over the last baseline (taken during a "
        "daemon's start-up slews), and F is {:+.3f} ms from REALTIME, more than a quarter of the divergence "
        "allowed: anchored again at REALTIME, at {:+.3f} ppm, once at the start; the windows around it are "
        "discarded as at a clock step",
        rate_off_ppm, fit_off_ms, rate_ppm);
  } else {
    spdlog::info(
        "the fit clock had left REALTIME by {:+.3f} ms (a daemon's slew or retrained frequency when it was "
        "anchored, {:+.3f} ppm off): anchored again, at REALTIME's mean rate over the last minute, "
        "{:+.3f} ppm; the windows around it are discarded as at a clock step",
        fit_off_ms, rate_off_ppm, rate_ppm);
  }
  if (engine_) DiscardAroundStep(p.fit_before_ns, p.fit_after_ns, p.fit_after_ns - p.fit_before_ns);
  last_now_ = p.fit_after_ns;
}

namespace {
constexpr int64_t kKeepKnotsNs = 60'000'000'000;
}  // namespace

void AgentRuntime::WriteTimebase() {
  std::string error;
  // Knots stay as long as a window that closes can still need them: a
  // window closes seconds after its end, once the fit spans around it
  // (up to 12 s) have their data. A minute of knots is a hundred or so.
  timebase_knots_.DropBefore(last_sample_raw_ns_ - kKeepKnotsNs);
  if (!timebase_writer_.WriteNew(timebase_knots_, &error)) {
    if (!write_failed_) spdlog::error("{}", error);
    write_failed_ = true;
  }
}

int AgentRuntime::Run() {
  start_monotonic_ns_ = ReadClockNs(CLOCK_MONOTONIC);
  const int64_t stop_at = config_.duration_ns ? start_monotonic_ns_ + *config_.duration_ns : -1;
  PeriodicTasks tasks;
  tasks.Add(kWindowCheckNs, 0, [this](int64_t now) {
    CloseWindows(now, false);
    stamp_log_.Flush(now);
    WriteTimebase();
  });
  tasks.Add(kClusterCheckNs, 0, [this](int64_t now) {
    if (auto members = cluster_.TakeMembershipChange()) ApplyMembership(*members, now);
    cluster_.RefreshClockPage();
  });
  if (!config_.metrics_address.empty()) {
    tasks.Add(kMetricsEveryNs, 0, [this](int64_t) { metrics_.Update(RenderMetrics()); });
  }
  tasks.Add(kProgressEveryNs, start_monotonic_ns_ + kProgressEveryNs, [this](int64_t now) {
    LogProgress(now);
    WriteStats(false);
  });
  int exit_code = 0;

  for (;;) {
    const int64_t mono_before = ReadClockNs(CLOCK_MONOTONIC);
    const int64_t real = ReadClockNs(CLOCK_REALTIME);
    const int64_t mono = ReadClockNs(CLOCK_MONOTONIC);
    SampleClock(mono);
    const int64_t now = clock_.Ingest(real);
    // A step of REALTIME (a test bed's virtual clock steps too), which the
    // fit clock does not take: the stamps around it may have been mapped
    // across it, and the clock page maps REALTIME.
    const int64_t realtime = clock_.node().Ingest(real);
    if (step_detector_.Update(mono_before, realtime, mono)) OnClockStep(last_now_, now, last_realtime_, realtime);
    last_now_ = now;
    last_realtime_ = realtime;
    if (stop_at >= 0 && mono >= stop_at) {
      spdlog::info("configured duration reached");
      break;
    }
    int64_t next = engine_->Poll(now);
    // TX stamps of what Poll just sent are usually queued already: read
    // them now, not on a POLLERR wake-up of their own.
    if (socket_.stamped_since_drain() > 0) {
      PumpSocket(socket_, clock_, *engine_, false, true, &hardware_, transport_.get());
    }
    tasks.RunDue(mono, now);

    const int64_t sleep_ns = std::clamp<int64_t>(next - clock_.Now(), 0, kMaxSleepNs);
    pollfd fds[2] = {{socket_.fd(), POLLIN, 0}, {signal_fd_, POLLIN, 0}};
    const timespec ts{static_cast<time_t>(sleep_ns / 1'000'000'000),
                      static_cast<long>(sleep_ns % 1'000'000'000)};
    const int n = ppoll(fds, 2, &ts, nullptr);
    if (n < 0 && errno != EINTR) {
      spdlog::error("ppoll: {}", std::strerror(errno));
      exit_code = 1;
      break;
    }
    // A sample after the wake-up, so that the stamps read now lie between
    // two samples rather than up to a sleep past the newest (clock/fit_clock.h).
    SampleClock(ReadClockNs(CLOCK_MONOTONIC));
    // eBPF records first: a datagram's RX stamps from XDP and tc are in the
    // ring before the datagram reaches the socket.
    tap_.Pump(*engine_, clock_);
    // Error-queue TX stamps show up as POLLERR, datagrams as POLLIN.
    hardware_.Sample(mono);
    PumpSocket(socket_, clock_, *engine_, (fds[0].revents & POLLIN) != 0,
               (fds[0].revents & POLLERR) != 0, &hardware_, transport_.get());
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si;
      if (::read(signal_fd_, &si, sizeof(si)) == sizeof(si)) {
        spdlog::info("received {}, shutting down", strsignal(static_cast<int>(si.ssi_signo)));
      }
      break;
    }
  }

  // Clean shutdown: deliver our last TX stamps, collect the peers' for a
  // moment, then write every window that has ended.
  engine_->Shutdown(clock_.Now());
  const int64_t drain_until = ReadClockNs(CLOCK_MONOTONIC) + kShutdownDrainNs;
  while (ReadClockNs(CLOCK_MONOTONIC) < drain_until) {
    pollfd fd{socket_.fd(), POLLIN, 0};
    const timespec ts{0, 5'000'000};
    ppoll(&fd, 1, &ts, nullptr);
    tap_.Pump(*engine_, clock_);
    PumpSocket(socket_, clock_, *engine_, true, true, &hardware_, transport_.get());
  }
  CloseWindows(clock_.Now(), true);
  // The knots to the last sample: a trace's last seconds follow the clock too.
  timebase_knots_.EndOpenSegment();
  WriteTimebase();
  cluster_.Stop();
  stamp_log_.Close();
  LogProgress(clock_.Now());
  WriteStats(true);
  metrics_.Stop();
  tap_.Close();
  writer_.Close();
  if (write_failed_) exit_code = 1;
  return exit_code;
}

}  // namespace chronolink
