// The collector's option table and its three sources (file, environment,
// flags or embedding JSON), parsed with the agent's value parsers.
#include "collector/config/collector_options.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/quoted_text.h"
#include "options/option_values.h"

namespace chronolink::collector {
namespace {

using options::Kind;
using options::Payload;
using options::Spec;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kGpu = "GPU";
constexpr const char* kSampling = "Snapshot sampling";
constexpr const char* kCluster = "Cluster time";
constexpr const char* kTest = "Test only (refused without --test-mode)";
constexpr const char* kConfigEnv = "CHRONOLINK_COLLECTOR_CONFIG";

const Spec kSpecs[] = {
    {"backend", "backend", Kind::kString, "NAME", kGpu,
     "GPU backend: auto (rocm, then cuda), rocm, cuda, simulated (default: auto)"},
    {"no_device", "no-device", Kind::kString, "ACTION", kGpu,
     "When the backend finds no library or device: continue (collect nothing, export the host "
     "clock chain only) or fail (default: continue)"},
    {"devices", "devices", Kind::kString, "ORDINALS", kGpu,
     "Comma-separated device ordinals to use, e.g. 0,1 (default: all)"},
    {"backend_settings", "backend-settings", Kind::kString, "K=V,...", kGpu,
     "Backend-specific settings, e.g. for the simulated GPU devices=2,rate_hz=100000000,drift_ppm_per_s=0.01 (docs/collector.md)"},
    {"sample_period_ms", "sample-period-ms", Kind::kNsFromMs, "MS", kSampling,
     "One clock snapshot sample per device every MS, 1..60000 (default: 100)"},
    {"reads_per_sample", "reads-per-sample", Kind::kCount, "N", kSampling,
     "Bracketed counter reads per sample, the tightest kept, 1..1000 (default: 8)"},
    {"max_bracket_us", "max-bracket-us", Kind::kNsFromUs, "US", kSampling,
     "Refuse reads whose host bracket is wider than this, 1..10000000 (default: 50)"},
    {"max_knots", "max-knots", Kind::kCount, "N", kSampling,
     "Map points kept per device (memory bound; older detail is thinned), 16..1000000 (default: 4096)"},
    {"max_activity_records", "max-activity-records", Kind::kCount, "N", kGpu,
     "Activity records kept until export; more are dropped and counted, 1..100000000 (default: 1000000)"},
    {"clock_page", "clock-page", Kind::kString, "PATH", kCluster,
     "The agent's clock page to record host -> cluster time from: a path, 'auto' "
     "(/dev/shm/chronolink-<node-id>) or 'none' (default: auto when --node-id is given, else none)"},
    {"clock_page_owner", "clock-page-owner", Kind::kString, "USER", kCluster,
     "The agent's user (a name or uid), trusted to own the clock page besides root and this process's "
     "user, e.g. 10001 for the DaemonSet's agent; a page anyone else owns is refused (default: none)"},
    {"node_id", "node-id", Kind::kId, "N", kCluster, "This node's id in the cluster (names the clock page)"},
    {"host", "host", Kind::kString, "NAME", kCluster,
     "Host name written into the XSpace (default: this machine's host name)"},
    {"log_level", "log-level", Kind::kLogLevel, "LEVEL", kGpu, "trace|debug|info|warn|error (default: info)"},
    {"test_mode", "test-mode", Kind::kBool, "", kTest, "Allow the test-only options below"},
    {"virtual_clock.offset_ns", "virtual-offset-ns", Kind::kInt64, "NS", kTest,
     "Skew the host clock like the agent's test clocks: offset"},
    {"virtual_clock.drift_ppm", "virtual-drift-ppm", Kind::kDouble, "PPM", kTest, "... drift"},
    {"virtual_clock.t0_ns", "virtual-t0-ns", Kind::kInt64, "NS", kTest, "... reference instant"},
    {"virtual_clock.state_file", "virtual-clock-state", Kind::kPath, "FILE", kTest,
     "Or read the host clock from a test bed clock state file, as the node's agent does "
     "(oscillator wander, a daemon's discipline; docs/testbed.md); excludes the three above"},
};

struct Valued {
  Payload value;
  std::string origin;
};
using Layer = std::map<std::string, Valued>;

const Spec* FindSpec(const std::string& key) {
  for (const Spec& s : kSpecs) {
    if (key == s.key) return &s;
  }
  return nullptr;
}

std::vector<std::string> Keys() {
  std::vector<std::string> keys;
  for (const Spec& s : kSpecs) keys.emplace_back(s.key);
  return keys;
}

bool AddText(const Spec& spec, const std::string& text, const std::string& origin, Layer* layer,
             std::string* error) {
  Payload value;
  std::string why;
  if (!options::ParseText(spec, text, fs::current_path(), &value, &why)) {
    *error = origin + ": " + why;
    return false;
  }
  (*layer)[spec.key] = {std::move(value), origin};
  return true;
}

// A JSON object of file keys; nested objects ("virtual_clock": {...}) are
// flattened with dots.
bool AddJsonObject(const json& object, const std::string& prefix, const fs::path& base,
                   const std::string& what, Layer* layer, std::string* error) {
  for (const auto& [name, value] : object.items()) {
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    if (value.is_object()) {
      if (!AddJsonObject(value, key, base, what, layer, error)) return false;
      continue;
    }
    const Spec* spec = FindSpec(key);
    if (spec == nullptr) {
      *error = "unknown key \"" + key + "\" in " + what + options::DidYouMean(key, Keys());
      return false;
    }
    Payload parsed;
    std::string why;
    if (!options::ParseJsonValue(*spec, value, base, &parsed, &why)) {
      *error = "\"" + key + "\" in " + what + ": " + why;
      return false;
    }
    (*layer)[key] = {std::move(parsed), "\"" + key + "\" in " + what};
  }
  return true;
}

bool ParseJsonText(const std::string& text, const std::string& what, const fs::path& base, Layer* layer,
                   std::string* error) {
  // Bounded depth: an options object is flat but for virtual_clock.
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *error = what + " is not a JSON object";
    return false;
  }
  return AddJsonObject(j, "", base, what, layer, error);
}

bool ReadConfigFile(const std::string& path, Layer* layer, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read config file " + path;
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > (1u << 20)) {
    *error = "config file " + path + " is larger than 1 MiB";
    return false;
  }
  return ParseJsonText(text.str(), "config file " + path, fs::path(path).parent_path(), layer, error);
}

