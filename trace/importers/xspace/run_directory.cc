#include "trace/importers/xspace/run_directory.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>

#include "trace/importers/xspace/xspace_reader.h"

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;

bool IsHostFileName(const std::string& name) {
  return name.size() > kXSpaceFileSuffix.size() && name.ends_with(kXSpaceFileSuffix);
}

// Names of the entries of `dir` that satisfy `keep`; false with a message
// when the directory cannot be listed.
template <typename Keep>
bool ListEntries(const fs::path& dir, Keep keep, std::vector<std::string>* names,
                 std::string* error) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (keep(*it)) names->push_back(it->path().filename().string());
  }
  if (ec) {
    *error = dir.string() + ": cannot list: " + ec.message();
    return false;
  }
  std::sort(names->begin(), names->end());
  return true;
}

bool IsDirectoryEntry(const fs::directory_entry& e) {
  std::error_code ec;
  return e.is_directory(ec);
}

bool IsHostFileEntry(const fs::directory_entry& e) {
  std::error_code ec;
  return IsHostFileName(e.path().filename().string()) && e.is_regular_file(ec);
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

bool ListHostFiles(const fs::path& run_dir, ProfileRun* out, std::string* error) {
  std::vector<std::string> names;
  if (!ListEntries(run_dir, IsHostFileEntry, &names, error)) return false;
  if (names.empty()) {
    *error = run_dir.string() + ": no <host>.xplane.pb files in this run";
    return false;
  }
  out->dir = run_dir;
  out->name = run_dir.filename().string();
  out->hosts.clear();
  for (const auto& name : names) {
    const fs::path path = run_dir / name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      *error = path.string() + ": unreadable: " + std::strerror(errno);
      return false;
    }
    ::close(fd);
    out->hosts.push_back({name.substr(0, name.size() - kXSpaceFileSuffix.size()), path});
  }
  return true;
}

bool PickRun(const fs::path& profile_dir, std::string_view run_name, fs::path* run_dir,
             std::string* error) {
  std::vector<std::string> runs;
  if (!ListEntries(profile_dir, IsDirectoryEntry, &runs, error)) return false;
  if (!run_name.empty()) {
    if (std::find(runs.begin(), runs.end(), run_name) == runs.end()) {
      *error = profile_dir.string() + ": no run named '" + std::string(run_name) +
               "' (runs: " + JoinNames(runs) + ")";
      return false;
    }
    *run_dir = profile_dir / std::string(run_name);
    return true;
  }
  std::vector<std::string> timed;
  std::copy_if(runs.begin(), runs.end(), std::back_inserter(timed), IsTimestampRunName);
  if (timed.empty() && runs.size() == 1) {  // one run, named as its producer liked: no doubt which
    *run_dir = profile_dir / runs.front();
    return true;
  }
  if (timed.empty()) {
    *error = profile_dir.string() + ": no run named YYYY_MM_DD_HH_MM_SS (directories: " +
             JoinNames(runs) + "); name the run to use";
    return false;
  }
  *run_dir = profile_dir / timed.back();  // names of this form sort by time
  return true;
}

bool HasHostFiles(const fs::path& dir) {
  std::vector<std::string> names;
  std::string ignored;
  return ListEntries(dir, IsHostFileEntry, &names, &ignored) && !names.empty();
}

}  // namespace

bool IsTimestampRunName(std::string_view name) {
  constexpr std::string_view kForm = "dddd_dd_dd_dd_dd_dd";
  if (name.size() != kForm.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool digit = name[i] >= '0' && name[i] <= '9';
    if (kForm[i] == 'd' ? !digit : name[i] != '_') return false;
  }
  return true;
}

bool FindRun(const fs::path& given, std::string_view run_name, ProfileRun* out,
             std::string* error) {
  fs::path input = given;
  if (input.has_parent_path() && input.filename().empty()) input = input.parent_path();  // "run/"
  std::error_code ec;
  if (!fs::is_directory(input, ec)) {
    *error = input.string() + (fs::exists(input, ec) ? ": not a directory" : ": does not exist");
    return false;
  }
  if (HasHostFiles(input)) {  // a run directory itself
    if (!run_name.empty() && input.filename().string() != run_name) {
      *error = input.string() + ": is the run '" + input.filename().string() + "', not '" +
               std::string(run_name) + "'";
      return false;
    }
    return ListHostFiles(input, out, error);
  }
  const fs::path plugins = input / "plugins" / "profile";
  const fs::path profile_dir = fs::is_directory(plugins, ec) ? plugins : input;
  fs::path run_dir;
  if (!PickRun(profile_dir, run_name, &run_dir, error)) return false;
  return ListHostFiles(run_dir, out, error);
}

std::string RunNameFor(std::chrono::system_clock::time_point when) {
  const std::time_t t = std::chrono::system_clock::to_time_t(when);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y_%m_%d_%H_%M_%S", &tm);
  return buf;
}

fs::path RunDirectoryPath(const fs::path& out_logdir, std::string_view run_name) {
  return out_logdir / "plugins" / "profile" / std::string(run_name);
}

bool CreateRunDirectory(const fs::path& out_logdir, std::string_view run_name, fs::path* run_dir,
                        std::string* error) {
  if (run_name.empty() || run_name == "." || run_name == ".." ||
      run_name.find('/') != std::string_view::npos) {
    *error = "run name '" + std::string(run_name) + "' is not a single directory name";
    return false;
  }
  const fs::path dir = RunDirectoryPath(out_logdir, run_name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    *error = dir.string() + ": cannot create: " + ec.message();
    return false;
  }
  if (!fs::is_empty(dir, ec) || ec) {
    *error = dir.string() + (ec ? ": cannot list: " + ec.message()
                                : ": already exists and is not empty; choose another run name");
    return false;
  }
  *run_dir = dir;
  return true;
}

}  // namespace chronolink::trace
