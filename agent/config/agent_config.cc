// Agent configuration: built-in defaults < JSON config file < CHRONOLINK_*
// environment < command-line flags. Every setting is described once in
// kSpecs (file key, flag, environment name, kind); the three sources are
// parsed into layers of typed values that remember where each value came
// from, merged by precedence, then validated as a whole. Error messages name
// the source of the offending value. The option reference is
// docs/configuration.md; keep the two in step.
#include "agent/config/agent_config.h"
#include "agent/config/json_file.h"
#include "agent/cluster/probe_graph.h"

#include <arpa/inet.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <variant>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

extern char** environ;

namespace chronolink {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr std::string_view kEnvPrefix = "CHRONOLINK_";
constexpr std::string_view kConfigEnv = "CHRONOLINK_CONFIG";

// ---------------------------------------------------------------------------
// Option table.

enum class Kind {
  kId,            // integer 1..2^32-1
  kPort,          // integer 1..65535
  kCount,         // integer 0..2^31-1 (ranges checked in validation)
  kInt64,         // integer, int64
  kDouble,        // finite number
  kNsFromSec,     // number of seconds, stored as int64 ns
  kNsFromMs,      // number of milliseconds, stored as int64 ns
  kNsFromUs,      // number of microseconds, stored as int64 ns
  kString,        // non-empty string
  kPath,          // non-empty string; relative paths resolved (see ResolvePath)
  kAddress,       // IPv4/IPv6 literal
  kLogLevel,      // trace|debug|info|warn|error
  kBool,          // true/false
  kIdList,        // list of node ids
  kSourceList,    // list of source class names
};

struct Spec {
  const char* key;      // config-file key, dotted for nested objects
  const char* flag;     // without the leading "--"; env = CHRONOLINK_ + UPPER_SNAKE(flag)
  Kind kind;
  const char* metavar;  // shown in --help
  const char* group;    // --help section
  const char* help;
};

constexpr const char* kGeneral = "General";
constexpr const char* kProbing = "Probing";
constexpr const char* kEstimation = "Estimation";
constexpr const char* kCapture = "Timestamp capture";
constexpr const char* kCluster = "Cluster";
constexpr const char* kTestOnly = "Test only (refused without --test-mode)";

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
    {"metrics", "metrics", Kind::kString, "ADDR:PORT", kGeneral,
     "Serve Prometheus metrics at http://ADDR:PORT/metrics, e.g. 127.0.0.1:9319 (default: off)"},
    {"log_level", "log-level", Kind::kLogLevel, "LEVEL", kGeneral,
     "trace|debug|info|warn|error (default: info)"},
    {"duration_s", "duration-s", Kind::kNsFromSec, "SEC", kGeneral,
     "Run this many seconds, then shut down cleanly (default: until SIGINT/SIGTERM)"},

    {"probe.interval_us", "probe-interval-us", Kind::kNsFromUs, "US", kProbing,
     "One probe pair per interval per edge; >= 2x spacing, <= 10 s (default: 1000)"},
    {"probe.spacing_us", "probe-spacing-us", Kind::kNsFromUs, "US", kProbing,
     "Gap between the two probes of a pair, >= 1 (default: 100)"},
    {"probe.jitter", "probe-jitter", Kind::kDouble, "FRAC", kProbing,
     "Uniform +/- jitter on the interval, as a fraction 0..0.9 (default: 0.2)"},
    {"probe.tuple_timeout_ms", "probe-tuple-timeout-ms", Kind::kNsFromMs, "MS", kProbing,
     "Drop incomplete Pt/Pr tuples after this long (default: 500)"},
    {"probe.followup_delay_ms", "probe-followup-delay-ms", Kind::kNsFromMs, "MS", kProbing,
     "Send a follow-up with the last TX stamps if no next pair by then; < tuple timeout (default: 20)"},
    {"probe.max_pending_tuples", "probe-max-pending-tuples", Kind::kCount, "N", kProbing,
     "Cap on incomplete tuples per edge, >= 1 (default: 4096)"},

    {"estimation.window_s", "window-s", Kind::kNsFromSec, "SEC", kEstimation,
     "Estimation window; >= 0.1 s and >= 10x probe interval (default: 2)"},
    {"estimation.window_grace_ms", "window-grace-ms", Kind::kNsFromMs, "MS", kEstimation,
     "Wait this long past a window's end for late stamps; < window (default: 300)"},
    {"estimation.purity_tolerance_ns", "purity-tolerance-ns", Kind::kInt64, "NS", kEstimation,
     "A pair is pure if |rx spacing - tx spacing| <= this; 1..spacing (default: 300)"},
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
     "Comma-separated etcd client URLs, http://HOST:PORT (required with --coordination etcd)"},
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
};

// The file's nested objects.
const char* const kSections[] = {"probe", "estimation", "capture", "cluster", "virtual_clock"};

std::string EnvName(const Spec& s) {
  std::string out(kEnvPrefix);
  for (const char* p = s.flag; *p != '\0'; ++p) {
    out += (*p == '-') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
  }
  return out;
}

bool IsVirtualClockKey(const std::string& key) { return key.rfind("virtual_clock.", 0) == 0; }

// ---------------------------------------------------------------------------
// Values and layers.

using Payload =
    std::variant<int64_t, double, bool, std::string, std::vector<uint32_t>, std::vector<SourceClass>>;

struct Value {
  Payload v;
  std::string origin;  // "--flag", "CHRONOLINK_X" or "\"key\" in config file F"
};

using Layer = std::map<std::string, Value>;  // by file key

