// The option table and the parsing of one option's value from text (flags,
// environment) or JSON (config file), with unit scaling and "did you mean"
// suggestions for typos.
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
    {"node_id", "node-id", Kind::kId, "N", kGeneral,
     "This node's id; must be listed in the cluster file (required)"},
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
    {"log_level", "log-level", Kind::kLogLevel, "LEVEL", kGeneral,
     "trace|debug|info|warn|error (default: info)"},
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
    {"probe.pilot_lead_us", "probe-pilot-lead-us", Kind::kNsFromUs, "US", kProbing,
     "How long before a pair its pilot goes, 0..interval/4; 0 with spacing 0: in the pair's own system call "
     "(default: 0)"},

    {"estimation.window_s", "window-s", Kind::kNsFromSec, "SEC", kEstimation,
     "Estimation window; >= 0.1 s, and its shortest fit span >= 10x probe interval (default: 2)"},
    {"estimation.fit_span_s", "fit-span-s", Kind::kNsFromSec, "SEC", kEstimation,
     "Each window's fit takes the probes of this span centred on the window: more pairs per fit at "
     "the same cadence, for the wander error docs/estimator.md §10 measures. 0: chosen per edge from "
     "the noise and wander its windows show, from 2 windows to --fit-span-max-s; else fixed, the window "
     "up to 8 windows, >= 10x probe interval (default: 0)"},
    {"estimation.fit_span_max_s", "fit-span-max-s", Kind::kNsFromSec, "SEC", kEstimation,
     "The longest span a chosen fit span takes; a window's record comes (this - window) / 2 after its "
     "end. 2 to 8 windows (default: 6 windows)"},
    {"estimation.window_grace_ms", "window-grace-ms", Kind::kNsFromMs, "MS", kEstimation,
     "Wait this long past a window's end for late stamps; < window (default: 300)"},
    {"estimation.purity_tolerance_ns", "purity-tolerance-ns", Kind::kInt64, "NS", kEstimation,
     "A pair is pure if |rx spacing - tx spacing| <= this; 1..spacing, or ..100000 with spacing 0 "
     "(default: 300)"},
    {"estimation.points", "estimate-points", Kind::kString, "WHICH", kEstimation,
     "Bounds the max-margin fit rests on: every (every probe; pure pairs only when that fails) or pure "
     "(pure pairs only, Huygens' way; for comparisons) (default: every)"},
    {"estimation.path_asymmetry_ns", "path-asymmetry-ns", Kind::kDouble, "NS", kEstimation,
     "One-way delay asymmetry to expect on the paths (forward - reverse within +/- this): invisible to "
     "two-way probing, it is counted in each window's sigma_ns (default: 0, a symmetric path)"},
    {"estimation.min_points", "min-points", Kind::kCount, "N", kEstimation,
     "Minimum pure points per side for a max-margin fit, >= 2 (default: 8)"},
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
     "TCP port of the static backend's channel on every node; the same on all (default: each node's probe port)"},
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
     "Lease of a member's keys and of leadership: a dead node is gone after this long, 2..60 (default: 5)"},
    {"cluster.solve_delay_ms", "solve-delay-ms", Kind::kNsFromMs, "MS", kCluster,
     "The leader solves an instant this long after its windows close, for summaries in transit (default: 1000)"},
    {"cluster.retention_s", "window-retention-s", Kind::kNsFromSec, "SEC", kCluster,
     "Window summaries kept (etcd, the static backend's resend buffer, the leader) for catch-up and "
     "failover, >= 10 (default: 120)"},
    {"clock_page", "clock-page", Kind::kString, "PATH", kCluster,
     "Shared-memory page with this node's clock mapping, or off (default: /dev/shm/chronolink-<node>)"},

    {"test_mode", "test-mode", Kind::kBool, "", kTestOnly,
     "Allow the test-only options below; never in production"},
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
};

// The file's nested objects.
const char* const kSections[] = {"probe", "estimation", "capture", "cluster", "virtual_clock"};

