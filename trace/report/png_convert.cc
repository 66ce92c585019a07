#include "trace/report/png_convert.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

#include "common/atomic_output_file.h"
#include "trace/report/svg_text.h"

extern char** environ;

namespace chronolink::trace {
namespace {

constexpr size_t kStderrKept = 2000;  // bytes of the tool's complaint kept for the message

// Runs argv[0] with `args`, its stderr captured; the exit status, or -1
// with *error when it could not be started.
int RunCapturingStderr(const std::vector<std::string>& args, std::string* stderr_text, std::string* error) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    *error = args[0] + ": " + std::strerror(spawned);
    return -1;
  }
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0 && stderr_text->size() < kStderrKept) stderr_text->append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

bool StartsWithPngSignature(const std::string& path) {
  static constexpr std::string_view kSignature("\x89PNG\r\n\x1a\n", 8);
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  return in.read(head, sizeof head) && std::string_view(head, sizeof head) == kSignature;
}

}  // namespace

std::optional<std::string> RsvgConvertPath() {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/bin:/bin";
  while (!dirs.empty()) {
    const size_t colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
    if (dir.empty()) continue;
    const std::string candidate = std::string(dir) + "/rsvg-convert";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

bool ConvertSvgToPng(const std::string& svg_path, const std::string& png_path, double zoom, std::string* error) {
  const auto tool = RsvgConvertPath();
  if (!tool) {
    *error = "rsvg-convert not found on PATH: install Debian's librsvg2-bin for PNG output (the SVG is written)";
    return false;
  }
  // rsvg-convert writes a fresh mkstemp file, renamed into place once it is
  // a PNG: never a guessable name (a link another user planted there would
  // be written through), never half a PNG at png_path.
  AtomicOutputFile out;
  if (!out.Open(png_path, error)) return false;
  const std::string partial = out.temp_path().string();
  std::string complaint;
  const int status = RunCapturingStderr(
      {*tool, "--format", "png", "--zoom", report::Printf("%g", zoom), "--output", partial, svg_path}, &complaint,
      error);
  if (status != 0 || !StartsWithPngSignature(partial)) {
    if (status > 0) {
      *error = "rsvg-convert " + svg_path + " exited with status " + std::to_string(status) +
               (complaint.empty() ? "" : ": " + complaint);
    } else if (status == 0) {
      *error = "rsvg-convert " + svg_path + " wrote no PNG";
    }
    while (!error->empty() && error->back() == '\n') error->pop_back();
    return false;
  }
  return out.Commit(error);
}

}  // namespace chronolink::trace
