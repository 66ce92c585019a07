#include "trace/importers/trace_inputs.h"

#include <charconv>
#include <cstring>
#include <optional>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/quoted_text.h"
#include "trace/importers/chrome_json/chrome_json_reader.h"
#include "trace/importers/xspace/run_directory.h"
#include "trace/importers/xspace/xspace_reader.h"

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;

constexpr char kOriginSidecarSuffix[] = ".chronolink-origin.json";
constexpr char kOriginSchema[] = "chronolink.trace_origin.v1";

// The first non-blank byte tells JSON ('[' or '{') from protobuf (a field
// tag). Files that start with neither are read as XSpace, whose reader
// explains what it found.
bool LooksLikeJson(const fs::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  int c;
  while ((c = std::fgetc(f)) == ' ' || c == '\n' || c == '\r' || c == '\t') {
  }
  std::fclose(f);
  return c == '[' || c == '{';
}

std::string HostOfJson(const fs::path& path) {
  std::string name = path.filename().string();
  for (const char* suffix : {".pt.trace.json", ".trace.json", ".json"}) {
    if (name.size() > std::strlen(suffix) && name.ends_with(suffix)) {
      return name.substr(0, name.size() - std::strlen(suffix));
    }
  }
  return name;
}

// Reads `<file>.chronolink-origin.json` when present: {"schema", "origin_ns"}.
bool ReadOriginSidecar(const fs::path& trace, std::optional<int64_t>* origin, std::string* error) {
  const fs::path sidecar = trace.string() + kOriginSidecarSuffix;
  std::error_code ec;
  if (!fs::exists(sidecar, ec)) return true;
  std::ifstream in(sidecar);
  const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.value("schema", "") != kOriginSchema || !doc.contains("origin_ns") ||
      !doc["origin_ns"].is_number_integer()) {
    *error = sidecar.string() + ": expected {\"schema\": \"" + kOriginSchema +
             "\", \"origin_ns\": <integer epoch ns>, ...}";
    return false;
  }
  *origin = doc["origin_ns"].get<int64_t>();
  return true;
}

bool LoadJson(const fs::path& path, const TraceInputOptions& options, TraceInputs* out,
              std::string* error) {
  ChromeReadOptions read;
  read.host = HostOfJson(path);
  if (auto it = options.origins_ns.find(read.host); it != options.origins_ns.end()) {
    read.origin_ns = it->second;
    out->notes.push_back(read.host + ": relative times start at --origin " + std::to_string(it->second));
  } else if (options.read_origin_sidecars) {
    if (!ReadOriginSidecar(path, &read.origin_ns, error)) return false;
    if (read.origin_ns) {
      out->notes.push_back(read.host + ": relative times start at " + std::to_string(*read.origin_ns) +
                           " (" + path.filename().string() + kOriginSidecarSuffix + ")");
    }
  }
  HostTrace host;
  if (!ReadChromeJsonFile(path, read, &host, error)) return false;
  out->hosts.push_back(std::move(host));
  return true;
}

bool LoadXSpace(const fs::path& path, TraceInputs* out, std::string* error) {
  HostTrace host;
  XSpaceReadResult result;
  if (!ReadXSpaceFile(path, &host, error, &result)) return false;
  for (const auto& w : result.warnings) out->notes.push_back(w);
  out->hosts.push_back(std::move(host));
  return true;
}

bool ListRun(const fs::path& dir, const TraceInputOptions& options, TraceInputList* out,
             std::string* error) {
  ProfileRun run;
  if (!FindRun(dir, options.run, &run, error)) return false;
  if (!out->run_name.empty() && out->run_name != run.name) {
    *error = "inputs name two runs (" + out->run_name + ", " + run.name + "): align one run at a time";
    return false;
  }
  out->run_name = run.name;
  out->notes.push_back("run " + run.dir.string() + ": " + std::to_string(run.hosts.size()) + " host(s)");
  for (const auto& h : run.hosts) out->files.push_back({h.path, TraceFormat::kXSpace, h.host});
  return true;
}

// The names outputs are written under must differ; a host's trace takes
// its file's name (the readers' rule), so the list can tell before reading.
bool CheckDistinctFiles(const TraceInputList& list, std::string* error) {
  std::set<std::string> seen;
  for (const auto& f : list.files) {
    if (!seen.insert(f.host).second) {
      *error = "two inputs are both host " + QuotedText(f.host) + " (" + f.path.string() +
               "): outputs are named by host, rename one";
      return false;
    }
  }
  return true;
}

}  // namespace

bool TraceInputs::AllXSpace() const {
  for (const auto& h : hosts) {
    if (h.source_format != TraceFormat::kXSpace) return false;
  }
  return !hosts.empty();
}

bool TraceInputs::AllChromeJson() const {
  for (const auto& h : hosts) {
    if (h.source_format != TraceFormat::kChromeJson) return false;
  }
  return !hosts.empty();
}

bool ParseOrigin(const std::string& text, std::string* host, int64_t* ns, std::string* error) {
  const size_t eq = text.rfind('=');
  const char* begin = text.data() + (eq == std::string::npos ? 0 : eq + 1);
  const char* end = text.data() + text.size();
  if (eq == std::string::npos || eq == 0 || begin == end ||
      std::from_chars(begin, end, *ns).ptr != end || *ns <= 0) {
    *error = "--origin '" + text + "': expected HOST=NS (NS: the epoch nanoseconds ts = 0 stands for)";
    return false;
  }
  *host = text.substr(0, eq);
  return true;
}

bool TraceInputList::AllXSpace() const {
  for (const auto& f : files) {
    if (f.format != TraceFormat::kXSpace) return false;
  }
  return !files.empty();
}

bool ListTraceInputs(const std::vector<std::string>& inputs, const TraceInputOptions& options,
                     TraceInputList* out, std::string* error) {
  if (inputs.empty()) {
    *error = "no input: name a TensorBoard logdir, a run directory, .xplane.pb or .json files";
    return false;
  }
  for (const auto& input : inputs) {
    const fs::path path(input);
    std::error_code ec;
    if (input.ends_with(kOriginSidecarSuffix)) continue;  // a `*.json` glob names the sidecars too
    if (fs::is_directory(path, ec)) {
      if (!ListRun(path, options, out, error)) return false;
    } else if (!fs::exists(path, ec)) {
      *error = input + ": no such file or directory";
      return false;
    } else if (LooksLikeJson(path)) {
      out->files.push_back({path, TraceFormat::kChromeJson, HostOfJson(path)});
    } else {
      out->files.push_back({path, TraceFormat::kXSpace, HostFromXSpaceFileName(path)});
    }
  }
  return CheckDistinctFiles(*out, error);
}

bool LoadTraceInput(const TraceInputFile& file, const TraceInputOptions& options, TraceInputs* out,
                    std::string* error) {
  return file.format == TraceFormat::kChromeJson ? LoadJson(file.path, options, out, error)
                                                 : LoadXSpace(file.path, out, error);
}

bool LoadTraceInputs(const std::vector<std::string>& inputs, const TraceInputOptions& options,
                     TraceInputs* out, std::string* error) {
  TraceInputList list;
  if (!ListTraceInputs(inputs, options, &list, error)) return false;
  out->run_name = list.run_name;
  out->notes = list.notes;
  for (const auto& file : list.files) {
    if (!LoadTraceInput(file, options, out, error)) return false;
  }
  return true;
}

}  // namespace chronolink::trace
