#include "common/atomic_output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/errno_message.h"

namespace chronolink {
namespace {

constexpr size_t kFlushBytes = 1 << 20;

}  // namespace

AtomicOutputFile::~AtomicOutputFile() { Discard(); }

void AtomicOutputFile::Discard() {
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    temp_.clear();
  }
}

bool AtomicOutputFile::Open(const std::filesystem::path& path, std::string* error) {
  path_ = path;
  const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string pattern = (dir / ("." + path.filename().string() + ".tmp.XXXXXX")).string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    *error = ErrnoMessage("cannot create a temporary file in " + dir.string());
    return false;
  }
  temp_ = name.data();
  ::fchmod(fd, 0644);  // mkstemp makes 0600; a trace is for others to read
  file_ = ::fdopen(fd, "wb");
  if (file_ == nullptr) {
    ::close(fd);
    *error = ErrnoMessage("fdopen " + temp_.string());
    Discard();
    return false;
  }
  buffer_.reserve(2 * kFlushBytes);
  return true;
}

bool AtomicOutputFile::WriteBuffer(std::string* error) {
  if (!buffer_.empty() && std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
    *error = ErrnoMessage("write " + temp_.string());
    return false;
  }
  buffer_.clear();
  return true;
}

bool AtomicOutputFile::MaybeFlush(std::string* error) {
  return buffer_.size() < kFlushBytes || WriteBuffer(error);
}

int AtomicOutputFile::descriptor() const { return file_ == nullptr ? -1 : ::fileno(file_); }

bool AtomicOutputFile::Commit(std::string* error) {
  if (file_ == nullptr) {
    *error = "internal: output file not open";
    return false;
  }
  if (!WriteBuffer(error)) return false;
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) {
    *error = ErrnoMessage("flush " + temp_.string());
    return false;
  }
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) {
    *error = ErrnoMessage("close " + temp_.string());
    return false;
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    *error = ErrnoMessage("rename to " + path_.string());
    return false;
  }
  temp_.clear();
  const auto dir = path_.has_parent_path() ? path_.parent_path() : std::filesystem::path(".");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // the rename happened; making the entry durable is best effort
    ::fsync(dfd);
    ::close(dfd);
  }
  return true;
}

bool WriteFileAtomically(const std::filesystem::path& path, std::string_view contents, std::string* error) {
  AtomicOutputFile out;
  if (!out.Open(path, error)) return false;
  out.buffer()->append(contents);
  return out.Commit(error);
}

}  // namespace chronolink
