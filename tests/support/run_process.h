// RunProcess: run a program to completion with a few extra environment
// variables and capture its stdout and stderr, with a bound on the wait (the
// program is SIGKILLed, with its process group, at the deadline). For tests
// that check what a real, separate program does (the clock shim's probe, the
// PyTorch workload). Call from one thread; it forks.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace chronolink::testing {

struct ProcessResult {
  bool started = false;
  bool timed_out = false;
  int exit_code = -1;    // when it exited normally
  int term_signal = 0;   // when a signal ended it
  std::string out;
  std::string err;
};

namespace run_process_internal {

inline std::vector<std::string> MergedEnvironment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

inline std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (auto& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// Reads both pipes until EOF on both or the deadline.
inline bool Drain(int out_fd, int err_fd, std::chrono::steady_clock::time_point deadline,
                  ProcessResult* r) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&r->out, &r->err};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  return true;
}

}  // namespace run_process_internal

inline ProcessResult RunProcess(std::vector<std::string> argv,
                                const std::map<std::string, std::string>& extra_env,
                                std::chrono::seconds timeout) {
  namespace rp = run_process_internal;
  ProcessResult r;
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return r;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return r;
  }
  std::vector<std::string> env = rp::MergedEnvironment(extra_env);
  std::vector<char*> argv_p = rp::Pointers(argv);
  std::vector<char*> env_p = rp::Pointers(env);
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    setpgid(0, 0);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    execve(argv_p[0], argv_p.data(), env_p.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  r.started = pid > 0;
  if (r.started) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    r.timed_out = !rp::Drain(out_pipe[0], err_pipe[0], deadline, &r);
    if (r.timed_out) kill(-pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  return r;
}

}  // namespace chronolink::testing
