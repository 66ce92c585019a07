// The agent's option table and the parsing of one option's value. Internal to
// agent/config, except that the collector's option table
// (collector/config/collector_options.cc) parses through the same value
// parsers, so that a value means the same to both.
//
// Every setting is described once in Specs() (file key, flag, environment
// name, kind, --help text); the config file, the environment and the command
// line all parse through ParseText / ParseJsonValue, so a value means the same
// whichever source gives it. The option reference is docs/configuration.md;
// keep the two in step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/clock/timestamp.h"

namespace chronolink::config_internal {

inline constexpr std::string_view kEnvPrefix = "CHRONOLINK_";
inline constexpr std::string_view kConfigEnv = "CHRONOLINK_CONFIG";

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

// --help sections, in the order their first option appears.
inline constexpr const char* kGeneral = "General";
inline constexpr const char* kProbing = "Probing";
inline constexpr const char* kEstimation = "Estimation";
inline constexpr const char* kCapture = "Timestamp capture";
inline constexpr const char* kCluster = "Cluster";
inline constexpr const char* kTestOnly = "Test only (refused without --test-mode)";

// Every option, in --help order.
std::span<const Spec> Specs();

// The config file's nested objects ("probe", "estimation", ...).
std::span<const char* const> FileSections();

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

}  // namespace chronolink::config_internal