bool ReadEnvironment(Layer* layer, std::string* error) {
  for (const Spec& s : kSpecs) {
    const std::string name = options::EnvName(s);
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') continue;
    if (!AddText(s, v, name, layer, error)) return false;
  }
  return true;
}

template <typename T>
T Get(const Layer& l, const char* key, T fallback) {
  auto it = l.find(key);
  return it == l.end() ? fallback : std::get<T>(it->second.value);
}

std::string From(const Layer& l, const char* key) {
  auto it = l.find(key);
  return it == l.end() ? "default" : it->second.origin;
}

bool InRange(const Layer& l, const char* key, int64_t v, int64_t lo, int64_t hi, const std::string& what,
             std::string* error) {
  if (v >= lo && v <= hi) return true;
  *error = From(l, key) + ": must be " + what;
  return false;
}

bool ParseOrdinals(const std::string& text, std::vector<uint32_t>* out, std::string* why) {
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item = options::Trim(item);
    char* end = nullptr;
    errno = 0;
    const unsigned long v = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v > 1023) {
      *why = "'" + item + "' is not a device ordinal (0..1023)";
      return false;
    }
    out->push_back(static_cast<uint32_t>(v));
  }
  return true;
}

std::vector<std::string> SplitSettings(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item = options::Trim(item);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// A user name or a uid; "" names none. Root needs no naming (always trusted).
bool ResolvePageOwner(const std::string& text, const std::string& from, uint32_t* uid, std::string* error) {
  if (text.empty() || text == "none") return true;
  if (text.find_first_not_of("0123456789") == std::string::npos && text.size() <= 10) {
    const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (v < static_cast<uint32_t>(-1)) {
      *uid = static_cast<uint32_t>(v);
      return true;
    }
  } else {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r(text.c_str(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
      *uid = found->pw_uid;
      return true;
    }
  }
  *error = from + ": clock_page_owner '" + QuotedText(text) + "' is neither a uid nor a known user";
  return false;
}

bool Resolve(const Layer& l, CollectorOptions* o, std::string* error) {
  o->backend = Get<std::string>(l, "backend", o->backend);
  if (o->backend != "auto" && o->backend != "rocm" && o->backend != "cuda" && o->backend != "simulated") {
    *error = From(l, "backend") + ": '" + o->backend + "' is not a backend (auto, rocm, cuda, simulated)";
    return false;
  }
  const std::string no_device = Get<std::string>(l, "no_device", "continue");
  if (no_device != "continue" && no_device != "fail") {
    *error = From(l, "no_device") + ": '" + no_device + "' is not continue or fail";
    return false;
  }
  o->fail_without_gpu = no_device == "fail";
  std::string why;
  if (l.count("devices") && !ParseOrdinals(Get<std::string>(l, "devices", ""), &o->devices, &why)) {
    *error = From(l, "devices") + ": " + why;
    return false;
  }
  if (l.count("backend_settings")) o->backend_settings = SplitSettings(Get<std::string>(l, "backend_settings", ""));
  o->sample_period_ns = Get<int64_t>(l, "sample_period_ms", o->sample_period_ns);
  o->reads_per_sample = static_cast<int>(Get<int64_t>(l, "reads_per_sample", o->reads_per_sample));
  o->max_bracket_ns = Get<int64_t>(l, "max_bracket_us", o->max_bracket_ns);
  o->max_knots = static_cast<int>(Get<int64_t>(l, "max_knots", o->max_knots));
  o->max_activity_records = static_cast<int>(Get<int64_t>(l, "max_activity_records", o->max_activity_records));
  if (!InRange(l, "sample_period_ms", o->sample_period_ns, 1'000'000, 60'000'000'000, "1..60000 ms", error) ||
      !InRange(l, "reads_per_sample", o->reads_per_sample, 1, 1000, "1..1000", error) ||
      !InRange(l, "max_bracket_us", o->max_bracket_ns, 1'000, 10'000'000'000, "1..10000000 µs", error) ||
      !InRange(l, "max_knots", o->max_knots, 16, 1'000'000, "16..1000000", error) ||
      !InRange(l, "max_activity_records", o->max_activity_records, 1, 100'000'000, "1..100000000", error)) {
    return false;
  }
  o->node_id = static_cast<uint32_t>(Get<int64_t>(l, "node_id", 0));
  const std::string page = Get<std::string>(l, "clock_page", o->node_id != 0 ? "auto" : "none");
  if (page == "none") {
    o->clock_page.clear();
  } else if (page == "auto") {
    if (o->node_id == 0) {
      *error = From(l, "clock_page") + ": 'auto' needs --node-id (the page is /dev/shm/chronolink-<node-id>)";
      return false;
    }
    o->clock_page = "/dev/shm/chronolink-" + std::to_string(o->node_id);
  } else {
    o->clock_page = page;
  }
  if (!ResolvePageOwner(Get<std::string>(l, "clock_page_owner", ""), From(l, "clock_page_owner"),
                        &o->clock_page_owner_uid, error)) {
    return false;
  }
  o->host = Get<std::string>(l, "host", "");
  if (o->host.empty()) o->host = ThisHostName("localhost");
  o->log_level = Get<std::string>(l, "log_level", o->log_level);
  o->test_mode = Get<bool>(l, "test_mode", false);
  for (const char* key :
       {"virtual_clock.offset_ns", "virtual_clock.drift_ppm", "virtual_clock.t0_ns", "virtual_clock.state_file"}) {
    if (l.count(key) && !o->test_mode) {
      *error = From(l, key) + ": test-only, refused without --test-mode";
      return false;
    }
  }
  o->virtual_clock_state_file = Get<std::string>(l, "virtual_clock.state_file", "");
  if (!o->virtual_clock_state_file.empty()) {
    for (const char* key : {"virtual_clock.offset_ns", "virtual_clock.drift_ppm", "virtual_clock.t0_ns"}) {
      if (l.count(key)) {
        *error = From(l, key) + ": a linear virtual clock and --virtual-clock-state exclude each other";
        return false;
      }
    }
  }
  o->virtual_clock.offset_ns = Get<int64_t>(l, "virtual_clock.offset_ns", 0);
  o->virtual_clock.drift_ppm = Get<double>(l, "virtual_clock.drift_ppm", 0.0);
  o->virtual_clock.t0_ns = Get<int64_t>(l, "virtual_clock.t0_ns", 0);
  return true;
}

}  // namespace

bool LoadCollectorOptions(const OptionSources& sources, CollectorOptions* out,
                          std::vector<std::string>* warnings, std::string* error) {
  Layer merged;
  std::string config_file = sources.config_file;
  if (config_file.empty() && sources.read_environment) {
    if (const char* v = std::getenv(kConfigEnv); v != nullptr && *v != '\0') config_file = v;
  }
  if (!config_file.empty() && !ReadConfigFile(config_file, &merged, error)) return false;
  Layer env;
  if (sources.read_environment && !ReadEnvironment(&env, error)) return false;
  for (auto& [k, v] : env) merged[k] = v;
  if (!sources.options_json.empty() &&
      !ParseJsonText(sources.options_json, "the options JSON", fs::current_path(), &merged, error)) {
    return false;
  }
  for (const auto& [key, text] : sources.flags) {
    const Spec* spec = FindSpec(key);
    if (spec == nullptr) {
      *error = "unknown option " + key;
      return false;
    }
    if (!AddText(*spec, text, std::string("--") + spec->flag, &merged, error)) return false;
  }
  *out = CollectorOptions{};
  (void)warnings;
  return Resolve(merged, out, error);
}

std::vector<OptionFlag> CollectorOptionFlags() {
  std::vector<OptionFlag> flags;
  for (const Spec& s : kSpecs) {
    flags.push_back({s.key, std::string("--") + s.flag,
                     std::string(s.help) + " [env " + options::EnvName(s) + "]", s.metavar, s.group,
                     s.kind == Kind::kBool});
  }
  return flags;
}

std::string DescribeOptions(const CollectorOptions& o) {
  json j = {{"backend", o.backend},
            {"no_device", o.fail_without_gpu ? "fail" : "continue"},
            {"devices", o.devices},
            {"backend_settings", o.backend_settings},
            {"sample_period_ms", static_cast<double>(o.sample_period_ns) / 1e6},
            {"reads_per_sample", o.reads_per_sample},
            {"max_bracket_us", static_cast<double>(o.max_bracket_ns) / 1e3},
            {"max_knots", o.max_knots},
            {"max_activity_records", o.max_activity_records},
            {"clock_page", o.clock_page.empty() ? "none" : o.clock_page},
            {"clock_page_owner", o.clock_page_owner_uid == static_cast<uint32_t>(-1)
                                     ? json("none")
                                     : json(o.clock_page_owner_uid)},
            {"node_id", o.node_id},
            {"host", o.host},
            {"test_mode", o.test_mode}};
  return j.dump();
}

std::string ThisHostName(const std::string& fallback) {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0' ? std::string(name) : fallback;
}

}  // namespace chronolink::collector
