#include "common/own_output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/quoted_text.h"

namespace chronolink {

std::string OwnFileRefusal(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return "is not a regular file";
  if (st.st_uid != ::geteuid()) {
    return "is owned by uid " + std::to_string(st.st_uid) + ", not by this process's user (uid " +
           std::to_string(::geteuid()) + ")";
  }
  if (st.st_nlink != 1) return "has " + std::to_string(st.st_nlink) + " hard links: it is also another file";
  return "";
}

int OpenOwnOutput(const std::filesystem::path& path, OwnOutputMode mode, std::string* error) {
  const std::string shown = QuotedText(path.string(), 300);
  const int append = mode == OwnOutputMode::kAppend ? O_APPEND : 0;
  const int fd = ::open(path.c_str(), O_WRONLY | append | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    // ENXIO: a FIFO without a reader (O_NONBLOCK) or a device.
    *error = errno == ELOOP   ? shown + " is a symbolic link: refusing to write through it; remove it"
             : errno == ENXIO ? shown + " is not a regular file (a FIFO or a device): refusing it; remove it"
                              : "cannot open " + shown + ": " + std::strerror(errno);
    return -1;
  }
  struct stat st {};
  std::string why = ::fstat(fd, &st) != 0 ? std::string("cannot be examined: ") + std::strerror(errno)
                                          : OwnFileRefusal(st);
  if (!why.empty()) {
    why += ": refusing to write it; remove it";
  } else if (mode == OwnOutputMode::kTruncate && ::ftruncate(fd, 0) != 0) {
    why = std::string("cannot be emptied: ") + std::strerror(errno);
  }
  if (!why.empty()) {
    ::close(fd);
    *error = shown + " " + why;
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::FILE* OpenOwnOutputForAppend(const std::filesystem::path& path, std::string* error) {
  const int fd = OpenOwnOutput(path, OwnOutputMode::kAppend, error);
  if (fd < 0) return nullptr;
  std::FILE* file = ::fdopen(fd, "a");
  if (file == nullptr) {
    *error = "cannot open " + QuotedText(path.string(), 300) + ": " + std::strerror(errno);
    ::close(fd);
  }
  return file;
}

}  // namespace chronolink
