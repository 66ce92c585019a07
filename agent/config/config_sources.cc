// Reading the config file, the environment and the command line into layers,
// and merging them. Every message names the source of the offending value.
#include "agent/config/config_sources.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <CLI/CLI.hpp>
#include <sodium.h>
#include <nlohmann/json.hpp>

#include "agent/config/agent_config.h"
#include "agent/config/json_file.h"

extern char** environ;

namespace chronolink::config_internal {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Overlay `upper` on `lower`. key_file and key_hex are two spellings of one
// setting: either one in a higher layer replaces both of a lower layer.
void Overlay(Layer* lower, const Layer& upper) {
  if (upper.count("key_file") != 0 || upper.count("key_hex") != 0) {
    lower->erase("key_file");
    lower->erase("key_hex");
  }
  for (const auto& [k, v] : upper) (*lower)[k] = v;
}

// ---------------------------------------------------------------------------
// Command line.

// CLI11 only collects each flag's text; ParseText types it afterwards, so that
// flags, environment and file share one parser and one set of messages.
struct FlagValues {
  std::string config;
  CLI::Option* config_opt = nullptr;
  std::vector<std::string> text;  // by index into Specs()
  std::vector<CLI::Option*> opts;
  bool test_mode = false;  // the only kBool option
};

// Index of key_hex in Specs().
std::ptrdiff_t KeyHexIndex() {
  const std::span<const Spec> specs = Specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (std::string_view(specs[i].key) == "key_hex") return static_cast<std::ptrdiff_t>(i);
  }
  return -1;
}

// Defines --config, --version and one flag per option, in --help order.
void DefineFlags(CLI::App* app, FlagValues* v) {
  app->set_version_flag("--version", std::string(AgentVersionString()));
  app->footer(
      "Settings come from, lowest to highest precedence: built-in defaults, the JSON config file "
      "(--config or CHRONOLINK_CONFIG), environment variables CHRONOLINK_<FLAG> (the flag name in "
      "UPPER_SNAKE_CASE, e.g. CHRONOLINK_PROBE_INTERVAL_US), then these flags. Relative paths in "
      "the config file are relative to the file's directory. Full reference: "
      "docs/configuration.md.");
  v->config_opt =
      app->add_option("--config", v->config, "JSON config file [env: CHRONOLINK_CONFIG]")
          ->type_name("FILE")
          ->group(kGeneral)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  const std::span<const Spec> specs = Specs();
  v->text.assign(specs.size(), std::string());
  v->opts.assign(specs.size(), nullptr);
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    std::string help = std::string(s.help) + " [env: " + EnvName(s) + "]";
    if (s.kind == Kind::kBool) {
      v->opts[i] = app->add_flag(std::string("--") + s.flag, v->test_mode, help)->group(s.group);
    } else {
      v->opts[i] = app->add_option(std::string("--") + s.flag, v->text[i], help)
                       ->type_name(s.metavar)
                       ->group(s.group);
    }
    // A repeated flag: the last one wins, so wrappers can append overrides.
    v->opts[i]->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
}

// Runs CLI11 on argv; --help and --version end parsing with their text.
CommandLineStatus RunParser(CLI::App* app, int argc, const char* const* argv, std::string* text) {
  std::vector<const char*> args;
  const char* const* parse_argv = argv;
  if (argc <= 0 || argv == nullptr) {
    args.push_back("chronolink-agent");
    parse_argv = args.data();
    argc = 1;
  }
  try {
    app->parse(argc, parse_argv);
  } catch (const CLI::CallForHelp& e) {
    std::ostringstream out, err;
    app->exit(e, out, err);
    *text = out.str();
    return CommandLineStatus::kExitNow;
  } catch (const CLI::CallForAllHelp& e) {
    std::ostringstream out, err;
    app->exit(e, out, err);
    *text = out.str();
    return CommandLineStatus::kExitNow;
  } catch (const CLI::CallForVersion& e) {
    *text = e.what();
    return CommandLineStatus::kExitNow;
  } catch (const CLI::ParseError& e) {
    *text = std::string(e.what()) + ". Run with --help for usage.";
    return CommandLineStatus::kError;
  }
  return CommandLineStatus::kParsed;
}

// The flags that were given, typed.
bool FlagsLayer(const FlagValues& v, const fs::path& cwd, Layer* flags, std::string* error) {
  const std::span<const Spec> specs = Specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    if (v.opts[i]->count() == 0) continue;
    const std::string origin = std::string("--") + s.flag;
    if (s.kind == Kind::kBool) {
      (*flags)[s.key] = Value{v.test_mode, origin};
      continue;
    }
    Payload p;
    std::string why;
    if (!ParseText(s, v.text[i], cwd, &p, &why)) {
      *error = origin + ": " + why;
      return false;
    }
    (*flags)[s.key] = Value{std::move(p), origin};
  }
  if (flags->count("key_file") != 0 && flags->count("key_hex") != 0) {
    *error = "both --key-file and --key-hex given; give exactly one";
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Environment.

// Other components may use the prefix too, so an unknown name is only worth a
// warning, and only when it looks like a typo of one of `known`.
void WarnAboutUnknownVariables(const std::vector<std::string>& known, std::vector<std::string>* warnings) {
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
}

// ---------------------------------------------------------------------------
// Config file.

// What one config file may contain, and how to name it in messages.
struct FileContext {
  std::string where;  // "config file '<path>'"
  fs::path config_dir;
  std::map<std::string, const Spec*> by_key;
  std::vector<std::string> all_keys;  // every key and section, for suggestions
};

// One key of the file; `key` is dotted for a key inside a section.
bool ParseFileKey(const FileContext& f, const std::string& key, const json& value, bool top_level,
                  Layer* layer, std::string* error) {
  auto it = f.by_key.find(key);
  // A dotted key at the top level ("probe.interval_us": 5) is not a
  // spelling of the nested key; accepting it would let two spellings of
  // one setting silently override each other.
  if (it == f.by_key.end() || (top_level && key.find('.') != std::string::npos)) {
    *error = f.where + ": unknown key '" + key + "'" + DidYouMean(key, f.all_keys) +
             " (docs/configuration.md lists every key)";
    return false;
  }
  if (value.is_null()) return true;  // null = not set
  Payload p;
  std::string why;
  if (!ParseJsonValue(*it->second, value, f.config_dir, &p, &why)) {
    *error = f.where + ": \"" + key + "\" " + why;
    return false;
  }
  (*layer)[key] = Value{std::move(p), "\"" + key + "\" in " + f.where};
  return true;
}

}  // namespace

