// Before the privilege drop, as root: makes the agent's output directory a
// place the user it is about to become can write, since everything the
// agent writes there is written after the drop (edges.jsonl, agent_stats.json
// rewritten by rename, offsets.jsonl opened when the node starts to lead,
// the stamp log). Called from the start-up thread before any other thread
// exists; touches only the directory and the agent's own file names in it.
//
// The rules (docs/deployment.md "Privilege model"):
//  - a missing directory is created (parents too) and given to the user;
//  - an existing one the user can already write (owner, its group, or
//    others, by the mode bits) is kept as it is;
//  - an existing one owned by root that holds nothing but the agent's own
//    files (own_files, and kept_files such as a clock page placed there) is
//    given to the user (a run as root left it);
//  - anything else is refused with the fix: chown it, or give the agent a
//    directory of its own.
// Then, unless the directory is shared (group or other writable), the
// own_files in it that root owns are given to the user: only regular files
// with one link, never through a symbolic link. kept_files stay as they are.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace chronolink {

// The names the agent writes in its output directory.
std::vector<std::string> AgentOutputFileNames();

bool HandOverOutputDir(const std::string& dir, const std::vector<std::string>& own_files,
                       const std::vector<std::string>& kept_files, uid_t uid, gid_t gid, const std::string& user,
                       std::string* error);

}  // namespace chronolink
