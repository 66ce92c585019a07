#include "agent/runtime/cluster_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "agent/cluster/clock_markers.h"
#include "agent/cluster/edge_estimate_of.h"
#include "agent/export/cluster_metrics.h"
#include "clock/clock_trajectory.h"

namespace chronolink {

namespace {

constexpr auto kLeaderTick = std::chrono::milliseconds(100);
// The page's uncertainty grows by this much per ns of extrapolation: 0.1 ppm
// covers the wander of a crystal over a few windows (docs/formats.md).
constexpr int64_t kPageGrowthPpt = 100'000;

// The window's anchor and knots, where the agent kept them.
void AttachKnots(const std::optional<FitWindowClock>& fit, WindowSummary* w) {
  if (!fit || !fit->knots) return;
  w->prober_anchor = fit->anchor;
  w->prober_knots = fit->knots;
}

}  // namespace

ClusterLeaderOptions LeaderOptionsFor(const AgentConfig& c) {
  const ClusterSettings& cs = c.cluster_settings;
  ClusterLeaderOptions o;
  o.solver.reference_node = cs.reference_node;
  o.step_ns = c.estimation.window_ns;
  // Two windows either side: an instant falls back on a neighbour's window
  // when its own is missing.
  o.solver.validity_horizon_ns = 2 * c.estimation.window_ns;
  o.ready_after_ns = SolveLagNs(c);
  o.retention_ns = cs.retention_ns;
  // A new leader solves back over the gap its predecessor left: that one
  // had solved up to its death less the solve's lag, and a successor takes
  // office within two lease periods of the death (etcd's lease; the static
  // backend's channel sees it sooner). All of the gap in one turn; but not
  // back to instants whose windows the retention has already dropped,
  // which would be solved with every node unreachable.
  const int64_t takeover_ns = TakeoverNs(c);
  o.backfill_ns = std::min(SolveLagNs(c) + takeover_ns, cs.retention_ns - o.solver.validity_horizon_ns);
  o.max_instants_per_call =
      std::max(o.max_instants_per_call, static_cast<int>(takeover_ns / c.estimation.window_ns) + 2);
  o.late_settle_ns = std::max<int64_t>(1'000'000'000, c.estimation.window_ns / 2);
  o.page_drift.span_ns = cs.page_drift_span_ns;
  // The agents' longest centred span: their fits' miss of a node's wander
  // is largest there (node_wander_meter.h).
  o.node_wander_fit_span_ns = c.estimation.FitSpan();
  return o;
}

ClusterService::ClusterService(const AgentConfig& config, const FitClock& clock)
    : config_(config), clock_(clock), leader_(config.node_id, LeaderOptionsFor(config)) {}

ClusterService::~ClusterService() { Stop(); }

bool ClusterService::OpenClockPage(std::string* error) {
  if (page_open_ || config_.cluster_settings.clock_page_path.empty()) return true;
  if (!page_.Open(config_.cluster_settings.clock_page_path, config_.node_id, error)) return false;
  page_open_ = true;
  return true;
}

bool ClusterService::Start(std::string* error) {
  if (!OpenClockPage(error)) return false;
  coordinator_ = MakeCoordinator(CoordinationOptionsFrom(config_));
  if (coordinator_ == nullptr) return true;
  if (!coordinator_->Start(error)) return false;
  leader_thread_ = std::thread([this] { LeaderLoop(); });
  return true;
}

void ClusterService::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (leader_thread_.joinable()) leader_thread_.join();
  if (coordinator_) coordinator_->Stop();
  offsets_.Close();
  cluster_timebase_.Close();
  if (page_open_) page_.Close();
  page_open_ = false;
}

void ClusterService::OnWindowsClosed(std::span<const EdgeWindowRecord> records,
                                     std::span<const std::optional<FitWindowClock>> fits, uint64_t session) {
  if (coordinator_ == nullptr) return;
  const SourceClass wanted = config_.estimation.source_classes.front();
  std::vector<WindowSummary> out;
  for (size_t i = 0; i < records.size(); ++i) {
    const EdgeWindowRecord& r = records[i];
    if (r.source_class != wanted) continue;
    if (r.clock_step) {
      // No estimate, but the leader must know: this edge's estimates on
      // either side of it describe different clocks.
      out.push_back(StepMarkerOf(r.node, r.peer, session, r.window_start_ns, r.x0_ns));
      // Its knots still go to the leader's cluster-timebase.jsonl (they are
      // RAW and REALTIME, which a re-anchor of F does not touch), so that
      // the trace tools can cross the gap; the leader maps nothing with them.
      AttachKnots(fits[i], &out.back());
      continue;
    }
    const std::optional<EdgeEstimate> estimate = EdgeEstimateOf(r);
    if (!estimate) {
      // A bend in a window without an estimate: the whole window, as a
      // step, which a leader of any version bars.
      if (!r.clock_remaps_ns.empty()) out.push_back(StepMarkerOf(r.node, r.peer, session, r.window_start_ns, r.x0_ns));
      continue;
    }
    WindowSummary w;
    w.estimate = *estimate;
    w.session = session;
    w.window_start_ns = r.window_start_ns;
    w.estimator = std::string(EstimatorKindName(r.estimate.estimator));
    if (fits[i]) w.prober_clock = fits[i]->point;
    AttachKnots(fits[i], &w);
    // A fit clock bent here (docs/clocks.md "A new rate at the start"): the
    // estimate stands, but one from before the bend, carried past it along
    // its slope, would not. The marker goes first (clock_markers.h).
    for (int64_t bend : r.clock_remaps_ns) out.push_back(BendMarkerOf(w, bend));
    out.push_back(std::move(w));
  }
  if (!out.empty()) coordinator_->PublishWindows(out);
}

std::optional<Membership> ClusterService::TakeMembershipChange() {
  if (coordinator_ == nullptr) return std::nullopt;
  uint64_t version = 0;
  Membership membership = coordinator_->Members(&version);
  if (members_seen_ && version == members_version_) return std::nullopt;
  members_seen_ = true;
  members_version_ = version;
  // The cluster's size, where it is known: a follower's neighbours are not.
  if (membership.cluster_size != 0) members_count_ = membership.cluster_size;
  return membership;
}

void ClusterService::RefreshClockPage() {
  if (coordinator_ == nullptr) return;
  uint64_t version = 0;
  std::optional<OffsetsSnapshot> s = coordinator_->LatestOffsets(&version);
  if (!s || version == offsets_version_) {
    FollowOwnDisciplineOnPage();
    return;
  }
  offsets_version_ = version;
  latest_ = std::move(s);
  if (!page_open_) return;
  const NodeSolution* mine = latest_->Find(config_.node_id);
  if (mine == nullptr) return;
  ClockMapping m = MappingFromSolution(*mine, latest_->reference_instant_ns, SolutionLifetimeNs(config_),
                                       kPageGrowthPpt);
  // Solved on windows from before our clock stepped: not ours any more.
  if (m.valid && m.local_ref_ns < page_held_until_ns_) return;
  solved_on_page_.reset();
  if (m.valid && mine->discipline) solved_on_page_ = SolvedOnPage{m, *mine->discipline};
  PublishOnPage(m);
}

void ClusterService::FollowOwnDisciplineOnPage() {
  // Fitting in REALTIME there is no discipline apart from the line.
  if (!page_open_ || !solved_on_page_ || clock_.mode() != FitClockMode::kRaw) return;
  // Along the fit clock the solution was mapped on, also after F was anchored
  // again (a new anchor moved F, and so REALTIME − F, by its jump): before,
  // the page stood still then until solutions of the new anchor came, 15-20 s
  // under chronyd's start-up slews.
  const SolvedOnPage& solved = *solved_on_page_;
  const std::optional<FitAnchor> solved_anchor = clock_.AnchorFor(solved.mapping.local_ref_ns - solved.discipline.d_ns);
  const std::optional<FitAnchor> current = clock_.anchor();
  if (!solved_anchor || !current) return;
  const FitPoint now = PointOnAnchor(clock_.PointAt(clock_.Now()), *current, *solved_anchor);
  const FitDiscipline d{now.realtime_ns - now.fit_ns, static_cast<double>(now.rate_fine) / kFinePerNs};
  PublishOnPage(FollowOwnDiscipline(solved.mapping, solved.discipline, now.realtime_ns, d));
}

void ClusterService::OnClockStep(int64_t before_ns, int64_t after_ns) {
  const int64_t window = config_.estimation.window_ns;
  const int64_t later = std::max(before_ns, after_ns);
  // The end of the last window the step spoiled, and one more: the
  // leader's solutions up to there still lean on windows from before it.
  page_held_until_ns_ = (later / window + 1) * window + window;
  solved_on_page_.reset();
  if (!page_open_) return;
  ClockMapping none;
  none.node_id = config_.node_id;
  PublishOnPage(none);
}

void ClusterService::PublishOnPage(ClockMapping m) {
  // Read together, so that readers can tell a step since (ClockSteppedSince).
  const NodeClock::WithMonotonic now = clock_.node().NowWithMonotonic();
  m.published_local_ns = now.node_ns;
  m.published_monotonic_ns = now.monotonic_ns;
  page_.Publish(m);
}

void ClusterService::WriteClusterTimebase() {
  std::string error;
  // As columns where offsets.jsonl is (from 1 000 nodes by default), judged
  // before the first solve by the members registered.
  const bool columns =
      OffsetsAsColumns(config_.cluster_settings.offsets_form, std::max(solved_nodes_, members_count_.load()));
  if (!cluster_timebase_.WriteKnots(timebase_relay_.Take(), columns, &error) && !write_failed_.exchange(true)) {
    spdlog::error("{}", error);
  }
}

// The leader's two files that grow with the cluster's size.
FileRotation ClusterService::OutputRotation() const {
  return FileRotation{.max_bytes = config_.cluster_settings.offsets_rotate_bytes};
}

void ClusterService::LeaderLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    LeadOnce();
    lock.lock();
    wake_.wait_for(lock, kLeaderTick, [this] { return stopping_; });
  }
}