bool ParseConfigFileText(const std::string& text, const std::string& path, ConfigFileLayer* out,
                         std::string* error) {
  FileContext f;
  f.where = "config file '" + path + "'";
  std::string why;
  json doc;
  if (!ParseJsonNoDuplicates(text, &doc, &why)) {
    *error = f.where + ": " + why;
    return false;
  }
  if (!doc.is_object()) {
    *error = f.where + ": the top level must be a JSON object";
    return false;
  }

  f.config_dir = fs::path(path).parent_path();
  for (const Spec& s : Specs()) {
    f.by_key[s.key] = &s;
    f.all_keys.push_back(s.key);
  }
  const std::span<const char* const> sections = FileSections();
  for (const char* sec : sections) f.all_keys.push_back(sec);

  Layer* layer = &out->layer;
  for (const auto& [key, value] : doc.items()) {
    bool is_section = std::find_if(sections.begin(), sections.end(),
                                   [&key = key](const char* s) { return key == s; }) != sections.end();
    if (!is_section) {
      if (!ParseFileKey(f, key, value, true, layer, error)) return false;
      continue;
    }
    if (key == "virtual_clock") out->virtual_block_origin = "\"virtual_clock\" in " + f.where;
    if (value.is_null()) continue;
    if (!value.is_object()) {
      *error = f.where + ": \"" + key + "\" must be an object, got " + value.dump();
      return false;
    }
    for (const auto& [sub, sub_value] : value.items()) {
      if (!ParseFileKey(f, key + "." + sub, sub_value, false, layer, error)) return false;
    }
  }
  // Both key spellings in one file is ambiguous.
  if (layer->count("key_file") != 0 && layer->count("key_hex") != 0) {
    *error = f.where + " sets both \"key_file\" and \"key_hex\"; give exactly one";
    return false;
  }
  return true;
}

namespace {

bool ParseConfigFile(const std::string& path, ConfigFileLayer* out, std::string* error) {
  std::string text, why;
  if (!ReadWholeFile(path, &text, &why)) {
    *error = "config file '" + path + "': " + why;
    return false;
  }
  return ParseConfigFileText(text, path, out, error);
}

}  // namespace

void WipeKeyHex(Layer* layer) {
  auto it = layer->find("key_hex");
  if (it == layer->end()) return;
  if (auto* text = std::get_if<std::string>(&it->second.v)) sodium_memzero(text->data(), text->size());
}

CommandLineStatus ParseCommandLine(int argc, const char* const* argv, const fs::path& cwd, CommandLine* out,
                                   std::string* text) {
  CLI::App app("chronolink-agent: probes peers with authenticated UDP probe pairs and estimates "
               "per-edge clock offset and drift.",
               "chronolink-agent");
  FlagValues values;
  DefineFlags(&app, &values);
  if (CommandLineStatus status = RunParser(&app, argc, argv, text); status != CommandLineStatus::kParsed) {
    return status;
  }
  const bool typed = FlagsLayer(values, cwd, &out->flags, text);
  // The text of --key-hex was copied into the layer: wipe it here.
  if (const std::ptrdiff_t i = KeyHexIndex(); i >= 0) {
    std::string& text_of_key = values.text[static_cast<size_t>(i)];
    sodium_memzero(text_of_key.data(), text_of_key.size());
  }
  if (!typed) return CommandLineStatus::kError;
  out->config_given = values.config_opt->count() > 0;
  out->config_path = values.config;
  return CommandLineStatus::kParsed;
}

bool ReadEnvironment(const fs::path& cwd, Layer* layer, std::vector<std::string>* warnings,
                     std::string* error) {
  std::vector<std::string> known;
  for (const Spec& spec : Specs()) {
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
  known.emplace_back(kConfigEnv);
  WarnAboutUnknownVariables(known, warnings);
  return true;
}

bool ReadConfigFile(const CommandLine& command_line, const fs::path& cwd, std::string* config_file_path,
                    ConfigFileLayer* out, std::string* error) {
  std::string config_path;
  if (command_line.config_given) {
    if (command_line.config_path.empty()) {
      *error = "--config: must not be empty";
      return false;
    }
    config_path = command_line.config_path;
  } else if (const char* v = std::getenv(std::string(kConfigEnv).c_str()); v != nullptr && !Trim(v).empty()) {
    config_path = Trim(v);
  }
  if (config_path.empty()) return true;
  fs::path p(config_path);
  if (p.is_relative()) p = cwd / p;
  *config_file_path = p.lexically_normal().string();
  return ParseConfigFile(*config_file_path, out, error);
}

Merged MergeLayers(Layer file, const Layer& env, const Layer& flags) {
  Layer merged = std::move(file);
  Overlay(&merged, env);
  Overlay(&merged, flags);
  return Merged(std::move(merged));
}

}  // namespace chronolink::config_internal
