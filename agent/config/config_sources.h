// The three sources of settings (config file, CHRONOLINK_* environment,
// command line), each read into a layer of typed values that remember where
// they came from, and their merge by precedence: file < environment < flags.
// Internal to agent/config: only agent/config/*.cc include this header.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "agent/config/config_options.h"

namespace chronolink::config_internal {

struct Value {
  Payload v;
  std::string origin;  // "--flag", "CHRONOLINK_X" or "\"key\" in config file F"
};

using Layer = std::map<std::string, Value>;  // by file key

// Overwrites the key_hex text of a layer with zeros (sodium_memzero), so that
// no copy of the key outlives loading the configuration.
void WipeKeyHex(Layer* layer);

// The merged layers, as validation reads them.
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
  void WipeKeyHex() { config_internal::WipeKeyHex(&layer_); }

 private:
  Layer layer_;
};

// What the command line gives: its layer, and --config, which names the file
// layer rather than being a setting itself.
struct CommandLine {
  Layer flags;
  bool config_given = false;  // --config was given (possibly empty, which is refused)
  std::string config_path;    // its value, as given
};

enum class CommandLineStatus {
  kParsed,   // *out is filled in
  kExitNow,  // --help or --version: *text is what to print, and the agent exits 0
  kError,    // *text says what is wrong
};

// Parses argv (argc <= 0 or a null argv: no arguments). Relative paths in
// flags are resolved against cwd.
CommandLineStatus ParseCommandLine(int argc, const char* const* argv, const std::filesystem::path& cwd,
                                   CommandLine* out, std::string* text);

// The CHRONOLINK_* variables, empty ones counting as unset. Unknown names
// that look like typos of ours add a warning, not an error.
bool ReadEnvironment(const std::filesystem::path& cwd, Layer* layer, std::vector<std::string>* warnings,
                     std::string* error);

struct ConfigFileLayer {
  Layer layer;
  // Where a "virtual_clock" object appeared, even an empty or null one, since
  // it is refused without test mode; empty when there was none.
  std::string virtual_block_origin;
};

// The config file named by --config, else by CHRONOLINK_CONFIG; none is not
// an error. *config_file_path is set to its absolute path (untouched when
// there is no file).
bool ReadConfigFile(const CommandLine& command_line, const std::filesystem::path& cwd,
                    std::string* config_file_path, ConfigFileLayer* out, std::string* error);

// The config file's layer from its text; `path` names it in messages and
// its directory resolves relative paths (the fuzz target reads no file).
bool ParseConfigFileText(const std::string& text, const std::string& path, ConfigFileLayer* out,
                         std::string* error);

// file < environment < flags.
Merged MergeLayers(Layer file, const Layer& env, const Layer& flags);

}  // namespace chronolink::config_internal