void ClusterService::LeadOnce() {
  const int64_t now = clock_.Now();
  const bool leader = coordinator_->IsLeader();
  if (leader && !leader_.in_office()) {
    spdlog::info("this node (id {}) leads the cluster: solving offsets against {}", config_.node_id,
                 config_.cluster_settings.reference_node
                     ? "node " + std::to_string(*config_.cluster_settings.reference_node)
                     : std::string("the mean of all nodes"));
    leader_.TakeOffice(now);
    if (!offsets_.is_open()) {
      std::string error;
      if (!offsets_.Open(config_.output_dir, &error, OutputRotation(), config_.cluster_settings.offsets_form)) {
        spdlog::error("{}", error);
      }
    }
    if (!cluster_timebase_.is_open()) {
      std::string error;
      if (!cluster_timebase_.Open(config_.output_dir, config_.node_id, 0, &error, kClusterTimebaseFile,
                                  OutputRotation())) {
        spdlog::error("{}", error);
      }
    }
    timebase_relay_.Reset();
  } else if (!leader && leader_.in_office()) {
    spdlog::info("this node no longer leads the cluster");
    leader_.LeaveOffice();
  }
  // A follower's inbox is empty; a leader's holds everyone's windows.
  const std::vector<WindowSummary> inbox = coordinator_->TakeLeaderInbox();
  if (leader_.in_office()) {
    leader_.Add(inbox, now);
    for (const WindowSummary& w : inbox) timebase_relay_.Add(w);
    WriteClusterTimebase();
    for (const OffsetsSnapshot& s : leader_.SolveDue(now)) {
      solved_nodes_ = s.nodes.size();
      std::string error;
      if (offsets_.is_open() && !offsets_.Write(s, &error) && !write_failed_.exchange(true)) {
        spdlog::error("{}", error);
      }
      coordinator_->PublishOffsets(s);
      int reachable = 0;
      for (const NodeSolution& n : s.nodes) reachable += n.reachable ? 1 : 0;
      spdlog::debug("solved t={} ({}): {} of {} nodes reachable", s.reference_instant_ns,
                    s.recomputed ? "recomputed" : "on time", reachable, s.nodes.size());
    }
  }
  std::lock_guard<std::mutex> lock(stats_mutex_);
  leader_stats_ = leader_.stats();
  leading_ = leader_.in_office();
}

