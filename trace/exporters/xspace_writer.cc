#include "trace/exporters/xspace_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cerrno>
#include <cstring>

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
  if (::fsync(fd) != 0) {
    *error = std::string("fsync failed: ") + std::strerror(errno);
    return false;
  }
  return true;
}

void SyncDirectory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename happened; durability of the entry is best effort
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

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
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = tmp.string() + ": cannot create: " + std::strerror(errno);
    return false;
  }
  bool ok = WriteToFd(*trace.space, fd, &why);
  if (::close(fd) != 0 && ok) {
    why = std::string("close failed: ") + std::strerror(errno);
    ok = false;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    why = std::string("rename to ") + path.string() + " failed: " + std::strerror(errno);
    ok = false;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    *error = tmp.string() + ": " + why;
    return false;
  }
  SyncDirectory(path.parent_path());
  return true;
}

}  // namespace chronolink::trace
