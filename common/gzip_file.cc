#include "common/gzip_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "common/errno_message.h"
#include "common/input_file.h"

namespace chronolink {

namespace {

// Copies `in` into the gzip stream on `out_fd` (which it closes).
bool Deflate(int in_fd, int out_fd, const std::string& tmp, std::string* error) {
  gzFile gz = gzdopen(out_fd, "wb6");
  if (gz == nullptr) {
    ::close(out_fd);
    *error = tmp + ": cannot start gzip";
    return false;
  }
  std::array<char, 1 << 16> buffer{};
  bool ok = true;
  for (;;) {
    const ssize_t n = ::read(in_fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = ErrnoMessage("reading for gzip");
      ok = false;
      break;
    }
    if (n == 0) break;
    if (gzwrite(gz, buffer.data(), static_cast<unsigned>(n)) != n) {
      *error = tmp + ": gzip write failed";
      ok = false;
      break;
    }
  }
  // gzflush(Z_FINISH) then fsync through the descriptor gzclose would close.
  if (ok && gzflush(gz, Z_FINISH) != Z_OK) {
    *error = tmp + ": gzip finish failed";
    ok = false;
  }
  if (ok && ::fsync(out_fd) != 0) {
    *error = ErrnoMessage(tmp + ": fsync");
    ok = false;
  }
  if (gzclose(gz) != Z_OK && ok) {
    *error = tmp + ": gzip close failed";
    ok = false;
  }
  return ok;
}

}  // namespace

bool GzipFileInPlace(const std::filesystem::path& src, std::string* error) {
  const std::string tmp = src.string() + ".gz.tmp", dst = src.string() + ".gz";
  const int in = ::open(src.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) {
    *error = ErrnoMessage(src.string() + ": cannot open to compress");
    return false;
  }
  ::unlink(tmp.c_str());  // a crash's leftover
  const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (out < 0) {
    *error = ErrnoMessage(tmp + ": cannot create");
    ::close(in);
    return false;
  }
  const bool ok = Deflate(in, out, tmp, error);
  ::close(in);
  if (!ok) {
    ::unlink(tmp.c_str());
    return false;
  }
  if (::rename(tmp.c_str(), dst.c_str()) != 0) {
    *error = ErrnoMessage("renaming " + tmp + " to " + dst);
    ::unlink(tmp.c_str());
    return false;
  }
  if (::unlink(src.c_str()) != 0) {
    *error = ErrnoMessage(src.string() + ": compressed, but cannot remove it");
    return false;
  }
  return true;
}

BackgroundGzip::~BackgroundGzip() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void BackgroundGzip::Compress(std::filesystem::path src) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(src));
    if (!worker_.joinable()) worker_ = std::thread([this] { Run(); });
  }
  wake_.notify_all();
}

void BackgroundGzip::Drain() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

uint64_t BackgroundGzip::compressed() const {
  std::lock_guard lock(mutex_);
  return compressed_;
}

std::string BackgroundGzip::TakeError() {
  std::lock_guard lock(mutex_);
  return std::exchange(error_, std::string());
}

void BackgroundGzip::Run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    const std::filesystem::path src = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::string error;
    const bool ok = GzipFileInPlace(src, &error);
    lock.lock();
    busy_ = false;
    if (ok) {
      ++compressed_;
    } else {
      error_ = error;
    }
    idle_.notify_all();
  }
}

LineFileReader::~LineFileReader() {
  if (file_ != nullptr) gzclose(static_cast<gzFile>(file_));
}

bool LineFileReader::Open(const std::string& path, std::string* error) {
  std::ifstream probe;  // the clear reasons: a directory, a missing file
  if (!OpenInputFile(path, &probe, error)) return false;
  probe.close();
  path_ = path;
  file_ = gzopen(path.c_str(), "rb");
  if (file_ == nullptr) {
    *error = ErrnoMessage(path + ": cannot open");
    return false;
  }
  gzbuffer(static_cast<gzFile>(file_), 1 << 17);
  return true;
}

bool LineFileReader::Next(std::string* line) {
  if (file_ == nullptr) return false;
  auto* gz = static_cast<gzFile>(file_);
  line->clear();
  std::array<char, 4096> chunk{};
  for (;;) {
    if (gzgets(gz, chunk.data(), static_cast<int>(chunk.size())) == nullptr) {
      int code = Z_OK;
      const char* what = gzerror(gz, &code);
      if (code != Z_OK && code != Z_STREAM_END) {
        error_ = path_ + ": " + (code == Z_BUF_ERROR ? std::string("the compressed file ends early (truncated)")
                                                     : std::string("cannot read: ") + what);
        return false;
      }
      return !line->empty();  // the last line without a newline
    }
    line->append(chunk.data());
    if (!line->empty() && line->back() == '\n') {
      line->pop_back();
      return true;
    }
  }
}

}  // namespace chronolink
