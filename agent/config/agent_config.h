// Agent configuration: defaults < config file (JSON) < environment
// (CHRONOLINK_*) < command-line flags. Validation gives one clear message per
// problem; nothing here opens sockets or files other than the config, the
// cluster file and the key file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cluster/offsets_form.h"
#include "agent/coord/coordination_options.h"
#include "agent/estimate/fit_span_range.h"
#include "agent/probe/probe_settings.h"
#include "agent/wire/probe_codec.h"
#include "clock/timestamp.h"
#include "clock/virtual_clock.h"
#include "options/option_values.h"

namespace chronolink {

struct ClusterNode {
  uint32_t id = 0;
  std::string address;  // IPv4 or IPv6 literal
  uint16_t port = 7319;
  std::string hostname;  // optional; chronolink-trace maps traces to nodes by it
};

struct ClusterFile {
  uint32_t cluster_id = 0;
  std::vector<ClusterNode> nodes;
  const ClusterNode* Find(uint32_t id) const;
};

// Where packet timestamps come from (docs/bpf-tap.md, docs/clocks.md).
enum class BpfMode : uint8_t {
  kAuto = 0,  // use the eBPF tap when privileges and the build allow; say so once if not
  kOn = 1,    // the tap is required: refuse to start without it
  kOff = 2,   // SO_TIMESTAMPING (and userspace) stamps only
};
std::string_view BpfModeName(BpfMode m);

struct CaptureSettings {
  BpfMode bpf = BpfMode::kAuto;
  std::vector<std::string> bpf_interfaces;  // empty: the devices routing to the peers
  // XDP: kAuto attaches it except on veth, where it moves the receive path to
  // NAPI and delays every RX stamp (docs/bpf-tap.md); kOn everywhere; kOff never.
  BpfMode xdp = BpfMode::kAuto;
  // kNone: take the best stamp available at each point (docs/bpf-tap.md);
  // otherwise only this source fills the kernel class (for comparisons).
  StampSource forced_source = StampSource::kNone;
  std::string stamp_log_path;  // diagnostic: every packet's stamps of every source, JSONL
};

struct EstimationSettings {
  int64_t window_ns = 2'000'000'000;
  // The probes a window's fit takes, centred on it (docs/estimator.md §10).
  // 0: chosen per edge from the noise and wander its windows show
  // (fit_span_chooser.h), from two windows, which at the default 50 ms keep
  // the 80 pairs a fit had at 25 ms, up to fit_span_trailing_max_ns; else fixed.
  int64_t fit_span_ns = 0;
  int64_t fit_span_max_ns = 0;  // the longest centred span; 0: three windows (kDefaultLongestWindows)
  // The longest chosen span, reaching back past the centred ones at no more
  // lag (fit_span_range.h); 0: ten windows (kDefaultLongestTrailingWindows).
  int64_t fit_span_trailing_max_ns = 0;
  // --fit-later-half on|off: a chosen span over the longest centred one
  // gives the mean of its line and its later half's (fit_span_range.h).
  bool fit_later_half = true;
  FitSpanRange FitSpans() const {
    FitSpanRange r = FitSpanRange::Of(window_ns, fit_span_ns, fit_span_max_ns, fit_span_trailing_max_ns);
    r.later_half = r.chosen && fit_later_half;
    return r;
  }
  bool AdaptiveFitSpan() const { return FitSpans().chosen; }
  // The shortest span a fit takes, and the longest centred one (FitSpan()).
  int64_t MinFitSpan() const { return FitSpans().shortest_ns; }
  int64_t window_grace_ns = 300'000'000;  // wait this long past window end for late stamps
  int64_t purity_tolerance_ns = 300;
  int min_points_per_side = 8;
  // --fit-floor-points N: a fit's line rests on the mean of the N deepest
  // bounds per side (docs/estimator.md §4b); 1: the hard margin.
  int floor_points = 8;
  // --fit-drift-windows N: a window's line takes the median of the edge's
  // last N own slopes (docs/estimator.md §4c); 0: its own.
  int drift_windows = 20;
  bool fit_every_probe = true;  // --estimate-points every|pure
  // --fit-probes link|own: a fit takes the peer's session's tuples too
  // (docs/estimator.md §11), or this node's own probes only.
  bool fit_peer_probes = true;
  // --fit-clock raw|realtime: fit in the node's MONOTONIC_RAW-based fit
  // clock (clock/fit_clock.h), free of every daemon's discipline, or in
  // REALTIME as before.
  bool fit_on_raw = true;
  double path_asymmetry_ns = 0;  // --path-asymmetry-ns: counted in sigma_ns
  std::vector<SourceClass> source_classes = {SourceClass::kKernel};
  int64_t FitSpan() const { return FitSpans().longest_ns; }
};

// How nodes find each other and elect the leader (docs/cluster.md).
std::string_view CoordinationBackendName(CoordinationBackend b);

struct ClusterSettings {
  CoordinationBackend backend = CoordinationBackend::kStatic;
  int probe_k = 0;                          // peers per node; 0: min(6, nodes - 1)
  bool peers_explicit = false;              // --peers given: no probe graph
  std::optional<uint32_t> reference_node;   // nullopt: the mean of all nodes
  uint16_t coordination_port = 0;           // static backend's TCP port on every node; 0: each one's probe port
  std::vector<std::string> etcd_endpoints;  // all http://host:port or all https://host:port
  std::string etcd_prefix = "/chronolink/";
  // etcd over https and with user/password auth (docs/deployment.md). The
  // files are read during validation, before privileges drop: the watches
  // reconnect later, as the unprivileged user.
  std::string etcd_cacert_file, etcd_cert_file, etcd_key_file;  // paths; empty: not given
  std::string etcd_cacert_pem, etcd_cert_pem, etcd_key_pem;      // their contents
  std::string etcd_user;                                          // empty: no etcd auth
  std::string etcd_password_file;
  std::string etcd_password;  // the file's first line
  int64_t lease_ttl_s = 5;           // the leader key's lease (etcd)
  int64_t member_lease_ttl_s = 180;  // a member's registration (etcd)
  int64_t solve_delay_ns = 1'000'000'000;   // extra wait for summaries after a window closes
  int64_t retention_ns = 120'000'000'000;   // windows kept for catch-up and failover
  int64_t offsets_rotate_bytes = 256LL << 20;  // offsets.jsonl rotated past this; 0: never
  OffsetsForm offsets_form = OffsetsForm::kAuto;  // rows, columns, or columns from 1000 nodes
  int64_t page_drift_span_ns = 30'000'000'000;    // the clock pages' drift: a line over this; 0: the instant's
  std::string clock_page_path;              // empty: off
};

struct AgentConfig {
  uint32_t node_id = 0;
  std::string cluster_file_path;
  ClusterFile cluster;
  // Whom this node probes: --peers, or its neighbours in the probe graph of
  // the cluster file (empty with etcd: the graph comes from etcd's members).
  std::vector<uint32_t> peers;
  std::string listen_address;   // default: this node's address in the cluster file
  uint16_t listen_port = 0;     // default: this node's port in the cluster file
  ClusterKey key{};
  std::string key_file_path;    // where the key came from; empty when from key_hex
  std::string output_dir = ".";
  std::string log_level = "info";
  // Prometheus text metrics at http://metrics_address:metrics_port/metrics;
  // empty address: off.
  std::string metrics_address;
  uint16_t metrics_port = 0;
  std::optional<int64_t> duration_ns;  // run this long, then shut down cleanly
  // Whom a privileged start becomes once everything privileged is done
  // (agent/runtime/privileges.h, docs/deployment.md).
  std::string run_as_user = "nobody";
  std::string run_as_group;        // empty: the user's primary group
  bool run_as_user_explicit = false;   // --user given: a start that cannot become it fails
  bool run_as_group_explicit = false;  // likewise --group

