// The collector's settings and where they come from: a JSON file (--config,
// else CHRONOLINK_COLLECTOR_CONFIG), CHRONOLINK_* environment variables and
// flags (or, embedded, the JSON options string the host profiler passes),
// with the agent's precedence: file < environment < flags. Every option is
// described once in a table (collector_options.cc) that the file, the
// environment and the flags all parse through, with the agent's value
// parsers (agent/config/config_options.h), so a value means the same
// wherever it is given. The reference is docs/collector.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "clock/virtual_clock.h"

namespace chronolink::collector {

struct CollectorOptions {
  std::string backend = "auto";               // auto | rocm | cuda | simulated
  bool fail_without_gpu = false;              // no_device = fail | continue
  std::vector<uint32_t> devices;              // ordinals; empty = all
  std::vector<std::string> backend_settings;  // "key=value", backend-specific
  int64_t sample_period_ns = 100'000'000;     // one snapshot sample per device per period
  int reads_per_sample = 8;                   // bracketed reads per sample; the tightest is kept
  int64_t max_bracket_ns = 50'000;            // wider reads are refused
  int max_knots = 4096;                       // per device map: bounds its memory
  int max_activity_records = 1'000'000;       // kept per collector; beyond, counted drops
  std::string clock_page;                     // agent clock page to read; "" = none
  // The agent's user, trusted to own the page besides root and this
  // process's user (include/chronolink/clock_mapping_page.h ClockPageOwners).
  uint32_t clock_page_owner_uid = static_cast<uint32_t>(-1);
  uint32_t node_id = 0;                       // 0 = unknown; names the default clock page
  std::string host;                           // host name for the XSpace (default: gethostname)
  std::string log_level = "info";
  bool test_mode = false;
  VirtualClockParams virtual_clock;           // test mode only
  std::string virtual_clock_state_file;       // test mode only: the test bed's node clock instead
};

// A layer of raw option texts by file key ("sample_period_ms" -> "50").
using OptionTexts = std::map<std::string, std::string>;

struct OptionSources {
  std::string config_file;      // "" = CHRONOLINK_COLLECTOR_CONFIG or none
  bool read_environment = true;
  OptionTexts flags;            // highest precedence (CLI flags)
  std::string options_json;     // the embedding's JSON object, same precedence as flags
};

// Resolves every source into *out (defaults for what none gives). False with
// one line in *error naming the source and the option ("--reads-per-sample:
// must be 1..1000"). Unknown file keys are errors with a suggestion.
bool LoadCollectorOptions(const OptionSources& sources, CollectorOptions* out,
                          std::vector<std::string>* warnings, std::string* error);

// One option as a command-line flag. A CLI binds these (chronolink-collect
// does, in chronolink_collect.cc) and stores what is given into OptionTexts
// under `key`.
struct OptionFlag {
  std::string key;      // file key
  std::string name;     // "--sample-period-ms"
  std::string help;     // with the environment variable that also sets it
  std::string metavar;  // shown in --help
  std::string group;    // --help section
  bool is_switch;       // takes no value: given means "true"
};

// Every option's flag, in the table's order (the order of --help).
std::vector<OptionFlag> CollectorOptionFlags();

// The options as a JSON object (file keys), for logs and the clock plane.
std::string DescribeOptions(const CollectorOptions& options);

// This machine's host name (gethostname), or `fallback` where it has none:
// what --host defaults to, and what the collect subcommands name a host by.
std::string ThisHostName(const std::string& fallback);

}  // namespace chronolink::collector
