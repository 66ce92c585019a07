#include "agent/runtime/output_handover.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace chronolink {

namespace {

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// By the mode bits alone: the user will have no supplementary groups.
bool WritableBy(const struct stat& st, uid_t uid, gid_t gid) {
  if (st.st_uid == uid) return (st.st_mode & (S_IWUSR | S_IXUSR)) == (S_IWUSR | S_IXUSR);
  if (st.st_gid == gid) return (st.st_mode & (S_IWGRP | S_IXGRP)) == (S_IWGRP | S_IXGRP);
  return (st.st_mode & (S_IWOTH | S_IXOTH)) == (S_IWOTH | S_IXOTH);
}

// Entries other than `own` (and . and ..); "" when there are none.
std::string ForeignEntry(int dir_fd, const std::vector<std::string>& own) {
  const int dup_fd = ::dup(dir_fd);
  if (dup_fd < 0) return "(unreadable directory)";
  DIR* d = ::fdopendir(dup_fd);
  if (d == nullptr) {
    ::close(dup_fd);
    return "(unreadable directory)";
  }
  std::string foreign;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    // A temporary file of an atomic write (".agent_stats.json.tmp.XXXXXX",
    // common/atomic_output_file.h) a crash left behind is the agent's too.
    const bool own_temp = std::any_of(own.begin(), own.end(), [&](const std::string& o) {
      return name.rfind("." + o + ".tmp.", 0) == 0;
    });
    if (!own_temp && std::find(own.begin(), own.end(), name) == own.end()) {
      foreign = name;
      break;
    }
  }
  ::closedir(d);
  return foreign;
}

// Gives one of the agent's own files, left by a run as root, to the user:
// opened without following a link, changed only if it is a regular file
// with one link that root owns. Missing is fine.
bool HandOverOwnFile(int dir_fd, const std::string& name, uid_t uid, gid_t gid, std::string* error) {
  const int fd = ::openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return true;  // not there (or not ours to open): the agent creates it later as the user
  struct stat st {};
  bool ok = true;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == 0 &&
      ::fchownat(fd, "", uid, gid, AT_EMPTY_PATH) != 0) {
    *error = "cannot give '" + name + "' to the agent's user: " + std::strerror(errno);
    ok = false;
  }
  ::close(fd);
  return ok;
}

}  // namespace

std::vector<std::string> AgentOutputFileNames() {
  // agent_stats.json.tmp: the fixed temporary name of agents before issue 29.
  return {"edges.jsonl", "timebase.jsonl", "agent_stats.json", "agent_stats.json.tmp", "offsets.jsonl"};
}

bool HandOverOutputDir(const std::string& dir, const std::vector<std::string>& own_files,
                       const std::vector<std::string>& kept_files, uid_t uid, gid_t gid, const std::string& user,
                       std::string* error) {
  const std::string where = "output directory '" + dir + "'";
  std::error_code ec;
  const bool created = std::filesystem::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create " + where + ": " + ec.message();
    return false;
  }
  // Never through a link: a user who can write the parent could point the
  // name at a directory of root's and have it handed over.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + where + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *error = "cannot examine " + where + ": " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  std::string why;
  if (!WritableBy(st, uid, gid)) {
    if (!created && st.st_uid != 0) {
      why = "belongs to uid " + std::to_string(st.st_uid);
    } else if (!created) {
      std::vector<std::string> ours = own_files;
      ours.insert(ours.end(), kept_files.begin(), kept_files.end());
      why = ForeignEntry(fd, ours);
      if (!why.empty()) why = "is root's and holds other files than the agent's ('" + why + "')";
    }
    if (why.empty() && ::fchown(fd, uid, gid) != 0) why = std::string("cannot be given to it: ") + std::strerror(errno);
    if (why.empty() && ::fstat(fd, &st) != 0) why = std::string("cannot be examined: ") + std::strerror(errno);
  }
  if (!why.empty()) {
    ::close(fd);
    *error = where + " (mode " + Octal(st.st_mode) + ") is not writable by user " + user +
             ", whom the agent runs as after dropping its privileges, and " + why +
             ": give it to that user (chown), or give the agent a directory of its own (--output-dir)";
    return false;
  }
  bool ok = true;
  if (!(st.st_mode & (S_IWGRP | S_IWOTH))) {
    // The agent's own directory: its own files from a run as root go along.
    for (const std::string& name : own_files) {
      if (!(ok = HandOverOwnFile(fd, name, uid, gid, &why))) break;
    }
  }
  ::close(fd);
  if (!ok) *error = where + ": " + why;
  return ok;
}

}  // namespace chronolink
