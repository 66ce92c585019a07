// One option's value from text (flags, environment) or JSON (config file):
// unit scaling, ranges, lists, and "did you mean" suggestions for typos.
#include "options/option_values.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

namespace chronolink::options {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

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

bool IsIpAddressLiteral(const std::string& text) {
  unsigned char bytes[16];
  return inet_pton(AF_INET, text.c_str(), bytes) == 1 || inet_pton(AF_INET6, text.c_str(), bytes) == 1;
}

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

}  // namespace chronolink::options
