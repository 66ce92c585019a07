#include "common/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace chronolink {

bool OpenInputFile(const std::string& path, std::ifstream* in, std::string* error) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    *error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *error = path + ": is a directory, not a file";
    return false;
  }
  in->open(path, std::ios::binary);
  if (!*in) {
    *error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace chronolink
