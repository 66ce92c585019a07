#include "collector/cli/child_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace chronolink::collector::cli {

pid_t StartChildCommand(const std::vector<std::string>& command, const sigset_t& restore_mask,
                        const std::string& who, std::string* error) {
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return -1;
  }
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &restore_mask, nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "%s: cannot run %s: %s\n", who.c_str(), argv[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

}  // namespace chronolink::collector::cli
