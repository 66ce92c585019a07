#include "agent/runtime/file_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

namespace chronolink {

FileLimitChange RaiseOpenFileLimit() {
  FileLimitChange change;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    change.error = std::string("getrlimit: ") + std::strerror(errno);
    return change;
  }
  change.before = change.after = lim.rlim_cur;
  if (lim.rlim_cur == lim.rlim_max) return change;
  lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    change.error = std::string("setrlimit: ") + std::strerror(errno);
    return change;
  }
  change.after = lim.rlim_cur;
  return change;
}

}  // namespace chronolink
