#include "trace/exporters/xspace_writer.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/atomic_output_file.h"

namespace chronolink::trace {
namespace {

constexpr int kWriteBlockBytes = 1 << 20;
constexpr size_t kMaxMessageBytes = 2'147'483'647;

bool SizeFits(const xspace::XSpace& space, size_t* size, std::string* error) {
  *size = space.ByteSizeLong();
  if (*size > kMaxMessageBytes) {
    *error = "the XSpace is " + std::to_string(*size) +
             " bytes, over protobuf's 2 GiB message limit; split the trace";
    return false;
  }
  return true;
}

// Writes the message to an open descriptor; errno-style message on failure.
bool WriteToFd(const xspace::XSpace& space, int fd, std::string* error) {
  google::protobuf::io::FileOutputStream stream(fd, kWriteBlockBytes);
  bool ok;
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    space.SerializeWithCachedSizes(&coded);
    ok = !coded.HadError();
  }
  ok = stream.Flush() && ok;
  if (!ok || stream.GetErrno() != 0) {
    *error = std::string("write failed: ") +
             (stream.GetErrno() ? std::strerror(stream.GetErrno()) : "serialization error");
    return false;
  }
  return true;
}

}  // namespace

namespace {

// Writes [data, data + size) at the descriptor's position; *error on failure.
// `direct`: the descriptor has O_DIRECT set; a write the file system refuses
// that way (EINVAL) clears it and goes on through the page cache.
bool WriteAll(int fd, const char* data, size_t size, bool* direct, const std::filesystem::path& path,
              std::string* error) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && *direct) {
      *direct = false;
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT);
      continue;
    }
    if (n <= 0) {
      *error = path.string() + ": write failed: " + std::strerror(n < 0 ? errno : EIO);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

constexpr size_t kDirectAlign = 4096;       // covers 512 B and 4 KiB logical blocks
constexpr size_t kDirectMinBytes = 1 << 20;  // below this the page cache costs nothing worth saving

}  // namespace

bool WriteXSpaceBytesFile(std::string_view bytes, const std::filesystem::path& path, std::string* error) {
  AtomicOutputFile out;
  std::string why;
  if (!out.Open(path, &why)) {
    *error = path.string() + ": " + why;
    return false;
  }
  const int fd = out.descriptor();
  // The whole 4 KiB blocks of an aligned buffer go to the disk directly
  // (O_DIRECT): no copy into the page cache, no writeback of it at the
  // fsync; the tail, and any file system that refuses, through the cache.
  size_t direct_bytes = 0;
  bool direct = false;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % kDirectAlign == 0 && bytes.size() >= kDirectMinBytes) {
    const int flags = ::fcntl(fd, F_GETFL);
    direct = flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0;
    if (direct) direct_bytes = bytes.size() / kDirectAlign * kDirectAlign;
  }
  if (!WriteAll(fd, bytes.data(), direct_bytes, &direct, path, error)) return false;
  if (direct) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT);
  if (!WriteAll(fd, bytes.data() + direct_bytes, bytes.size() - direct_bytes, &direct, path, error)) return false;
  if (!out.Commit(&why)) {
    *error = path.string() + ": " + why;
    return false;
  }
  return true;
}

bool SerializeXSpace(const xspace::XSpace& space, std::string* bytes, std::string* error) {
  size_t size;
  if (!SizeFits(space, &size, error)) return false;
  bytes->clear();
  bytes->reserve(size);
  google::protobuf::io::StringOutputStream stream(bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  space.SerializeWithCachedSizes(&coded);
  return !coded.HadError();
}

bool WriteXSpaceFile(const HostTrace& trace, const std::filesystem::path& path, std::string* error) {
  size_t size;
  std::string why;
  if (!SizeFits(*trace.space, &size, &why)) {
    *error = path.string() + ": " + why;
    return false;
  }
  AtomicOutputFile out;  // whole or not at all: temporary file, fsync, rename
  if (!out.Open(path, &why) || !WriteToFd(*trace.space, out.descriptor(), &why) || !out.Commit(&why)) {
    *error = path.string() + ": " + why;
    return false;
  }
  return true;
}

}  // namespace chronolink::trace
