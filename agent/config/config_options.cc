// The agent's option table. The parsing of one value (text or JSON, units,
// "did you mean") is the options library's (options/option_values.h).
#include "agent/config/config_options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include "agent/config/agent_config.h"

namespace chronolink::config_internal {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Option table.

const Spec kSpecs[] = {
    {"node_id", "node-id", Kind::kId, "N", kGeneral, "This node's id; must be listed in the cluster file (required)"},
    {"cluster_file", "cluster-file", Kind::kPath, "FILE", kGeneral,
     "Cluster file: cluster id and every node's id, address, port (required)"},
    {"listen", "listen", Kind::kAddress, "ADDR", kGeneral,
     "IPv4/IPv6 literal to bind the probe socket to (default: this node's address in the cluster file)"},
    {"port", "port", Kind::kPort, "N", kGeneral,
     "UDP port of the probe socket, 1..65535 (default: this node's port in the cluster file)"},
    {"key_file", "key-file", Kind::kPath, "FILE", kGeneral,
     "Cluster key file: 64 hex characters or 32 raw bytes (this or --key-hex is required)"},
    {"key_hex", "key-hex", Kind::kString, "HEX", kGeneral,
     "Cluster key as 64 hex characters (visible to other users in ps: prefer --key-file)"},
    {"output_dir", "output-dir", Kind::kPath, "DIR", kGeneral,
     "Directory for edges.jsonl and offsets.jsonl (default: .)"},
    {"peers", "peers", Kind::kIdList, "IDS", kGeneral,
     "Comma-separated node ids to probe (default: every other node of the cluster)"},
    {"metrics", "metrics", Kind::kString, "[ADDR:]PORT", kGeneral,
     "Serve Prometheus metrics at http://ADDR:PORT/metrics; a bare PORT is 127.0.0.1:PORT (loopback), "
     "ADDR:PORT another address, e.g. the node's 10.0.0.1:9319 (default: off)"},
    {"log_level", "log-level", Kind::kLogLevel, "LEVEL", kGeneral, "trace|debug|info|warn|error (default: info)"},
    {"duration_s", "duration-s", Kind::kNsFromSec, "SEC", kGeneral,
     "Run this many seconds, then shut down cleanly (default: until SIGINT/SIGTERM)"},
    {"user", "user", Kind::kString, "USER", kGeneral,
     "Started as root, run as this user (name or uid) once the tap is attached and the sockets bound; "
     "never root. Started unprivileged, the agent keeps its own uid and refuses a different --user "
     "(default: nobody)"},
    {"group", "group", Kind::kString, "GROUP", kGeneral,
     "Group (name or gid) to run as with --user; supplementary groups are always cleared (default: the "
     "user's primary group)"},

    {"probe.interval_us", "probe-interval-us", Kind::kNsFromUs, "US", kProbing,
     "One probe pair per interval per edge (the slowest, with adaptive cadence); >= 2x spacing, <= 10 s "
     "(default: 50000)"},
    {"probe.adaptive", "probe-adaptive", Kind::kString, "MODE", kProbing,
     "Adaptive cadence: probe faster, down to --probe-min-interval-us, while an edge's windows fall "
     "back or rest on too few pure pairs, and slow down again when they meet the target: on, off (default: on)"},
    {"probe.min_interval_us", "probe-min-interval-us", Kind::kNsFromUs, "US", kProbing,
     "Fastest adaptive interval; >= 2x spacing, <= the interval (default: interval / 8)"},
    {"probe.target_pure_points", "probe-target-pure-points", Kind::kCount, "N", kProbing,
     "Adaptive target: pure pairs per side in a window fitted on pure pairs (a fit on every probe "
     "rests on none), >= --min-points (default: 16)"},
    {"probe.target_uncertainty_ns", "probe-target-uncertainty-ns", Kind::kDouble, "NS", kProbing,
     "Adaptive target: a window's uncertainty; a max-margin window is never tighter than about half "
     "the path's minimum round trip (default: none)"},
    {"probe.spacing_us", "probe-spacing-us", Kind::kNsFromUs, "US", kProbing,
     "Gap between the two probes of a pair: 0 sends both back to back in one system call, with the "
     "pilot when its lead is 0; else >= 1 (default: 0)"},
    {"probe.jitter", "probe-jitter", Kind::kDouble, "FRAC", kProbing,
     "Uniform +/- jitter on the interval, as a fraction 0..0.9 (default: 0.2)"},
    {"probe.tuple_timeout_ms", "probe-tuple-timeout-ms", Kind::kNsFromMs, "MS", kProbing,
     "Drop incomplete Pt/Pr tuples after this long (default: 500)"},
    {"probe.followup_delay_ms", "probe-followup-delay-ms", Kind::kNsFromMs, "MS", kProbing,
     "Send a follow-up with the last TX stamps if no next pair by then; < tuple timeout (default: 2.5 "
     "probe intervals)"},
    {"probe.max_pending_tuples", "probe-max-pending-tuples", Kind::kCount, "N", kProbing,
     "Cap on incomplete tuples per edge, >= 1 (default: 4096)"},
    {"probe.pilot", "probe-pilot", Kind::kString, "MODE", kProbing,
     "Send a 16-byte pilot before each forward pair so that both probes find the path awake: auto "
     "(when the interval is 2 ms or more), on, off (default: auto)"},
    {"probe.reverse_pilot", "probe-reverse-pilot", Kind::kString, "MODE", kProbing,
     "Lead each reverse pair with a pilot too, where this agent sends pilots: on, off (default: on)"},
    {"probe.pilot_lead_us", "probe-pilot-lead-us", Kind::kNsFromUs, "US", kProbing,
     "How long before a pair its pilot goes, 0..interval/4; 0 with spacing 0: in the pair's own system call "
     "(default: 0)"},

    {"estimation.window_s", "window-s", Kind::kNsFromSec, "SEC", kEstimation,
     "Estimation window; >= 0.1 s, and its shortest fit span >= 10x probe interval (default: 2)"},
    {"estimation.fit_span_s", "fit-span-s", Kind::kNsFromSec, "SEC", kEstimation,
     "Each window's fit takes the probes of this span centred on the window: more pairs per fit at "
     "the same cadence, for the wander error docs/estimator.md §10 measures. 0: chosen per edge from "
     "the noise and wander its windows show, from 2 windows to --fit-span-trailing-max-s; else fixed, the window "
     "up to 8 windows, >= 10x probe interval (default: 0)"},
    {"estimation.fit_span_max_s", "fit-span-max-s", Kind::kNsFromSec, "SEC", kEstimation,
     "The longest centred span a chosen fit span takes; a window's record comes (this - window) / 2 after its "
     "end. 2 to 8 windows (default: 3 windows, 6 s)"},
    {"estimation.fit_span_trailing_max_s", "fit-span-trailing-max-s", Kind::kNsFromSec, "SEC", kEstimation,
     "The longest span a chosen fit span takes in all: one over --fit-span-max-s ends where that one "
     "ends and reaches further back, so a record comes no later; = --fit-span-max-s: every span "
     "centred. From --fit-span-max-s to 16 windows (default: 10 windows, 20 s)"},
    {"estimation.window_grace_ms", "window-grace-ms", Kind::kNsFromMs, "MS", kEstimation,
     "Wait this long past a window's end for late stamps; < window (default: 300)"},
    {"estimation.purity_tolerance_ns", "purity-tolerance-ns", Kind::kInt64, "NS", kEstimation,
     "A pair is pure if |rx spacing - tx spacing| <= this; 1..spacing, or ..100000 with spacing 0 "
     "(default: 300)"},
    {"estimation.points", "estimate-points", Kind::kString, "WHICH", kEstimation,
     "Bounds the max-margin fit rests on: every (every probe; pure pairs only when that fails) or pure "
     "(pure pairs only, Huygens' way; for comparisons) (default: every)"},
    {"estimation.fit_later_half", "fit-later-half", Kind::kString, "ON_OFF", kEstimation,
     "on: a chosen span over --fit-span-max-s gives the mean of its line and its later half's, which "
     "weighs the seconds nearest the window twice (docs/estimator.md §10); off: its own line alone "
     "(default: on)"},
    {"estimation.fit_probes", "fit-probes", Kind::kString, "WHICH", kEstimation,
     "Whose probes an edge's fit takes: link (its own and, where the peer probes us too, the peer's, "
     "whose tuples the peer's echo makes whole here: the two directions lean neither way) or own (this "
     "node's probes only; for comparisons) (default: link)"},
    {"estimation.fit_clock", "fit-clock", Kind::kString, "CLOCK", kEstimation,
     "The clock offsets are fitted in: raw (MONOTONIC_RAW scaled and set to REALTIME at the start: no "
     "clock daemon's frequency changes, slews or steps enter a fit) or realtime (CLOCK_REALTIME itself, "
     "for comparisons) (default: raw)"},
    {"estimation.path_asymmetry_ns", "path-asymmetry-ns", Kind::kDouble, "NS", kEstimation,
     "One-way delay asymmetry to expect on the paths (forward - reverse within +/- this): invisible to "
     "two-way probing, it is counted in each window's sigma_ns (default: 0, a symmetric path)"},
    {"estimation.min_points", "min-points", Kind::kCount, "N", kEstimation,
     "Minimum pure points per side for a max-margin fit, >= 2 (default: 8)"},
    {"estimation.floor_points", "fit-floor-points", Kind::kCount, "N", kEstimation,
     "A fit's line rests on the mean of the N deepest bounds per side, not on the single deepest: a "
     "path's fastest packets scatter under its usual floor. Fewer where a side has under 16 bounds per "
     "point; 1: the hard margin, Huygens' line (for comparisons). 1..64 (default: 8)"},
    {"estimation.drift_windows", "fit-drift-windows", Kind::kCount, "N", kEstimation,
     "A window's line takes the median of the edge's last N windows' own slopes as its slope (the fit "
     "clocks drift apart slowly; a window's own slope strays where a load episode leaves its deepest "
     "bounds at one end); it needs 5 since the start or a clock step. 0: each window's own slope (for "
     "comparisons). 0..200 (default: 20)"},
    {"estimation.sources", "estimate-sources", Kind::kSourceList, "LIST", kEstimation,
     "Comma-separated timestamp source classes to estimate from: kernel, userspace (default: kernel)"},

    {"capture.bpf", "bpf", Kind::kString, "MODE", kCapture,
     "eBPF timestamp tap: auto (use it when privileges allow), on (required), off (default: auto)"},
    {"capture.bpf_interfaces", "bpf-interfaces", Kind::kString, "DEVS", kCapture,
     "Comma-separated devices to hook (default: the devices routing to the peers)"},
    {"capture.xdp", "bpf-xdp", Kind::kString, "MODE", kCapture,
     "XDP hook: auto (everywhere but veth, where XDP delays every receive stamp), on, off "
     "(default: auto)"},
    {"capture.timestamp_source", "timestamp-source", Kind::kString, "SOURCE", kCapture,
     "Kernel-class stamp source: auto (best available), socket_sched, socket_software, bpf_tc, "
     "bpf_xdp, hardware (default: auto)"},
    {"capture.stamp_log", "stamp-log", Kind::kPath, "FILE", kCapture,
     "Diagnostic: write every probe packet's stamps of every source to FILE (JSON lines)"},

    {"cluster.coordination", "coordination", Kind::kString, "BACKEND", kCluster,
     "static (cluster file; the lowest live id leads), etcd, or none (no leader) (default: static)"},
    {"cluster.id", "cluster-id", Kind::kInt64, "N", kCluster,
     "Cluster id, 0..4294967295, when no cluster file is given (etcd backend only)"},
    {"cluster.probe_k", "probe-k", Kind::kCount, "N", kCluster,
     "Peers each node probes in the probe graph, >= 2 (default: min(6, nodes - 1))"},
    {"cluster.reference", "reference", Kind::kString, "REF", kCluster,
     "Reference clock of the solved offsets: mean (of all nodes) or a node id (default: mean)"},
    {"cluster.coordination_port", "coordination-port", Kind::kPort, "N", kCluster,
     "TCP port of the coordination channel (both backends) on every node; the same on all (default: each node's probe "
     "port)"},
    {"cluster.etcd_endpoints", "etcd-endpoints", Kind::kString, "URLS", kCluster,
     "Comma-separated etcd client URLs, all http://HOST:PORT or all https://HOST:PORT (required with "
     "--coordination etcd; plain http is unencrypted and unauthenticated: trusted networks only)"},
    {"cluster.etcd_cacert", "etcd-cacert", Kind::kPath, "FILE", kCluster,
     "PEM CA certificate(s) that must have signed etcd's server certificate (required with https "
     "endpoints; the system's CAs are not used)"},
    {"cluster.etcd_cert", "etcd-cert", Kind::kPath, "FILE", kCluster,
     "PEM client certificate presented to etcd (with --etcd-key; for etcd's --client-cert-auth)"},
    {"cluster.etcd_key", "etcd-key", Kind::kPath, "FILE", kCluster,
     "PEM private key of --etcd-cert, unencrypted, mode 0600 like the cluster key file"},
    {"cluster.etcd_user", "etcd-user", Kind::kString, "NAME", kCluster,
     "etcd user to authenticate as (etcd auth; with --etcd-password-file)"},
    {"cluster.etcd_password_file", "etcd-password-file", Kind::kPath, "FILE", kCluster,
     "File holding the --etcd-user's password (its first line), mode 0600 like the cluster key file; "
     "there is no flag for the password itself"},
    {"cluster.etcd_prefix", "etcd-prefix", Kind::kString, "PREFIX", kCluster,
     "Key prefix of this cluster in etcd (default: /chronolink/)"},
    {"cluster.lease_ttl_s", "lease-ttl-s", Kind::kCount, "SEC", kCluster,
     "Lease of leadership (etcd): a dead leader is replaced after about this long, 2..60 (default: 5)"},
    {"cluster.member_lease_ttl_s", "member-lease-ttl-s", Kind::kCount, "SEC", kCluster,
     "Lease of a member's registration (etcd), kept alive every half of it: a killed node leaves the "
     "member list after this long; >= --lease-ttl-s, <= 3600 (default: 180, one etcd request per 90 s)"},
    {"cluster.solve_delay_ms", "solve-delay-ms", Kind::kNsFromMs, "MS", kCluster,
     "The leader solves an instant this long after its windows close at the latest, for summaries in transit; "
     "sooner once every edge of the last instant has sent its window (default: 1000)"},
    {"cluster.retention_s", "window-retention-s", Kind::kNsFromSec, "SEC", kCluster,
     "Window summaries kept (etcd, the static backend's resend buffer, the leader) for catch-up and "
     "failover, >= 10 (default: 120)"},
    {"cluster.offsets_rotate_mb", "offsets-rotate-mb", Kind::kCount, "MB", kCluster,
     "The leader's offsets.jsonl and cluster-timebase.jsonl are rotated past this size and the full one "
     "gzip-compressed (offsets.<N>.jsonl.gz); 0: never (default: 256)"},
    {"cluster.offsets_format", "offsets-format", Kind::kString, "FORM", kCluster,
     "The leader's offsets.jsonl as rows (a line per node per instant), columns (a line per instant, under a "
     "third of the rows' size gzipped) or auto: columns from 1000 nodes (default: auto); its "
     "cluster-timebase.jsonl follows (columns: a line per turn, each knot as steps from its node's last)"},
    {"cluster.page_drift_span_s", "page-drift-span-s", Kind::kNsFromSec, "SEC", kCluster,
     "The leader gives each node's clock page the drift of a line through its solved offsets over this "
     "span, on the fit clocks (an instant's own drift errs by tens of ppb on a loaded path, and a page "
     "extrapolates it ~10 s); 0: the instant's own, 4..600 (default: 30)"},
    {"clock_page", "clock-page", Kind::kString, "PATH", kCluster,
     "Shared-memory page with this node's clock mapping, or off (default: /dev/shm/chronolink-<node>)"},

    {"test_mode", "test-mode", Kind::kBool, "", kTestOnly, "Allow the test-only options below; never in production"},
    {"virtual_clock.offset_ns", "virtual-offset-ns", Kind::kInt64, "NS", kTestOnly,
     "Virtual clock offset: t' = t + offset + drift*(t - t0) (default: 0)"},
    {"virtual_clock.drift_ppm", "virtual-drift-ppm", Kind::kDouble, "PPM", kTestOnly,
     "Virtual clock drift in ppm, |drift| <= 100000 (default: 0)"},
    {"virtual_clock.t0_ns", "virtual-t0-ns", Kind::kInt64, "NS", kTestOnly,
     "Virtual clock reference instant, REALTIME ns (default: the agent's start time)"},
    {"virtual_clock.step_at_ns", "virtual-step-at-ns", Kind::kInt64, "NS", kTestOnly,
     "The real instant (REALTIME ns) at which the virtual clock steps by --virtual-step-ns"},
    {"virtual_clock.step_ns", "virtual-step-ns", Kind::kInt64, "NS", kTestOnly,
     "A step of the virtual clock, forwards (> 0) or back (< 0), as settimeofday makes one (default: 0)"},
    {"virtual_clock.state_file", "virtual-clock-state", Kind::kPath, "FILE", kTestOnly,
     "The test bed's clock of this node (oscillator wander, a daemon's discipline: docs/testbed.md), "
     "instead of the linear --virtual-offset-ns/--virtual-drift-ppm"},
};

// The file's nested objects.
const char* const kSections[] = {"probe", "estimation", "capture", "cluster", "virtual_clock"};

}  // namespace

std::span<const Spec> Specs() { return kSpecs; }

std::span<const char* const> FileSections() { return kSections; }

}  // namespace chronolink::config_internal