  ProbeSettings probe;
  EstimationSettings estimation;
  CaptureSettings capture;
  ClusterSettings cluster_settings;

  // Test-only. Refused unless test_mode is true.
  bool test_mode = false;
  VirtualClockParams virtual_clock;
  // Test mode: the test bed's state file of this node's clock, in place of
  // the linear virtual clock (empty: linear).
  std::string virtual_clock_state_file;
  // True when test mode is on and no t0 was given: virtual_clock.t0_ns is then
  // the REALTIME instant at which LoadAgentConfig ran (the agent's start), and
  // the agent must report it so a test bed can compute the ground truth.
  bool virtual_t0_defaulted = false;

  // Absolute path of the config file that was read; empty when none.
  std::string config_file_path;
  // Non-fatal findings (e.g. an unknown CHRONOLINK_* environment variable) for
  // the agent to log; the library never prints.
  std::vector<std::string> warnings;
};

// How long after its reference instant T (a window's centre) the leader
// solves it: the windows around T are recorded once the longest fit span
// centred on them has ended, then come their grace and the wait for
// summaries to travel (docs/leader.md).
int64_t SolveLagNs(const AgentConfig& config);
// How long after T its solution is still used (the clock page): the
// solve's lag and then five windows, so that a running
// agent's page never lapses between solves, whatever its fit span, and
// lapses once five solves in a row have not come.
int64_t SolutionLifetimeNs(const AgentConfig& config);
// How long after a leader's death its successor is in office, at most: two
// lease periods (etcd's leader lease; the static backend's channel sees a
// death sooner), or three windows. The successor solves back over the
// solve's lag and this (ClusterLeaderOptions::backfill_ns).
int64_t TakeoverNs(const AgentConfig& config);
// What a new leader can use of the summaries every node resends it: those
// of the instants it solves back over, and the windows either side of them.
int64_t TakeoverResendNs(const AgentConfig& config);

// What the coordinator needs of the configuration (coord/ knows nothing of
// config/): identity, addresses, the key, the cluster file's members, the
// backend's settings.
CoordinationOptions CoordinationOptionsFrom(const AgentConfig& config);

// Parses argv (flags), the environment and the config file; on any problem
// returns nullopt with a human-readable message in *error (and for --help,
// nullopt with *exit_code 0 and the help text in *error).
std::optional<AgentConfig> LoadAgentConfig(int argc, const char* const* argv, std::string* error,
                                           int* exit_code);

bool LoadClusterFile(const std::string& path, ClusterFile* out, std::string* error);
// The same for the file's text; `path` only names it in messages (the
// fuzz target reads no file).
bool ParseClusterFile(const std::string& text, const std::string& path, ClusterFile* out, std::string* error);

// True if `text` is an IPv4 or IPv6 address literal (the options library's).
using options::IsIpAddressLiteral;

// The effective configuration as JSON text in the config-file format, for the
// agent's startup log and run reports. Key material is never included: the
// output names key_file when the key came from one (and then loads back as a
// config file) and omits the key otherwise.
std::string EffectiveConfigJson(const AgentConfig& config);

// Version string printed by --version.
std::string_view AgentVersionString();

}  // namespace chronolink