// Overlay `upper` on `lower`. key_file and key_hex are two spellings of one
// setting: either one in a higher layer replaces both of a lower layer.
void Overlay(Layer* lower, const Layer& upper) {
  if (upper.count("key_file") != 0 || upper.count("key_hex") != 0) {
    lower->erase("key_file");
    lower->erase("key_hex");
  }
  for (const auto& [k, v] : upper) (*lower)[k] = v;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

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

// Text from a flag or an environment variable -> typed value.
bool ParseText(const Spec& spec, const std::string& raw, const fs::path& cwd, Payload* out,
               std::string* why) {
  const std::string text = Trim(raw);
  switch (spec.kind) {
    case Kind::kId:
    case Kind::kPort:
    case Kind::kCount:
    case Kind::kInt64: {
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
    case Kind::kNsFromUs: {
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
    case Kind::kString:
    case Kind::kPath:
    case Kind::kAddress:
    case Kind::kLogLevel:
      return FinishString(spec, text, cwd, out, why);
    case Kind::kBool: {
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
    case Kind::kIdList: {
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
    case Kind::kSourceList: {
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
  }
  *why = "unsupported option kind";
  return false;
}

// JSON value from the config file -> typed value.
bool ParseJsonValue(const Spec& spec, const json& j, const fs::path& config_dir, Payload* out,
                    std::string* why) {
  auto expect = [&](const char* what) {
    *why = std::string("must be ") + what + ", got " + j.dump();
    return false;
  };
  switch (spec.kind) {
    case Kind::kId:
    case Kind::kPort:
    case Kind::kCount:
    case Kind::kInt64: {
      int64_t v = 0;
      if (j.is_number_unsigned()) {
        uint64_t u = j.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return expect("an int64 integer");
        v = static_cast<int64_t>(u);
      } else if (j.is_number_integer()) {
        v = j.get<int64_t>();
      } else {
        return expect("an integer");
      }
      return ParseText(spec, std::to_string(v), config_dir, out, why);
    }
    case Kind::kDouble:
      if (!j.is_number()) return expect("a number");
      *out = j.get<double>();
      return true;
    case Kind::kNsFromSec:
    case Kind::kNsFromMs:
    case Kind::kNsFromUs: {
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
        return expect((std::string("a number of ") + UnitName(spec.kind)).c_str());
      }
      if (!ok) {
        *why = j.dump() + " " + UnitName(spec.kind) + " is out of range";
        return false;
      }
      *out = ns;
      return true;
    }
    case Kind::kString:
    case Kind::kPath:
    case Kind::kAddress:
    case Kind::kLogLevel:
      if (!j.is_string()) return expect("a string");
      return FinishString(spec, j.get<std::string>(), config_dir, out, why);
    case Kind::kBool:
      if (!j.is_boolean()) return expect("true or false");
      *out = j.get<bool>();
      return true;
    case Kind::kIdList: {
      if (!j.is_array()) return expect("an array of node ids");
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
    case Kind::kSourceList: {
      if (!j.is_array()) return expect("an array of source class names");
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
  }
  *why = "unsupported option kind";
  return false;
}

// ---------------------------------------------------------------------------
// "Did you mean" for typos.

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

std::string DidYouMean(const std::string& unknown, const std::vector<std::string>& candidates) {
  std::string s = Suggest(unknown, candidates);
  return s.empty() ? std::string() : "; did you mean '" + s + "'?";
}

// ---------------------------------------------------------------------------
// Sources.

bool ParseConfigFile(const std::string& path, Layer* layer, bool* has_virtual_block,
                     std::string* virtual_block_origin, std::string* error) {
  const std::string where = "config file '" + path + "'";
  std::string text, why;
  json doc;
  if (!ReadWholeFile(path, &text, &why) || !ParseJsonNoDuplicates(text, &doc, &why)) {
    *error = where + ": " + why;
    return false;
  }
  if (!doc.is_object()) {
    *error = where + ": the top level must be a JSON object";
    return false;
  }

  const fs::path config_dir = fs::path(path).parent_path();
  std::map<std::string, const Spec*> by_key;
  std::vector<std::string> all_keys;
  for (const Spec& s : kSpecs) {
    by_key[s.key] = &s;
    all_keys.push_back(s.key);
  }
  for (const char* sec : kSections) all_keys.push_back(sec);

  auto visit = [&](const std::string& key, const json& value, bool top_level) -> bool {
    auto it = by_key.find(key);
    // A dotted key at the top level ("probe.interval_us": 5) is not a
    // spelling of the nested key; accepting it would let two spellings of
    // one setting silently override each other.
    if (it == by_key.end() || (top_level && key.find('.') != std::string::npos)) {
      *error = where + ": unknown key '" + key + "'" + DidYouMean(key, all_keys) +
               " (docs/configuration.md lists every key)";
      return false;
    }
    if (value.is_null()) return true;  // null = not set
    Payload p;
    std::string why;
    if (!ParseJsonValue(*it->second, value, config_dir, &p, &why)) {
      *error = where + ": \"" + key + "\" " + why;
      return false;
    }
    (*layer)[key] = Value{std::move(p), "\"" + key + "\" in " + where};
    return true;
  };

  for (const auto& [key, value] : doc.items()) {
    bool is_section = std::find_if(std::begin(kSections), std::end(kSections),
                                   [&](const char* s) { return key == s; }) != std::end(kSections);
    if (!is_section) {
      if (!visit(key, value, true)) return false;
      continue;
    }
    if (key == "virtual_clock") {
      *has_virtual_block = true;
      *virtual_block_origin = "\"virtual_clock\" in " + where;
    }
    if (value.is_null()) continue;
    if (!value.is_object()) {
      *error = where + ": \"" + key + "\" must be an object, got " + value.dump();
      return false;
    }
    for (const auto& [sub, sub_value] : value.items()) {
      if (!visit(key + "." + sub, sub_value, false)) return false;
    }
  }
  // Both key spellings in one file is ambiguous.
  if (layer->count("key_file") != 0 && layer->count("key_hex") != 0) {
    *error = where + " sets both \"key_file\" and \"key_hex\"; give exactly one";
    return false;
  }
  return true;
}

bool ReadEnvironment(const fs::path& cwd, Layer* layer, std::vector<std::string>* warnings,
                     std::string* error) {
  std::vector<std::string> known;
  for (const Spec& spec : kSpecs) {
    std::string name = EnvName(spec);
    known.push_back(name);
    const char* raw = std::getenv(name.c_str());
    if (raw == nullptr || Trim(raw).empty()) continue;  // empty = unset
    Payload p;
    std::string why;
    if (!ParseText(spec, raw, cwd, &p, &why)) {
      *error = "environment variable " + name + ": " + why;
      return false;
    }
    (*layer)[spec.key] = Value{std::move(p), "environment variable " + name};
  }
  if (layer->count("key_file") != 0 && layer->count("key_hex") != 0) {
    *error = "environment sets both CHRONOLINK_KEY_FILE and CHRONOLINK_KEY_HEX; give exactly one";
    return false;
  }
  // Other components may use the prefix too, so an unknown name is only
  // worth a warning, and only when it looks like a typo of ours.
  known.emplace_back(kConfigEnv);
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.rfind(kEnvPrefix, 0) != 0) continue;
    std::string name(entry.substr(0, entry.find('=')));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string best;
    size_t best_d = 3;
    for (const std::string& k : known) {
      size_t d = EditDistance(name, k);
      if (d < best_d) {
        best_d = d;
        best = k;
      }
    }
    if (!best.empty()) {
      warnings->push_back("ignoring environment variable " + name +
                          ", which is not a chronolink-agent setting; did you mean " + best + "?");
    }
  }
  return true;
}

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

int AddressFamily(const std::string& text) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, text.c_str(), buf) == 1) return AF_INET;
  if (inet_pton(AF_INET6, text.c_str(), buf) == 1) return AF_INET6;
  return 0;
}

int64_t RealtimeNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string FormatNsAs(int64_t ns, Kind k) {
  int64_t scale = Scale(k);
  if (ns % scale == 0) return std::to_string(ns / scale);
  std::ostringstream ss;
  ss.precision(17);
  ss << static_cast<double>(ns) / static_cast<double>(scale);
  return ss.str();
}

// ---------------------------------------------------------------------------
// Merged view used by validation.

class Merged {
 public:
  explicit Merged(Layer layer) : layer_(std::move(layer)) {}

  bool Has(const std::string& key) const { return layer_.count(key) != 0; }
  template <typename T>
  T Get(const std::string& key, T fallback) const {
    auto it = layer_.find(key);
    return it == layer_.end() ? fallback : std::get<T>(it->second.v);
  }
  // Where a value came from, for messages.
  std::string From(const std::string& key) const {
    auto it = layer_.find(key);
    return it == layer_.end() ? "default" : it->second.origin;
  }
  const Layer& layer() const { return layer_; }

 private:
  Layer layer_;
};

std::string Us(int64_t ns) { return FormatNsAs(ns, Kind::kNsFromUs) + " us"; }
std::string Ms(int64_t ns) { return FormatNsAs(ns, Kind::kNsFromMs) + " ms"; }
std::string Sec(int64_t ns) { return FormatNsAs(ns, Kind::kNsFromSec) + " s"; }

bool Validate(const Merged& m, const std::string& virtual_block_origin, AgentConfig* c,
              std::string* error) {
  auto fail = [&](const std::string& msg) {
    *error = msg;
    return false;
  };

  // --- Test-only options first: production must never skew its clock.
  c->test_mode = m.Get<bool>("test_mode", false);
  if (!c->test_mode) {
    std::string offending;
    for (const auto& [key, value] : m.layer()) {
      if (IsVirtualClockKey(key)) {
        offending = value.origin;
        break;
      }
    }
    if (offending.empty()) offending = virtual_block_origin;
    if (!offending.empty()) {
      return fail("the virtual clock options are test-only and require --test-mode (or "
                  "CHRONOLINK_TEST_MODE=1, or \"test_mode\": true in the config file), but " +
                  offending +
                  " was given without it. A production agent never skews its clock; remove the "
                  "virtual clock setting, or switch test mode on for a test bed.");
    }
  }
  if (c->test_mode) {
    c->virtual_clock.offset_ns = m.Get<int64_t>("virtual_clock.offset_ns", 0);
    c->virtual_clock.drift_ppm = m.Get<double>("virtual_clock.drift_ppm", 0.0);
    if (!(std::fabs(c->virtual_clock.drift_ppm) <= 100000.0)) {
      return fail("virtual clock drift " + std::to_string(c->virtual_clock.drift_ppm) + " ppm (" +
                  m.From("virtual_clock.drift_ppm") + ") is out of range -100000..100000 ppm");
    }
    if (m.Has("virtual_clock.t0_ns")) {
      c->virtual_clock.t0_ns = m.Get<int64_t>("virtual_clock.t0_ns", 0);
      c->virtual_t0_defaulted = false;
    } else {
      c->virtual_clock.t0_ns = RealtimeNowNs();
      c->virtual_t0_defaulted = true;
    }
  }

  // --- Coordination backend (decides whether a cluster file is needed).
  ClusterSettings& cs = c->cluster_settings;
  {
    const std::string backend = m.Get<std::string>("cluster.coordination", "static");
    if (backend == "static") cs.backend = CoordinationBackend::kStatic;
    else if (backend == "etcd") cs.backend = CoordinationBackend::kEtcd;
    else if (backend == "none") cs.backend = CoordinationBackend::kNone;
    else return fail("coordination backend '" + backend + "' (" + m.From("cluster.coordination") +
                     ") must be static, etcd or none");
  }
  const bool etcd = cs.backend == CoordinationBackend::kEtcd;

  // --- Cluster and identity.
  std::string why;
  if (!m.Has("cluster_file") && !etcd) {
    return fail("no cluster file: give --cluster-file FILE (or CHRONOLINK_CLUSTER_FILE, or "
                "\"cluster_file\" in the config file), or use --coordination etcd");
  }
  if (!m.Has("node_id")) {
    return fail("no node id: give --node-id N (or CHRONOLINK_NODE_ID, or \"node_id\" in the config "
                "file)");
  }
  c->node_id = static_cast<uint32_t>(m.Get<int64_t>("node_id", 0));
  const ClusterNode* self = nullptr;
  if (m.Has("cluster_file")) {
    c->cluster_file_path = m.Get<std::string>("cluster_file", "");
    if (!LoadClusterFile(c->cluster_file_path, &c->cluster, &why)) {
      return fail(why + " (cluster file from " + m.From("cluster_file") + ")");
    }
    self = c->cluster.Find(c->node_id);
    if (self == nullptr) {
      std::string ids;
      for (const ClusterNode& n : c->cluster.nodes) ids += (ids.empty() ? "" : ", ") + std::to_string(n.id);
      return fail("node id " + std::to_string(c->node_id) + " (" + m.From("node_id") +
                  ") is not in cluster file " + c->cluster_file_path + " (ids: " + ids + ")");
    }
    if (m.Has("cluster.id")) {
      return fail("--cluster-id (" + m.From("cluster.id") + ") and a cluster file (" +
                  m.From("cluster_file") + ") both give the cluster id; keep one");
    }
  } else {
    // etcd without a file: this node's own identity is all it needs; the
    // members come from etcd.
    const int64_t id = m.Get<int64_t>("cluster.id", -1);
    if (id < 0 || id > static_cast<int64_t>(UINT32_MAX)) {
      return fail(m.Has("cluster.id") ? "cluster id (" + m.From("cluster.id") + ") must be in 0..4294967295"
                                      : std::string("--coordination etcd without a cluster file needs "
                                                    "--cluster-id N"));
    }
    c->cluster.cluster_id = static_cast<uint32_t>(id);
    if (!m.Has("listen") || !m.Has("port")) {
      return fail("--coordination etcd without a cluster file needs --listen ADDR and --port N: the "
                  "address other nodes probe this one at");
    }
  }

  // --- Socket.
  c->listen_address = m.Get<std::string>("listen", self != nullptr ? self->address : std::string());
  c->listen_port = static_cast<uint16_t>(m.Get<int64_t>("port", self != nullptr ? self->port : 0));
  if (etcd && (c->listen_address == "0.0.0.0" || c->listen_address == "::")) {
    return fail("listen address " + c->listen_address + " (" + m.From("listen") +
                ") is a wildcard; with etcd it is also the address other nodes probe this one at, so "
                "give this node's own address");
  }

  // --- Cluster settings.
  cs.probe_k = static_cast<int>(m.Get<int64_t>("cluster.probe_k", 0));
  if (m.Has("cluster.probe_k") && cs.probe_k < 2) {
    return fail("probe k " + std::to_string(cs.probe_k) + " (" + m.From("cluster.probe_k") +
                ") must be at least 2 (fewer peers leave no cycle to check loops on)");
  }
  {
    const std::string ref = m.Get<std::string>("cluster.reference", "mean");
    if (ref != "mean") {
      uint32_t id = 0;
      const auto [ptr, ec2] = std::from_chars(ref.data(), ref.data() + ref.size(), id);
      if (ec2 != std::errc() || ptr != ref.data() + ref.size() || id == 0) {
        return fail("reference '" + ref + "' (" + m.From("cluster.reference") +
                    ") must be mean or a node id");
      }
      if (self != nullptr && c->cluster.Find(id) == nullptr) {
        return fail("reference node " + ref + " (" + m.From("cluster.reference") +
                    ") is not in cluster file " + c->cluster_file_path);
      }
      cs.reference_node = id;
    }
  }
  cs.coordination_port = static_cast<uint16_t>(m.Get<int64_t>("cluster.coordination_port", 0));
  {
    std::stringstream ss(m.Get<std::string>("cluster.etcd_endpoints", ""));
    std::string url;
    while (std::getline(ss, url, ',')) {
      if (url.rfind("http://", 0) != 0 || url.size() <= 7) {
        return fail("etcd endpoint '" + url + "' (" + m.From("cluster.etcd_endpoints") +
                    ") must be http://HOST:PORT (TLS is not supported; see docs/cluster.md)");
      }
      cs.etcd_endpoints.push_back(url);
    }
  }
  if (etcd && cs.etcd_endpoints.empty()) {
    return fail("--coordination etcd needs --etcd-endpoints http://HOST:PORT[,...]");
  }
  if (!etcd && m.Has("cluster.etcd_endpoints")) {
    return fail("etcd endpoints (" + m.From("cluster.etcd_endpoints") +
                ") are given, but the coordination backend is " +
                std::string(CoordinationBackendName(cs.backend)) + "; add --coordination etcd");
  }
  cs.etcd_prefix = m.Get<std::string>("cluster.etcd_prefix", cs.etcd_prefix);
  if (cs.etcd_prefix.empty() || cs.etcd_prefix.back() != '/') cs.etcd_prefix += '/';
  cs.lease_ttl_s = m.Get<int64_t>("cluster.lease_ttl_s", cs.lease_ttl_s);
  if (cs.lease_ttl_s < 2 || cs.lease_ttl_s > 60) {
    return fail("lease TTL " + std::to_string(cs.lease_ttl_s) + " s (" + m.From("cluster.lease_ttl_s") +
                ") must be in 2..60 s");
  }
  cs.solve_delay_ns = m.Get<int64_t>("cluster.solve_delay_ms", cs.solve_delay_ns);
  if (cs.solve_delay_ns < 0) {
    return fail("solve delay (" + m.From("cluster.solve_delay_ms") + ") must not be negative");
  }
  cs.retention_ns = m.Get<int64_t>("cluster.retention_s", cs.retention_ns);
  if (cs.retention_ns < 10'000'000'000) {
    return fail("window retention " + Sec(cs.retention_ns) + " (" + m.From("cluster.retention_s") +
                ") must be at least 10 s");
  }
  {
    const std::string page = m.Get<std::string>("clock_page", "/dev/shm/chronolink-" + std::to_string(c->node_id));
    cs.clock_page_path = page == "off" ? std::string() : page;
  }

  // --- Peers: --peers, or the node's neighbours in the probe graph.
  std::vector<uint32_t> peers = m.Get<std::vector<uint32_t>>("peers", {});
  if (!peers.empty() && etcd) {
    return fail("--peers (" + m.From("peers") + ") cannot be used with --coordination etcd: the peers "
                "follow etcd's member list through the probe graph");
  }
  if (peers.empty() && !etcd) {
    std::vector<uint32_t> ids;
    for (const ClusterNode& n : c->cluster.nodes) ids.push_back(n.id);
    ProbeGraphOptions go;
    go.k = cs.probe_k;
    peers = ProbeGraph::Build(ids, go).PeersOf(c->node_id);
    if (peers.empty()) {
      return fail("cluster file " + c->cluster_file_path + " lists only this node (" +
                  std::to_string(c->node_id) + "); there is no peer to probe");
    }
  } else if (!peers.empty()) {
    cs.peers_explicit = true;
    std::set<uint32_t> seen;
    for (uint32_t p : peers) {
      if (p == c->node_id) {
        return fail("peer " + std::to_string(p) + " (" + m.From("peers") +
                    ") is this node itself; a node does not probe itself");
      }
      if (c->cluster.Find(p) == nullptr) {
        return fail("peer " + std::to_string(p) + " (" + m.From("peers") +
                    ") is not in cluster file " + c->cluster_file_path);
      }
      if (!seen.insert(p).second) {
        return fail("peer " + std::to_string(p) + " is listed twice (" + m.From("peers") + ")");
      }
    }
  }
  c->peers = std::move(peers);

  // A socket of one family cannot reach peers of the other; only an IPv6
  // wildcard ("::", dual-stack) may serve both.
  const int listen_family = AddressFamily(c->listen_address);
  if (c->listen_address != "::") {
    for (uint32_t id : c->peers) {
      const ClusterNode* peer = c->cluster.Find(id);
      if (AddressFamily(peer->address) != listen_family) {
        return fail("peer " + std::to_string(id) + " has address " + peer->address + ", but this node listens on " +
                    c->listen_address + " (" +
                    (m.Has("listen") ? m.From("listen") : std::string("its address in the cluster file")) +
                    "), an address of the other IP family; choose peers of the same family (--peers), or "
                    "listen on \"::\" for a dual-stack socket");
      }
    }
  }

  // --- Key (mandatory: the wire format is authenticated).
  if (m.Has("key_file")) {
    c->key_file_path = m.Get<std::string>("key_file", "");
    if (!LoadClusterKeyFile(c->key_file_path, &c->key, &why)) {
      return fail(why + " (key file from " + m.From("key_file") + ")");
    }
  } else if (m.Has("key_hex")) {
    if (!ParseClusterKeyHex(m.Get<std::string>("key_hex", ""), &c->key, &why)) {
      return fail("cluster key from " + m.From("key_hex") + ": " + why);
    }
  } else {
    return fail("no cluster key: give --key-file FILE (preferred) or --key-hex HEX (or "
                "CHRONOLINK_KEY_FILE / CHRONOLINK_KEY_HEX, or \"key_file\" / \"key_hex\" in the "
                "config file). The key is mandatory because every probe is authenticated.");
  }

  c->output_dir = m.Get<std::string>("output_dir", c->output_dir);
  c->log_level = m.Get<std::string>("log_level", c->log_level);
  {
    const std::string metrics = m.Get<std::string>("metrics", "off");
    if (metrics != "off") {
      const size_t colon = metrics.rfind(':');
      std::string host = colon == std::string::npos ? "" : metrics.substr(0, colon);
      if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
      const std::string port = colon == std::string::npos ? "" : metrics.substr(colon + 1);
      int64_t port_value = -1;
      try {
        size_t used = 0;
        port_value = std::stoll(port, &used);
        if (used != port.size()) port_value = -1;
      } catch (...) {
      }
      if (!IsIpAddressLiteral(host) || port_value < 0 || port_value > 65535) {
        return fail("metrics address '" + metrics + "' (" + m.From("metrics") +
                    ") must be IP:PORT, e.g. 127.0.0.1:9319 ([::1]:9319 for IPv6; port 0 picks one), or off");
      }
      c->metrics_address = host;
      c->metrics_port = static_cast<uint16_t>(port_value);
    }
  }

  // --- Probing.
  ProbeSettings& p = c->probe;
  p.spacing_ns = m.Get<int64_t>("probe.spacing_us", p.spacing_ns);
  p.interval_ns = m.Get<int64_t>("probe.interval_us", p.interval_ns);
  p.jitter_fraction = m.Get<double>("probe.jitter", p.jitter_fraction);
  p.tuple_timeout_ns = m.Get<int64_t>("probe.tuple_timeout_ms", p.tuple_timeout_ns);
  p.followup_delay_ns = m.Get<int64_t>("probe.followup_delay_ms", p.followup_delay_ns);
  p.max_pending_tuples =
      static_cast<size_t>(m.Get<int64_t>("probe.max_pending_tuples", static_cast<int64_t>(p.max_pending_tuples)));
  if (p.spacing_ns < 1000) {
    return fail("probe spacing " + Us(p.spacing_ns) + " (" + m.From("probe.spacing_us") +
                ") must be at least 1 us");
  }
  if (p.interval_ns < 2 * p.spacing_ns) {
    return fail("probe interval " + Us(p.interval_ns) + " (" + m.From("probe.interval_us") +
                ") must be at least twice the probe spacing " + Us(p.spacing_ns) + " (" +
                m.From("probe.spacing_us") + "), so that the pairs of one edge never overlap");
  }
  if (p.interval_ns > 10'000'000'000) {
    return fail("probe interval " + Us(p.interval_ns) + " (" + m.From("probe.interval_us") +
                ") must be at most 10 s");
  }
  if (!(p.jitter_fraction >= 0.0 && p.jitter_fraction <= 0.9)) {
    return fail("probe jitter " + std::to_string(p.jitter_fraction) + " (" + m.From("probe.jitter") +
                ") must be a fraction in 0..0.9");
  }
  if (p.tuple_timeout_ns <= 0) {
    return fail("tuple timeout " + Ms(p.tuple_timeout_ns) + " (" + m.From("probe.tuple_timeout_ms") +
                ") must be positive");
  }
  if (p.followup_delay_ns <= 0 || p.followup_delay_ns >= p.tuple_timeout_ns) {
    return fail("follow-up delay " + Ms(p.followup_delay_ns) + " (" +
                m.From("probe.followup_delay_ms") + ") must be positive and shorter than the tuple timeout " +
                Ms(p.tuple_timeout_ns) + " (" + m.From("probe.tuple_timeout_ms") +
                "), or the last tuples of a session never complete");
  }
  if (p.max_pending_tuples < 1) {
    return fail("max pending tuples (" + m.From("probe.max_pending_tuples") + ") must be at least 1");
  }

  // --- Estimation.
  EstimationSettings& e = c->estimation;
  e.window_ns = m.Get<int64_t>("estimation.window_s", e.window_ns);
  e.window_grace_ns = m.Get<int64_t>("estimation.window_grace_ms", e.window_grace_ns);
  e.purity_tolerance_ns = m.Get<int64_t>("estimation.purity_tolerance_ns", e.purity_tolerance_ns);
  e.min_points_per_side = static_cast<int>(m.Get<int64_t>("estimation.min_points", e.min_points_per_side));
  e.source_classes = m.Get<std::vector<SourceClass>>("estimation.sources", e.source_classes);
  if (e.window_ns < 100'000'000) {
    return fail("estimation window " + Sec(e.window_ns) + " (" + m.From("estimation.window_s") +
                ") must be at least 0.1 s");
  }
  if (e.window_ns / 10 < p.interval_ns) {
    return fail("estimation window " + Sec(e.window_ns) + " (" + m.From("estimation.window_s") +
                ") must be at least 10x the probe interval " + Us(p.interval_ns) + " (" +
                m.From("probe.interval_us") + "), or a window holds too few pairs to fit");
  }
  if (e.window_grace_ns < 0 || e.window_grace_ns >= e.window_ns) {
    return fail("window grace " + Ms(e.window_grace_ns) + " (" + m.From("estimation.window_grace_ms") +
                ") must be 0 or more and shorter than the window " + Sec(e.window_ns) + " (" +
                m.From("estimation.window_s") + ")");
  }
  if (e.purity_tolerance_ns < 1 || e.purity_tolerance_ns > p.spacing_ns) {
    return fail("purity tolerance " + std::to_string(e.purity_tolerance_ns) + " ns (" +
                m.From("estimation.purity_tolerance_ns") + ") must be in 1 ns..the probe spacing " +
                Us(p.spacing_ns) + " (" + m.From("probe.spacing_us") + ")");
  }
  if (e.min_points_per_side < 2) {
    return fail("min points " + std::to_string(e.min_points_per_side) + " (" +
                m.From("estimation.min_points") + ") must be at least 2 (a line needs two points)");
  }
  if (e.source_classes.empty()) {
    return fail("no timestamp source class to estimate from (" + m.From("estimation.sources") +
                "); list at least one of kernel, userspace");
  }
  {
    std::set<SourceClass> seen;
    for (SourceClass sc : e.source_classes) {
      if (!seen.insert(sc).second) {
        return fail("source class '" + std::string(SourceClassName(sc)) + "' is listed twice (" +
                    m.From("estimation.sources") + ")");
      }
    }
  }

  // --- Timestamp capture.
  CaptureSettings& cap = c->capture;
  {
    const std::string bpf = m.Get<std::string>("capture.bpf", "auto");
    if (bpf == "auto") cap.bpf = BpfMode::kAuto;
    else if (bpf == "on") cap.bpf = BpfMode::kOn;
    else if (bpf == "off") cap.bpf = BpfMode::kOff;
    else return fail("eBPF mode '" + bpf + "' (" + m.From("capture.bpf") + ") must be auto, on or off");
    const std::string xdp = m.Get<std::string>("capture.xdp", "auto");
    if (xdp == "auto") cap.xdp = BpfMode::kAuto;
    else if (xdp == "on") cap.xdp = BpfMode::kOn;
    else if (xdp == "off") cap.xdp = BpfMode::kOff;
    else return fail("XDP mode '" + xdp + "' (" + m.From("capture.xdp") + ") must be auto, on or off");
    const std::string devs = m.Get<std::string>("capture.bpf_interfaces", "");
    std::stringstream ss(devs);
    std::string dev;
    while (std::getline(ss, dev, ',')) {
      if (dev.empty() || dev.size() >= 16) {
        return fail("interface name '" + dev + "' (" + m.From("capture.bpf_interfaces") +
                    ") must be 1..15 characters");
      }
      cap.bpf_interfaces.push_back(dev);
    }
    const std::string src = m.Get<std::string>("capture.timestamp_source", "auto");
    if (src != "auto") {
      StampSource forced;
      if (!ParseStampSource(src, &forced) || forced == StampSource::kNone ||
          forced == StampSource::kUserspace) {
        return fail("timestamp source '" + src + "' (" + m.From("capture.timestamp_source") +
                    ") must be auto, socket_sched, socket_software, bpf_tc, bpf_xdp or hardware");
      }
      if ((forced == StampSource::kBpfTc || forced == StampSource::kBpfXdp) &&
          cap.bpf == BpfMode::kOff) {
        return fail("timestamp source '" + src + "' needs the eBPF tap, but it is off (" +
                    m.From("capture.bpf") + ")");
      }
      cap.forced_source = forced;
    }
    cap.stamp_log_path = m.Get<std::string>("capture.stamp_log", "");
  }

  // --- Run length.
  if (m.Has("duration_s")) {
    int64_t d = m.Get<int64_t>("duration_s", 0);
    if (d <= 0) {
      return fail("duration " + Sec(d) + " (" + m.From("duration_s") +
                  ") must be positive; leave it out to run until signalled");
    }
    c->duration_ns = d;
  }
  return true;
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

  // --- Flags.
  CLI::App app("chronolink-agent: probes peers with authenticated UDP probe pairs and estimates "
               "per-edge clock offset and drift.",
               "chronolink-agent");
  app.set_version_flag("--version", std::string(AgentVersionString()));
  app.footer(
      "Settings come from, lowest to highest precedence: built-in defaults, the JSON config file "
      "(--config or CHRONOLINK_CONFIG), environment variables CHRONOLINK_<FLAG> (the flag name in "
      "UPPER_SNAKE_CASE, e.g. CHRONOLINK_PROBE_INTERVAL_US), then these flags. Relative paths in "
      "the config file are relative to the file's directory. Full reference: "
      "docs/configuration.md.");
  std::string config_flag;
  CLI::Option* config_opt =
      app.add_option("--config", config_flag, "JSON config file [env: CHRONOLINK_CONFIG]")
          ->type_name("FILE")
          ->group(kGeneral)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  constexpr size_t kNumSpecs = std::size(kSpecs);
  std::vector<std::string> flag_text(kNumSpecs);
  std::vector<CLI::Option*> flag_opts(kNumSpecs, nullptr);
  bool test_mode_flag = false;
  for (size_t i = 0; i < kNumSpecs; ++i) {
    const Spec& s = kSpecs[i];
    std::string help = std::string(s.help) + " [env: " + EnvName(s) + "]";
    if (s.kind == Kind::kBool) {
      flag_opts[i] = app.add_flag(std::string("--") + s.flag, test_mode_flag, help)->group(s.group);
    } else {
      flag_opts[i] = app.add_option(std::string("--") + s.flag, flag_text[i], help)
                         ->type_name(s.metavar)
                         ->group(s.group);
    }
    // A repeated flag: the last one wins, so wrappers can append overrides.
    flag_opts[i]->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }

  std::vector<const char*> args;
  const char* const* parse_argv = argv;
  if (argc <= 0 || argv == nullptr) {
    args.push_back("chronolink-agent");
    parse_argv = args.data();
    argc = 1;
  }
  try {
    app.parse(argc, parse_argv);
  } catch (const CLI::CallForHelp& e) {
    std::ostringstream out, err;
    app.exit(e, out, err);
    *error = out.str();
    *exit_code = 0;
    return std::nullopt;
  } catch (const CLI::CallForAllHelp& e) {
    std::ostringstream out, err;
    app.exit(e, out, err);
    *error = out.str();
    *exit_code = 0;
    return std::nullopt;
  } catch (const CLI::CallForVersion& e) {
    *error = e.what();
    *exit_code = 0;
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    return fail(std::string(e.what()) + ". Run with --help for usage.");
  }

  Layer flags;
  for (size_t i = 0; i < kNumSpecs; ++i) {
    const Spec& s = kSpecs[i];
    if (flag_opts[i]->count() == 0) continue;
    const std::string origin = std::string("--") + s.flag;
    if (s.kind == Kind::kBool) {
      flags[s.key] = Value{test_mode_flag, origin};
      continue;
    }
    Payload p;
    std::string why;
    if (!ParseText(s, flag_text[i], cwd, &p, &why)) return fail(origin + ": " + why);
    flags[s.key] = Value{std::move(p), origin};
  }
  if (flags.count("key_file") != 0 && flags.count("key_hex") != 0) {
    return fail("both --key-file and --key-hex given; give exactly one");
  }

  // --- Environment.
  AgentConfig config;
  Layer env;
  if (!ReadEnvironment(cwd, &env, &config.warnings, error)) return fail(*error);

  // --- Config file.
  Layer file;
  bool has_virtual_block = false;
  std::string virtual_block_origin;
  std::string config_path;
  if (config_opt->count() > 0) {
    if (config_flag.empty()) return fail("--config: must not be empty");
    config_path = config_flag;
  } else if (const char* v = std::getenv(std::string(kConfigEnv).c_str()); v != nullptr && !Trim(v).empty()) {
    config_path = Trim(v);
  }
  if (!config_path.empty()) {
    fs::path p(config_path);
    if (p.is_relative()) p = cwd / p;
    config.config_file_path = p.lexically_normal().string();
    if (!ParseConfigFile(config.config_file_path, &file, &has_virtual_block, &virtual_block_origin,
                         error)) {
      return fail(*error);
    }
  }

  Layer merged = std::move(file);
  Overlay(&merged, env);
  Overlay(&merged, flags);
  if (!Validate(Merged(std::move(merged)), has_virtual_block ? virtual_block_origin : std::string(),
                &config, error)) {
    return fail(*error);
  }
  *exit_code = 0;
  return config;
}

std::string EffectiveConfigJson(const AgentConfig& c) {
  auto num = [](int64_t ns, Kind k) { return json::parse(FormatNsAs(ns, k)); };
  json j;
  j["node_id"] = c.node_id;
  if (!c.cluster_file_path.empty()) j["cluster_file"] = c.cluster_file_path;
  j["listen"] = c.listen_address;
  j["port"] = c.listen_port;
  if (!c.key_file_path.empty()) j["key_file"] = c.key_file_path;
  j["output_dir"] = c.output_dir;
  if (c.cluster_settings.peers_explicit) j["peers"] = c.peers;
  j["log_level"] = c.log_level;
  if (!c.metrics_address.empty()) {
    j["metrics"] = (c.metrics_address.find(':') != std::string::npos ? "[" + c.metrics_address + "]"
                                                                     : c.metrics_address) +
                   ":" + std::to_string(c.metrics_port);
  }
  if (c.duration_ns) j["duration_s"] = num(*c.duration_ns, Kind::kNsFromSec);
  {
    const ClusterSettings& cs = c.cluster_settings;
    json cl = {{"coordination", std::string(CoordinationBackendName(cs.backend))},
               {"reference", cs.reference_node ? json(std::to_string(*cs.reference_node)) : json("mean")},
               {"lease_ttl_s", cs.lease_ttl_s},
               {"solve_delay_ms", num(cs.solve_delay_ns, Kind::kNsFromMs)},
               {"retention_s", num(cs.retention_ns, Kind::kNsFromSec)}};
    if (cs.probe_k > 0) cl["probe_k"] = cs.probe_k;
    if (cs.backend == CoordinationBackend::kStatic && cs.coordination_port != 0) {
      cl["coordination_port"] = cs.coordination_port;
    }
    if (cs.backend == CoordinationBackend::kEtcd) {
      std::string urls;
      for (const auto& u : cs.etcd_endpoints) urls += (urls.empty() ? "" : ",") + u;
      cl["etcd_endpoints"] = urls;
      cl["etcd_prefix"] = cs.etcd_prefix;
      if (c.cluster_file_path.empty()) cl["id"] = c.cluster.cluster_id;
    }
    j["cluster"] = cl;
    j["clock_page"] = cs.clock_page_path.empty() ? std::string("off") : cs.clock_page_path;
  }
  j["probe"] = {
      {"interval_us", num(c.probe.interval_ns, Kind::kNsFromUs)},
      {"spacing_us", num(c.probe.spacing_ns, Kind::kNsFromUs)},
      {"jitter", c.probe.jitter_fraction},
      {"tuple_timeout_ms", num(c.probe.tuple_timeout_ns, Kind::kNsFromMs)},
      {"followup_delay_ms", num(c.probe.followup_delay_ns, Kind::kNsFromMs)},
      {"max_pending_tuples", c.probe.max_pending_tuples},
  };
  json sources = json::array();
  for (SourceClass sc : c.estimation.source_classes) sources.push_back(std::string(SourceClassName(sc)));
  j["estimation"] = {
      {"window_s", num(c.estimation.window_ns, Kind::kNsFromSec)},
      {"window_grace_ms", num(c.estimation.window_grace_ns, Kind::kNsFromMs)},
      {"purity_tolerance_ns", c.estimation.purity_tolerance_ns},
      {"min_points", c.estimation.min_points_per_side},
      {"sources", sources},
  };
  {
    json devs = json::array();
    for (const auto& d : c.capture.bpf_interfaces) devs.push_back(d);
    std::string joined;
    for (const auto& d : c.capture.bpf_interfaces) joined += (joined.empty() ? "" : ",") + d;
    j["capture"] = {{"bpf", std::string(BpfModeName(c.capture.bpf))},
                    {"xdp", std::string(BpfModeName(c.capture.xdp))},
                    {"timestamp_source", c.capture.forced_source == StampSource::kNone
                                             ? std::string("auto")
                                             : std::string(StampSourceName(c.capture.forced_source))}};
    if (!joined.empty()) j["capture"]["bpf_interfaces"] = joined;
    if (!c.capture.stamp_log_path.empty()) j["capture"]["stamp_log"] = c.capture.stamp_log_path;
  }
  j["test_mode"] = c.test_mode;
  if (c.test_mode) {
    j["virtual_clock"] = {
        {"offset_ns", c.virtual_clock.offset_ns},
        {"drift_ppm", c.virtual_clock.drift_ppm},
        {"t0_ns", c.virtual_clock.t0_ns},
    };
  }
  return j.dump(2);
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