void ClusterService::AppendMetrics(PrometheusText& t) const {
  if (coordinator_ == nullptr) return;
  ClusterMetricsSnapshot snap;
  snap.node_id = config_.node_id;
  snap.status = coordinator_->Status();
  snap.latest = latest_ ? &*latest_ : nullptr;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    snap.leader = leader_stats_;
  }
  AppendClusterMetrics(snap, t);
}

nlohmann::ordered_json ClusterService::Stats() const {
  nlohmann::ordered_json j;
  if (coordinator_ == nullptr) {
    j["coordination"] = "none";
    return j;
  }
  const CoordinatorStatus st = coordinator_->Status();
  j["coordination"] = st.backend;
  j["connected"] = st.connected;
  j["is_leader"] = st.is_leader;
  j["leader"] = st.leader ? nlohmann::ordered_json(*st.leader) : nlohmann::ordered_json(nullptr);
  j["leader_changes"] = st.leader_changes;
  j["windows_published"] = st.windows_published;
  j["windows_delivered"] = st.windows_delivered;
  j["windows_pending"] = st.windows_pending;
  j["windows_dropped"] = st.windows_dropped;
  j["offsets_received"] = st.offsets_received;
  j["peers_received"] = st.peers_received;
  j["errors"] = st.errors;
  j["refused"] = st.refused;
  j["refused_by_reason"] = st.refused_by_reason;
  if (!st.channel.empty()) j["channel"] = st.channel;
  std::lock_guard<std::mutex> lock(stats_mutex_);
  j["leader_windows_received"] = leader_stats_.windows_received;
  j["leader_windows_duplicate"] = leader_stats_.windows_duplicate;
  j["leader_windows_late"] = leader_stats_.windows_late;
  j["leader_windows_expired"] = leader_stats_.windows_expired;
  j["leader_windows_future"] = leader_stats_.windows_future;
  j["leader_clock_steps"] = leader_stats_.clock_steps;
  j["leader_instants_solved"] = leader_stats_.instants_solved;
  j["leader_instants_recomputed"] = leader_stats_.instants_recomputed;
  j["leader_instants_solved_early"] = leader_stats_.instants_solved_early;
  j["leader_instants_skipped"] = leader_stats_.instants_skipped;
  j["leader_instants_empty"] = leader_stats_.instants_empty;
  j["leader_nodes_unmapped"] = leader_stats_.nodes_unmapped;
  j["leader_instants_unmapped"] = leader_stats_.instants_unmapped;
  j["leader_mapped_by_knots"] = leader_stats_.mapped_by_knots;
  j["leader_mapped_by_point"] = leader_stats_.mapped_by_point;
  j["leader_last_solve_ms"] = leader_stats_.last_solve_ms;
  j["leader_wander_second_differences"] = leader_stats_.node_wander.second_differences;
  j["leader_wander_rejected"] = leader_stats_.node_wander.rejected;
  j["leader_wander_late"] = leader_stats_.node_wander.late;
  return j;
}

}  // namespace chronolink
