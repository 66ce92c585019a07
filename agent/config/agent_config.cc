// Agent configuration: built-in defaults < JSON config file < CHRONOLINK_*
// environment < command-line flags. The pieces live beside this file:
// config_options (the option table and value parsing), config_sources (the
// three sources, read into layers of typed values that remember where each
// value came from, merged by precedence) and config_validation (the merged
// settings checked as a whole). Error messages name the source of the
// offending value. The option reference is docs/configuration.md; keep the
// two in step.
#include "agent/config/agent_config.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/config/config_options.h"
#include "agent/config/config_sources.h"
#include "agent/config/config_validation.h"

namespace chronolink {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using config_internal::CommandLine;
using config_internal::CommandLineStatus;
using config_internal::ConfigFileLayer;
using config_internal::Kind;
using config_internal::Layer;

// Messages go to a log line: line breaks and runs of whitespace become one
// space.
std::string OneParagraph(std::string s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// A duration in the option's unit, as the file would give it.
json Number(int64_t ns, Kind k) { return json::parse(config_internal::FormatNsAs(ns, k)); }

json ClusterJson(const AgentConfig& c) {
  const ClusterSettings& cs = c.cluster_settings;
  json cl = {{"coordination", std::string(CoordinationBackendName(cs.backend))},
             {"reference", cs.reference_node ? json(std::to_string(*cs.reference_node)) : json("mean")},
             {"lease_ttl_s", cs.lease_ttl_s},
             {"member_lease_ttl_s", cs.member_lease_ttl_s},
             {"solve_delay_ms", Number(cs.solve_delay_ns, Kind::kNsFromMs)},
             {"retention_s", Number(cs.retention_ns, Kind::kNsFromSec)},
             {"offsets_rotate_mb", cs.offsets_rotate_bytes >> 20},
             {"offsets_format", OffsetsFormName(cs.offsets_form)},
             {"page_drift_span_s", Number(cs.page_drift_span_ns, Kind::kNsFromSec)}};
  if (cs.probe_k > 0) cl["probe_k"] = cs.probe_k;
  if (cs.backend != CoordinationBackend::kNone && cs.coordination_port != 0) {
    cl["coordination_port"] = cs.coordination_port;
  }
  if (cs.backend == CoordinationBackend::kEtcd) {
    std::string urls;
    for (const auto& u : cs.etcd_endpoints) urls += (urls.empty() ? "" : ",") + u;
    cl["etcd_endpoints"] = urls;
    cl["etcd_prefix"] = cs.etcd_prefix;
    // Paths and the user name only: never the password or a key.
    if (!cs.etcd_cacert_file.empty()) cl["etcd_cacert"] = cs.etcd_cacert_file;
    if (!cs.etcd_cert_file.empty()) cl["etcd_cert"] = cs.etcd_cert_file;
    if (!cs.etcd_key_file.empty()) cl["etcd_key"] = cs.etcd_key_file;
    if (!cs.etcd_user.empty()) {
      cl["etcd_user"] = cs.etcd_user;
      cl["etcd_password_file"] = cs.etcd_password_file;
    }
    if (c.cluster_file_path.empty()) cl["id"] = c.cluster.cluster_id;
  }
  return cl;
}

json ProbeJson(const ProbeSettings& p) {
  json out = {
      {"interval_us", Number(p.interval_ns, Kind::kNsFromUs)},
      {"spacing_us", Number(p.spacing_ns, Kind::kNsFromUs)},
      {"jitter", p.jitter_fraction},
      {"tuple_timeout_ms", Number(p.tuple_timeout_ns, Kind::kNsFromMs)},
      {"followup_delay_ms", Number(p.followup_delay_ns, Kind::kNsFromMs)},
      {"max_pending_tuples", p.max_pending_tuples},
      {"pilot", p.pilot ? "on" : "off"},
      {"reverse_pilot", p.reverse_pilot ? "on" : "off"},
      {"pilot_lead_us", Number(p.pilot_lead_ns, Kind::kNsFromUs)},
  };
  return out;
}

json EstimationJson(const EstimationSettings& e) {
  json sources = json::array();
  for (SourceClass sc : e.source_classes) sources.push_back(std::string(SourceClassName(sc)));
  json out = {
      {"window_s", Number(e.window_ns, Kind::kNsFromSec)},
      {"window_grace_ms", Number(e.window_grace_ns, Kind::kNsFromMs)},
      {"purity_tolerance_ns", e.purity_tolerance_ns},
      {"min_points", e.min_points_per_side},
      {"floor_points", e.floor_points},
      {"drift_windows", e.drift_windows},
      {"sources", sources},
  };
  return out;
}

json CaptureJson(const CaptureSettings& cap) {
  std::string joined;
  for (const auto& d : cap.bpf_interfaces) joined += (joined.empty() ? "" : ",") + d;
  json out = {{"bpf", std::string(BpfModeName(cap.bpf))},
              {"xdp", std::string(BpfModeName(cap.xdp))},
              {"timestamp_source", cap.forced_source == StampSource::kNone
                                       ? std::string("auto")
                                       : std::string(StampSourceName(cap.forced_source))}};
  if (!joined.empty()) out["bpf_interfaces"] = joined;
  if (!cap.stamp_log_path.empty()) out["stamp_log"] = cap.stamp_log_path;
  return out;
}

}  // namespace

std::string_view AgentVersionString() {
#ifdef CHRONOLINK_VERSION
  return "chronolink-agent " CHRONOLINK_VERSION;
#else
  return "chronolink-agent 0.1.0";
#endif
}

std::optional<AgentConfig> LoadAgentConfig(int argc, const char* const* argv, std::string* error,
                                           int* exit_code) {
  std::string scratch_error;
  int scratch_code = 0;
  if (error == nullptr) error = &scratch_error;
  if (exit_code == nullptr) exit_code = &scratch_code;
  error->clear();
  auto fail = [&](const std::string& msg) -> std::optional<AgentConfig> {
    *error = OneParagraph(msg);
    *exit_code = 2;
    return std::nullopt;
  };

  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (ec) return fail("cannot determine the current directory: " + ec.message());

  // Flags, then environment, then file: with problems in several sources,
  // the one reported is the first found in this order.
  CommandLine command_line;
  std::string text;
  switch (config_internal::ParseCommandLine(argc, argv, cwd, &command_line, &text)) {
    case CommandLineStatus::kExitNow:
      *error = text;
      *exit_code = 0;
      return std::nullopt;
    case CommandLineStatus::kError:
      return fail(text);
    case CommandLineStatus::kParsed:
      break;
  }

  AgentConfig config;
  Layer env;
  ConfigFileLayer file;
  // However loading ends, the key's text leaves no copy in the layers: the
  // key lives in config.key alone.
  struct WipeOnExit {
    std::vector<Layer*> layers;
    ~WipeOnExit() {
      for (Layer* l : layers) config_internal::WipeKeyHex(l);
    }
  } wipe{{&env, &file.layer, &command_line.flags}};  // file.layer: moved from once merged
  if (!config_internal::ReadEnvironment(cwd, &env, &config.warnings, error)) return fail(*error);

  if (!config_internal::ReadConfigFile(command_line, cwd, &config.config_file_path, &file, error)) {
    return fail(*error);
  }

  config_internal::Merged merged = config_internal::MergeLayers(std::move(file.layer), env, command_line.flags);
  const bool valid = config_internal::Validate(merged, file.virtual_block_origin, &config, error);
  merged.WipeKeyHex();
  if (!valid) return fail(*error);
  *exit_code = 0;
  return config;
}

std::string EffectiveConfigJson(const AgentConfig& c) {
  json j;
  j["node_id"] = c.node_id;
  if (!c.cluster_file_path.empty()) j["cluster_file"] = c.cluster_file_path;
  j["listen"] = c.listen_address;
  j["port"] = c.listen_port;
  if (!c.key_file_path.empty()) j["key_file"] = c.key_file_path;
  // The default "." is relative to the agent's working directory; written
  // as is, a file holding this output would read it relative to its own
  // directory instead.
  std::error_code ec;
  const fs::path output_dir = fs::absolute(c.output_dir, ec);
  j["output_dir"] = ec ? c.output_dir : output_dir.lexically_normal().string();
  if (c.cluster_settings.peers_explicit) j["peers"] = c.peers;
  j["log_level"] = c.log_level;
  if (!c.metrics_address.empty()) {
    j["metrics"] = (c.metrics_address.find(':') != std::string::npos ? "[" + c.metrics_address + "]"
                                                                     : c.metrics_address) +
                   ":" + std::to_string(c.metrics_port);
  }
  if (c.duration_ns) j["duration_s"] = Number(*c.duration_ns, Kind::kNsFromSec);
  // Only when asked for: an explicit user is a demand (refused by an
  // unprivileged start), the default is not.
  if (c.run_as_user_explicit) j["user"] = c.run_as_user;
  if (c.run_as_group_explicit) j["group"] = c.run_as_group;
  j["cluster"] = ClusterJson(c);
  j["clock_page"] = c.cluster_settings.clock_page_path.empty() ? std::string("off")
                                                                 : c.cluster_settings.clock_page_path;
  j["probe"] = ProbeJson(c.probe);
  j["estimation"] = EstimationJson(c.estimation);
  j["capture"] = CaptureJson(c.capture);
  j["test_mode"] = c.test_mode;
  if (c.test_mode) {
    j["virtual_clock"] = {
        {"offset_ns", c.virtual_clock.offset_ns},
        {"drift_ppm", c.virtual_clock.drift_ppm},
        {"t0_ns", c.virtual_clock.t0_ns},
    };
    if (c.virtual_clock.step_ns != 0) {
      j["virtual_clock"]["step_at_ns"] = c.virtual_clock.step_at_ns;
      j["virtual_clock"]["step_ns"] = c.virtual_clock.step_ns;
    }
  }
  return j.dump(2);
}

int64_t SolveLagNs(const AgentConfig& c) {
  return c.estimation.FitSpan() / 2 + c.estimation.window_grace_ns + c.cluster_settings.solve_delay_ns;
}

int64_t SolutionLifetimeNs(const AgentConfig& c) {
  constexpr int64_t kSolvesMissed = 5;
  return SolveLagNs(c) + kSolvesMissed * c.estimation.window_ns;
}

int64_t TakeoverNs(const AgentConfig& c) {
  return std::max<int64_t>(3 * c.estimation.window_ns, 2 * c.cluster_settings.lease_ttl_s * 1'000'000'000);
}

int64_t TakeoverResendNs(const AgentConfig& c) {
  constexpr int64_t kWindowsAround = 3;  // the solve's validity horizon (2 windows) and the one in progress
  return std::min(c.cluster_settings.retention_ns,
                  SolveLagNs(c) + TakeoverNs(c) + kWindowsAround * c.estimation.window_ns);
}

CoordinationOptions CoordinationOptionsFrom(const AgentConfig& c) {
  const ClusterSettings& cs = c.cluster_settings;
  CoordinationOptions o;
  o.backend = cs.backend;
  o.node_id = c.node_id;
  o.listen_address = c.listen_address;
  o.listen_port = c.listen_port;
  o.key = c.key;
  o.cluster_id = c.cluster.cluster_id;
  o.probe_k = cs.probe_k;
  o.retention_ns = cs.retention_ns;
  o.resend_ns = TakeoverResendNs(c);
  for (const ClusterNode& n : c.cluster.nodes) o.members.push_back(Member{n.id, n.address, n.port});
  o.members_source = c.cluster_file_path;
  o.coordination_port = cs.coordination_port;
  o.etcd_endpoints = cs.etcd_endpoints;
  o.etcd_prefix = cs.etcd_prefix;
  o.etcd_cacert_pem = cs.etcd_cacert_pem;
  o.etcd_cert_pem = cs.etcd_cert_pem;
  o.etcd_key_pem = cs.etcd_key_pem;
  o.etcd_user = cs.etcd_user;
  o.etcd_password = cs.etcd_password;
  o.lease_ttl_s = cs.lease_ttl_s;
  o.member_lease_ttl_s = cs.member_lease_ttl_s;
  return o;
}

std::string_view CoordinationBackendName(CoordinationBackend b) {
  switch (b) {
    case CoordinationBackend::kNone: return "none";
    case CoordinationBackend::kStatic: return "static";
    case CoordinationBackend::kEtcd: return "etcd";
  }
  return "?";
}

std::string_view BpfModeName(BpfMode m) {
  switch (m) {
    case BpfMode::kAuto: return "auto";
    case BpfMode::kOn: return "on";
    case BpfMode::kOff: return "off";
  }
  return "auto";
}

}  // namespace chronolink
