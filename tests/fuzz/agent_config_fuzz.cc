// libFuzzer target for the agent's config file (agent/config/
// config_sources.cc and config_validation.cc, docs/configuration.md): each
// input is one config file's text, parsed into its layer and validated as
// the whole configuration (no flags, no CHRONOLINK_* environment). The
// config file's directory is a scratch directory holding a valid cluster
// file (cluster.json, nodes 1 and 2) and key file (cluster.key, mode 0600),
// so that "cluster_file": "cluster.json", "key_file": "cluster.key" reach a
// complete configuration; either named outside that directory is pointed
// at a missing file there (the fuzzer must not read /dev/zero). Validation
// opens no other file.
// Invariants: no crash, hang or sanitizer report (deep nesting included);
// a refusal names its source; an accepted configuration with a key file
// renders (EffectiveConfigJson) to a config file that loads back to the
// same effective configuration (docs/configuration.md promises this).
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "agent/config/agent_config.h"
#include "agent/config/config_options.h"
#include "agent/config/config_sources.h"
#include "agent/config/config_validation.h"

namespace {

namespace ci = chronolink::config_internal;

std::string g_dir;  // the scratch directory, with a trailing '/'

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "agent_config_fuzz invariant violated: %s\n", what);
  std::abort();
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  if (::chmod(path.c_str(), mode) != 0) Fail("cannot write the scratch directory");
}

// Validation reads two files: the cluster file and the key file. Named
// outside the scratch directory, they become a missing file inside it.
void ConfinePaths(ci::Layer* layer) {
  for (const char* key : {"cluster_file", "key_file"}) {
    auto it = layer->find(key);
    if (it == layer->end()) continue;
    auto* path = std::get_if<std::string>(&it->second.v);
    if (path != nullptr && (path->rfind(g_dir, 0) != 0 || path->find("..") != std::string::npos))
      *path = g_dir + "missing";
  }
}

// Parses and validates one config file's text; the effective configuration
// on success.
bool Load(const std::string& text, std::string* effective, bool* key_from_file, std::string* error) {
  ci::ConfigFileLayer file;
  if (!ci::ParseConfigFileText(text, g_dir + "agent.json", &file, error)) return false;
  ConfinePaths(&file.layer);
  ci::Merged merged = ci::MergeLayers(std::move(file.layer), {}, {});
  chronolink::AgentConfig config;
  const bool ok = ci::Validate(merged, file.virtual_block_origin, &config, error);
  merged.WipeKeyHex();
  if (!ok) return false;
  *effective = chronolink::EffectiveConfigJson(config);
  *key_from_file = !config.key_file_path.empty();
  return true;
}

void RemoveScratch() {
  for (const char* name : {"cluster.json", "cluster.key"}) ::unlink((g_dir + name).c_str());
  ::rmdir(g_dir.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/chronolink-config-fuzz-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) Fail("cannot create the scratch directory");
  g_dir = std::string(tmpl) + "/";
  std::atexit(RemoveScratch);  // libFuzzer ends with exit(); a crash leaves it for inspection
  WriteFile(g_dir + "cluster.json",
            R"({"cluster_id": 7, "nodes": [{"id": 1, "address": "127.0.0.1", "port": 7319},)"
            R"( {"id": 2, "address": "127.0.0.2", "port": 7319, "hostname": "gpu-b"}]})",
            0644);
  WriteFile(g_dir + "cluster.key", std::string(64, 'a') + "\n", 0600);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string effective, error;
  bool key_from_file = false;
  if (!Load(text, &effective, &key_from_file, &error)) {
    if (error.empty()) Fail("a refusal without a message");
    return 0;
  }
  if (!key_from_file) return 0;  // a key given as hex is not rendered: no round trip
  std::string again;
  if (!Load(effective, &again, &key_from_file, &error)) {
    std::fprintf(stderr, "effective config:\n%s\nrefused: %s\n", effective.c_str(), error.c_str());
    Fail("the effective configuration does not load back");
  }
  if (again != effective) {
    std::fprintf(stderr, "effective config:\n%s\nloads back as:\n%s\n", effective.c_str(), again.c_str());
    Fail("the effective configuration loads back differently");
  }
  return 0;
}
