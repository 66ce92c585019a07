#include "agent/export/edges_jsonl_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/own_output_file.h"

namespace chronolink {

std::string EdgeRecordToJson(const EdgeWindowRecord& r, const EdgeRecordContext& context,
                             const std::optional<FitWindowClock>& fit) {
  const auto& test_clock = context.test_clock;
  const WindowEstimate& e = r.estimate;
  nlohmann::ordered_json j;
  j["schema"] = kEdgeSchema;
  j["node"] = r.node;
  j["peer"] = r.peer;
  j["session"] = std::to_string(context.session_epoch);
  j["clock_domain"] = fit ? "node_fit" : "node_realtime";
  j["window_start_ns"] = r.window_start_ns;
  j["window_end_ns"] = r.window_end_ns;
  j["x0_ns"] = r.x0_ns;
  if (!r.clock_step) {
    j["fit_start_ns"] = r.fit_start_ns;
    j["fit_end_ns"] = r.fit_end_ns;
  } else {
    j["fit_start_ns"] = nullptr;
    j["fit_end_ns"] = nullptr;
  }
  if (r.span_evidence) {
    const FitSpanEvidence& s = *r.span_evidence;
    j["fit_span_evidence"] = {{"window_noise_ns", s.window_noise_ns},
                              {"wander_ns_per_sqrt_s", s.wander_ns_per_sqrt_s},
                              {"wander_lower_ns_per_sqrt_s", s.wander_lower_ns_per_sqrt_s},
                              {"best_span_ns", s.best_span_ns},
                              {"windows", s.windows}};
  } else {
    j["fit_span_evidence"] = nullptr;
  }
  j["own_window_beta_ns"] =
      r.own_window_fit ? nlohmann::ordered_json(r.own_window_fit->beta_ns) : nlohmann::ordered_json(nullptr);
  j["timestamp_source"] = SourceClassName(r.source_class);
  j["timestamp_policy"] = r.source_class == SourceClass::kUserspace ? "userspace" : context.timestamp_policy;
  nlohmann::ordered_json sources = nlohmann::ordered_json::object();
  for (int i = 1; i < kNumStampSources; ++i) {
    if (r.stamp_sources[i] > 0) {
      sources[std::string(StampSourceName(static_cast<StampSource>(i)))] = r.stamp_sources[i];
    }
  }
  j["stamp_sources"] = sources;
  j["estimator"] = EstimatorKindName(e.estimator);
  const bool ok = e.estimator != EstimatorKind::kNone && e.fit.ok;
  if (ok) {
    j["alpha"] = e.fit.alpha;
    j["alpha_ppm"] = e.fit.alpha * 1e6;
    j["beta_ns"] = e.fit.beta_ns;
    j["uncertainty_ns"] = e.fit.uncertainty_ns;
    j["sigma_ns"] = r.sigma_ns > 0 ? nlohmann::ordered_json(r.sigma_ns) : nlohmann::ordered_json(nullptr);
    const std::optional<double> shared = r.SolveShared();
    j["sigma_shared_ns"] = shared ? nlohmann::ordered_json(*shared) : nlohmann::ordered_json(nullptr);
    j["sigma_scatter_ns"] = r.sigma_ns > 0 && r.sigma_scatter_ns ? nlohmann::ordered_json(*r.sigma_scatter_ns)
                                                                 : nlohmann::ordered_json(nullptr);
    j["margin_ns"] = e.fit.margin_ns;
    j["violators_removed"] = e.fit.violators_removed;
    j["floor_points"] = e.fit.floor_points;
    j["floor_shift_ns"] = e.fit.floor_shift_ns;
    j["floors_refused"] = e.fit.floors_refused;
    j["own_alpha"] = e.fit.own_alpha;
    j["drift_prior_taken"] = e.fit.drift_prior_taken;
    if (r.later_half) {
      const LineFit& h = r.later_half->fit;
      j["later_half"] = {{"fit_start_ns", r.later_half->fit_start_ns},
                         {"fit_end_ns", r.later_half->fit_end_ns},
                         {"beta_ns", h.beta_ns},
                         {"uncertainty_ns", h.uncertainty_ns},
                         {"margin_ns", h.margin_ns},
                         {"floor_shift_ns", h.floor_shift_ns},
                         {"floors_refused", h.floors_refused},
                         {"alpha", h.alpha},
                         {"own_alpha", h.own_alpha},
                         {"drift_prior_taken", h.drift_prior_taken}};
    } else {
      j["later_half"] = nullptr;
    }
    j["later_half_refused"] = r.later_half_refused;
  } else {
    j["alpha"] = nullptr;
    j["alpha_ppm"] = nullptr;
    j["beta_ns"] = nullptr;
    j["uncertainty_ns"] = nullptr;
    j["sigma_ns"] = nullptr;
    j["sigma_shared_ns"] = nullptr;
    j["sigma_scatter_ns"] = nullptr;
    j["margin_ns"] = nullptr;
    j["violators_removed"] = 0;
    j["floor_points"] = nullptr;
    j["floor_shift_ns"] = nullptr;
    j["floors_refused"] = false;
    j["own_alpha"] = nullptr;
    j["drift_prior_taken"] = false;
    j["later_half"] = nullptr;
    j["later_half_refused"] = false;
  }
  j["pairs_sent"] = r.counts.pairs_sent;
  j["tuples_complete"] = r.counts.complete;
  j["tuples_in_class"] = e.tuples;
  j["tuples_peer_session"] = r.peer_session_tuples;
  j["pure_forward"] = e.pure_forward;
  j["pure_reverse"] = e.pure_reverse;
  j["tx_stamps_missing"] = r.counts.tx_stamps_missing;
  j["lost"] = r.counts.lost;
  j["clock_step"] = r.clock_step;
  if (!r.clock_remaps_ns.empty()) {
    j["clock_remap"] = true;
    j["clock_remap_at_ns"] = r.clock_remaps_ns;
  }
  if (fit) {
    j["fit_clock"] = {{"raw_ns", fit->anchor.raw_ns},
                      {"realtime_ns", fit->anchor.realtime_ns},
                      {"rate_fine", fit->anchor.rate_fine}};
    j["fit_point"] = {{"fit_ns", fit->point.fit_ns},
                      {"realtime_ns", fit->point.realtime_ns},
                      {"rate_fine", fit->point.rate_fine}};
  }
  if (!context.test_clock_state.empty()) {
    j["test_clock_state"] = context.test_clock_state;
  } else if (test_clock) {
    j["test_virtual_clock"] = {{"offset_ns", test_clock->offset_ns},
                               {"drift_ppm", test_clock->drift_ppm},
                               {"t0_ns", test_clock->t0_ns}};
  }
  return j.dump();
}

EdgesJsonlWriter::~EdgesJsonlWriter() { Close(); }

bool EdgesJsonlWriter::Open(const std::string& dir, const EdgeRecordContext& context,
                            std::string* error) {
  Close();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create output directory '" + dir + "': " + ec.message();
    return false;
  }
  path_ = (std::filesystem::path(dir) / "edges.jsonl").string();
  file_ = OpenOwnOutputForAppend(path_, error);  // never through a link another user planted
  if (file_ == nullptr) return false;
  context_ = context;
  return true;
}

bool EdgesJsonlWriter::Write(const EdgeWindowRecord& r, const std::optional<FitWindowClock>& fit,
                             std::string* error) {
  if (file_ == nullptr) {
    *error = "edges.jsonl is not open";
    return false;
  }
  const std::string line = EdgeRecordToJson(r, context_, fit) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    *error = "write to '" + path_ + "' failed: " + std::strerror(errno);
    return false;
  }
  // One fdatasync per window: cheap, and the line survives a power cut too.
  ::fdatasync(fileno(file_));
  ++lines_;
  return true;
}

void EdgesJsonlWriter::Close() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
}

}  // namespace chronolink
