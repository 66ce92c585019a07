// The agent's open-file limit. A leader holds one coordination connection
// per node (docs/cluster.md "Large clusters"), and the channel hub waits on
// epoll, never select(), so a descriptor above 1024 is no hazard: the agent
// takes every descriptor its runtime grants, as a server of many
// connections should.
#pragma once

#include <cstdint>
#include <string>

namespace chronolink {

struct FileLimitChange {
  uint64_t before = 0;  // the soft limit found
  uint64_t after = 0;   // ... and the one now in force (the hard limit, or `before` if raising failed)
  std::string error;    // why raising failed; empty otherwise
};

// Raises the soft RLIMIT_NOFILE to the hard one.
FileLimitChange RaiseOpenFileLimit();

}  // namespace chronolink
