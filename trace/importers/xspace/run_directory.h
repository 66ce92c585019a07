// TensorBoard's profile layout: `<logdir>/plugins/profile/<run>/<host>.xplane.pb`,
// runs named `YYYY_MM_DD_HH_MM_SS` (a profile session's start). FindRun
// accepts any of the three levels a user may point at — the logdir, its
// `plugins/profile`, or one run directory — picks the run (the latest by
// name, or the one asked for) and lists its host files sorted by host.
// Every failure is one message naming the directory and what was missing.
//
// Touches only the file system; stateless.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace chronolink::trace {

struct RunHostFile {
  std::string host;             // the file name without `.xplane.pb`
  std::filesystem::path path;
};

struct ProfileRun {
  std::filesystem::path dir;    // the run directory
  std::string name;             // its name (the directory's)
  std::vector<RunHostFile> hosts;
};

// `run_name` empty: the latest run whose name has the YYYY_MM_DD_HH_MM_SS
// form (names of that form sort by time), or the only run whatever its
// name. Otherwise that run, any name.
bool FindRun(const std::filesystem::path& input, std::string_view run_name, ProfileRun* out,
             std::string* error);

// True for names of the form YYYY_MM_DD_HH_MM_SS (digits and underscores).
bool IsTimestampRunName(std::string_view name);

// The run name of `when` in UTC, `YYYY_MM_DD_HH_MM_SS`. (TensorBoard's
// profiler names runs in local time; UTC keeps names comparable across
// hosts and machines.)
std::string RunNameFor(std::chrono::system_clock::time_point when);

// `<out_logdir>/plugins/profile/<run>/` (nothing is created).
std::filesystem::path RunDirectoryPath(const std::filesystem::path& out_logdir,
                                       std::string_view run_name);

// Creates RunDirectoryPath(); refuses a run name that is not one path
// component, and a run directory that already exists with files in it (an
// earlier output is never mixed with a new one).
bool CreateRunDirectory(const std::filesystem::path& out_logdir, std::string_view run_name,
                        std::filesystem::path* run_dir, std::string* error);

}  // namespace chronolink::trace