// ---------------------------------------------------------------------------
// Value parsing.

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  if (Trim(s).empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    out.push_back(Trim(std::string_view(s).substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool ParseInt64Text(const std::string& text, int64_t* out) {
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && p == e && b != e;
}

bool ParseDoubleText(const std::string& text, double* out) {
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, *out, std::chars_format::general);
  return ec == std::errc() && p == e && b != e && std::isfinite(*out);
}

int64_t Scale(Kind k) {
  switch (k) {
    case Kind::kNsFromSec: return 1'000'000'000;
    case Kind::kNsFromMs: return 1'000'000;
    case Kind::kNsFromUs: return 1'000;
    default: return 1;
  }
}

const char* UnitName(Kind k) {
  switch (k) {
    case Kind::kNsFromSec: return "seconds";
    case Kind::kNsFromMs: return "milliseconds";
    case Kind::kNsFromUs: return "microseconds";
    default: return "";
  }
}

// Number in the option's unit -> int64 ns, rejecting overflow.
bool ToNs(double x, Kind k, int64_t* out) {
  double ns = x * static_cast<double>(Scale(k));
  if (!std::isfinite(ns) || std::fabs(ns) >= 9.2e18) return false;
  *out = std::llround(ns);
  return true;
}
bool ToNs(int64_t x, Kind k, int64_t* out) { return !__builtin_mul_overflow(x, Scale(k), out); }

// Checks and normalises a string-like value; resolves relative paths against
// base_dir (the config file's directory, or the cwd for flags and env).
bool FinishString(const Spec& spec, std::string s, const fs::path& base_dir, Payload* out,
                  std::string* why) {
  if (s.empty()) {
    *why = "must not be empty";
    return false;
  }
  switch (spec.kind) {
    case Kind::kPath: {
      fs::path p(s);
      if (p.is_relative()) p = base_dir / p;
      *out = p.lexically_normal().string();
      return true;
    }
    case Kind::kAddress:
      if (!IsIpAddressLiteral(s)) {
        *why = "'" + s + "' is not an IPv4 or IPv6 address literal (host names are not resolved)";
        return false;
      }
      break;
    case Kind::kLogLevel:
      if (s != "trace" && s != "debug" && s != "info" && s != "warn" && s != "error") {
        *why = "'" + s + "' is not a log level (trace, debug, info, warn, error)";
        return false;
      }
      break;
    default: break;
  }
  *out = std::move(s);
  return true;
}

bool CheckId(int64_t v, std::string* why) {
  if (v < 1 || v > std::numeric_limits<uint32_t>::max()) {
    *why = "node id " + std::to_string(v) + " is out of range 1..4294967295";
    return false;
  }
  return true;
}

// Integer kinds: range-checked here where the range is the kind's own.
bool ParseIntegerText(const Spec& spec, const std::string& raw, const std::string& text, Payload* out,
                      std::string* why) {
  int64_t v = 0;
  if (!ParseInt64Text(text, &v)) {
    *why = "'" + raw + "' is not an integer";
    return false;
  }
  if (spec.kind == Kind::kId && !CheckId(v, why)) return false;
  if (spec.kind == Kind::kPort && (v < 1 || v > 65535)) {
    *why = std::to_string(v) + " is out of range 1..65535";
    return false;
  }
  if (spec.kind == Kind::kCount && (v < 0 || v > std::numeric_limits<int32_t>::max())) {
    *why = std::to_string(v) + " is out of range 0..2147483647";
    return false;
  }
  *out = v;
  return true;
}

// A duration in the option's unit: integers are scaled exactly, fractions
// rounded to the nearest ns.
bool ParseDurationText(const Spec& spec, const std::string& raw, const std::string& text, Payload* out,
                       std::string* why) {
  int64_t i = 0, ns = 0;
  double d = 0;
  bool ok;
  if (ParseInt64Text(text, &i)) {
    ok = ToNs(i, spec.kind, &ns);
  } else if (ParseDoubleText(text, &d)) {
    ok = ToNs(d, spec.kind, &ns);
  } else {
    *why = "'" + raw + "' is not a number of " + UnitName(spec.kind);
    return false;
  }
  if (!ok) {
    *why = "'" + raw + "' " + UnitName(spec.kind) + " is out of range";
    return false;
  }
  *out = ns;
  return true;
}

bool ParseBoolText(const std::string& raw, const std::string& text, Payload* out, std::string* why) {
  std::string l = Lower(text);
  if (l == "1" || l == "true" || l == "yes" || l == "on") {
    *out = true;
  } else if (l == "0" || l == "false" || l == "no" || l == "off") {
    *out = false;
  } else {
    *why = "'" + raw + "' is not a boolean (1/0, true/false, yes/no, on/off)";
    return false;
  }
  return true;
}

bool ParseIdListText(const std::string& raw, const std::string& text, Payload* out, std::string* why) {
  std::vector<uint32_t> ids;
  for (const std::string& item : SplitComma(text)) {
    int64_t v = 0;
    if (!ParseInt64Text(item, &v)) {
      *why = "'" + item + "' in '" + raw + "' is not a node id";
      return false;
    }
    if (!CheckId(v, why)) return false;
    ids.push_back(static_cast<uint32_t>(v));
  }
  *out = std::move(ids);
  return true;
}

bool ParseSourceListText(const std::string& text, Payload* out, std::string* why) {
  std::vector<SourceClass> classes;
  for (const std::string& item : SplitComma(text)) {
    SourceClass c;
    if (!ParseSourceClass(Lower(item), &c)) {
      *why = "'" + item + "' is not a timestamp source class (kernel, userspace)";
      return false;
    }
    classes.push_back(c);
  }
  *out = std::move(classes);
  return true;
}

// "must be <what>, got <the JSON value>"; always false, so a parser can
// `return Expect(...)`.
bool Expect(const std::string& what, const json& j, std::string* why) {
  *why = std::string("must be ") + what + ", got " + j.dump();
  return false;
}

// JSON integers go through the text parser, so both sources share one range
// check and one message.
bool ParseIntegerJson(const Spec& spec, const json& j, const fs::path& config_dir, Payload* out,
                      std::string* why) {
  int64_t v = 0;
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Expect("an int64 integer", j, why);
    v = static_cast<int64_t>(u);
  } else if (j.is_number_integer()) {
    v = j.get<int64_t>();
  } else {
    return Expect("an integer", j, why);
  }
  return ParseText(spec, std::to_string(v), config_dir, out, why);
}

bool ParseDurationJson(const Spec& spec, const json& j, Payload* out, std::string* why) {
  int64_t ns = 0;
  bool ok;
  if (j.is_number_integer() && !j.is_number_unsigned()) {
    ok = ToNs(j.get<int64_t>(), spec.kind, &ns);
  } else if (j.is_number_unsigned() &&
             j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    ok = ToNs(static_cast<int64_t>(j.get<uint64_t>()), spec.kind, &ns);
  } else if (j.is_number()) {
    ok = ToNs(j.get<double>(), spec.kind, &ns);
  } else {
    return Expect(std::string("a number of ") + UnitName(spec.kind), j, why);
  }
  if (!ok) {
    *why = j.dump() + " " + UnitName(spec.kind) + " is out of range";
    return false;
  }
  *out = ns;
  return true;
}

bool ParseIdListJson(const json& j, Payload* out, std::string* why) {
  if (!j.is_array()) return Expect("an array of node ids", j, why);
  std::vector<uint32_t> ids;
  for (const json& e : j) {
    if (!e.is_number_unsigned() || e.get<uint64_t>() < 1 ||
        e.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      *why = "must be an array of node ids (integers 1..4294967295), found " + e.dump();
      return false;
    }
    ids.push_back(static_cast<uint32_t>(e.get<uint64_t>()));
  }
  *out = std::move(ids);
  return true;
}

bool ParseSourceListJson(const json& j, Payload* out, std::string* why) {
  if (!j.is_array()) return Expect("an array of source class names", j, why);
  std::vector<SourceClass> classes;
  for (const json& e : j) {
    SourceClass c;
    if (!e.is_string() || !ParseSourceClass(Lower(e.get<std::string>()), &c)) {
      *why = "must be an array of source classes (\"kernel\", \"userspace\"), found " + e.dump();
      return false;
    }
    classes.push_back(c);
  }
  *out = std::move(classes);
  return true;
}

// ---------------------------------------------------------------------------
// "Did you mean" for typos.

std::string Leaf(std::string_view dotted) {
  size_t dot = dotted.rfind('.');
  return std::string(dot == std::string_view::npos ? dotted : dotted.substr(dot + 1));
}

// Best candidate within a small edit distance, or "". A nested key written
// at the top level ("interval_us") matches its full name ("probe.interval_us").
std::string Suggest(const std::string& unknown, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = 3;  // suggest only within distance 2
  for (const std::string& c : candidates) {
    size_t d = std::min(EditDistance(unknown, c), EditDistance(unknown, Leaf(c)));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace

std::span<const Spec> Specs() { return kSpecs; }

std::span<const char* const> FileSections() { return kSections; }

std::string EnvName(const Spec& s) {
  std::string out(kEnvPrefix);
  for (const char* p = s.flag; *p != '\0'; ++p) {
    out += (*p == '-') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
  }
  return out;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// Text from a flag or an environment variable -> typed value.
bool ParseText(const Spec& spec, const std::string& raw, const fs::path& cwd, Payload* out,
               std::string* why) {
  const std::string text = Trim(raw);
  switch (spec.kind) {
    case Kind::kId:
    case Kind::kPort:
    case Kind::kCount:
    case Kind::kInt64:
      return ParseIntegerText(spec, raw, text, out, why);
    case Kind::kDouble: {
      double v = 0;
      if (!ParseDoubleText(text, &v)) {
        *why = "'" + raw + "' is not a number";
        return false;
      }
      *out = v;
      return true;
    }
    case Kind::kNsFromSec:
    case Kind::kNsFromMs:
    case Kind::kNsFromUs:
      return ParseDurationText(spec, raw, text, out, why);
    case Kind::kString:
    case Kind::kPath:
    case Kind::kAddress:
    case Kind::kLogLevel:
      return FinishString(spec, text, cwd, out, why);
    case Kind::kBool:
      return ParseBoolText(raw, text, out, why);
    case Kind::kIdList:
      return ParseIdListText(raw, text, out, why);
    case Kind::kSourceList:
      return ParseSourceListText(text, out, why);
  }
  *why = "unsupported option kind";
  return false;
}

// JSON value from the config file -> typed value.
bool ParseJsonValue(const Spec& spec, const json& j, const fs::path& config_dir, Payload* out,
                    std::string* why) {
  switch (spec.kind) {
    case Kind::kId:
    case Kind::kPort:
    case Kind::kCount:
    case Kind::kInt64:
      return ParseIntegerJson(spec, j, config_dir, out, why);
    case Kind::kDouble:
      if (!j.is_number()) return Expect("a number", j, why);
      *out = j.get<double>();
      return true;
    case Kind::kNsFromSec:
    case Kind::kNsFromMs:
    case Kind::kNsFromUs:
      return ParseDurationJson(spec, j, out, why);
    case Kind::kString:
    case Kind::kPath:
    case Kind::kAddress:
    case Kind::kLogLevel:
      if (!j.is_string()) return Expect("a string", j, why);
      return FinishString(spec, j.get<std::string>(), config_dir, out, why);
    case Kind::kBool:
      if (!j.is_boolean()) return Expect("true or false", j, why);
      *out = j.get<bool>();
      return true;
    case Kind::kIdList:
      return ParseIdListJson(j, out, why);
    case Kind::kSourceList:
      return ParseSourceListJson(j, out, why);
  }
  *why = "unsupported option kind";
  return false;
}

std::string FormatNsAs(int64_t ns, Kind k) {
  int64_t scale = Scale(k);
  if (ns % scale == 0) return std::to_string(ns / scale);
  std::ostringstream ss;
  ss.precision(17);
  ss << static_cast<double>(ns) / static_cast<double>(scale);
  return ss.str();
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string DidYouMean(const std::string& unknown, const std::vector<std::string>& candidates) {
  std::string s = Suggest(unknown, candidates);
  return s.empty() ? std::string() : "; did you mean '" + s + "'?";
}

}  // namespace chronolink::config_internal
