// The command a chronolink-collect subcommand runs while it collects
// (`run -- CMD`, `host-clocks -- CMD`): started with the signal mask the
// tool had before it blocked SIGINT/SIGTERM for itself, so the command gets
// its signals as usual.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace chronolink::collector::cli {

// fork + execvp. The child that cannot exec says so on stderr, prefixed
// with `who`, and exits 127 (as a shell does). -1 with *error when fork fails.
pid_t StartChildCommand(const std::vector<std::string>& command, const sigset_t& restore_mask,
                        const std::string& who, std::string* error);

}  // namespace chronolink::collector::cli
