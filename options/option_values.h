// One option's value, as the agent and the collector both parse it: every
// setting is described once by a Spec (file key, flag, environment name,
// kind, --help text), and the config file, the environment and the command
// line all parse through ParseText / ParseJsonValue, so that a value means
// the same whichever source gives it, and to both programs. Each program
// keeps its own table of Specs (agent/config/config_options.h,
// collector/config/collector_options.cc).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "clock/timestamp.h"

namespace chronolink::options {

inline constexpr std::string_view kEnvPrefix = "CHRONOLINK_";

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
  kPath,          // non-empty string; relative paths resolved against the source's directory
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

// True for an IPv4 or IPv6 address literal (no name, no port, no brackets).
bool IsIpAddressLiteral(const std::string& text);

// CHRONOLINK_ + the flag in UPPER_SNAKE_CASE.
std::string EnvName(const Spec& s);

// A parsed value, typed by the option's Kind: int64 for integers and
// durations (ns), double, bool, string (paths resolved), id list, class list.
using Payload =
    std::variant<int64_t, double, bool, std::string, std::vector<uint32_t>, std::vector<SourceClass>>;

// Text from a flag or an environment variable -> typed value. Relative paths
// are resolved against cwd. On failure *why says what is wrong with the value
// (the caller names the source).
bool ParseText(const Spec& spec, const std::string& raw, const std::filesystem::path& cwd, Payload* out,
               std::string* why);

// JSON value from the config file -> typed value. Relative paths are resolved
// against config_dir.
bool ParseJsonValue(const Spec& spec, const nlohmann::json& j, const std::filesystem::path& config_dir,
                    Payload* out, std::string* why);

// ns in the unit of a kNsFrom* kind, as a JSON number: an integer when exact.
std::string FormatNsAs(int64_t ns, Kind k);

// Surrounding whitespace removed.
std::string Trim(std::string_view s);

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(std::string_view a, std::string_view b);

// "; did you mean 'x'?" for the closest candidate within edit distance 2, or
// "". A nested key written at the top level ("interval_us") matches its full
// name ("probe.interval_us").
std::string DidYouMean(const std::string& unknown, const std::vector<std::string>& candidates);

}  // namespace chronolink::options
