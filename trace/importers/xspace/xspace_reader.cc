#include "trace/importers/xspace/xspace_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "trace/importers/xspace/line_base.h"
#include "trace/importers/xspace/wire_diagnosis.h"
#include "common/quoted_text.h"

namespace chronolink::trace {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::io::ZeroCopyInputStream;

constexpr int kReadBlockBytes = 1 << 20;

constexpr size_t kHugePage = 2 << 20;

// Large arena blocks freed by one trace, kept for the next read when reuse
// is enabled (SetXSpaceBlockReuse): a reused block costs nothing, a fresh
// one costs the kernel zeroing its pages, which was most of a read's time.
class LargeBlockPool {
 public:
  void SetLimit(size_t bytes) {
    std::vector<void*> drop;
    {
      std::lock_guard lock(mu_);
      limit_ = bytes;
      while (held_ > limit_ && !free_.empty()) {
        held_ -= free_.back().first;
        drop.push_back(free_.back().second);
        free_.pop_back();
      }
    }
    for (void* p : drop) std::free(p);
  }
  void* Take(size_t size) {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].first != size) continue;
      void* p = free_[i].second;
      free_[i] = free_.back();
      free_.pop_back();
      held_ -= size;
      return p;
    }
    return nullptr;
  }
  bool Put(void* p, size_t size) {
    std::lock_guard lock(mu_);
    if (held_ + size > limit_) return false;
    free_.emplace_back(size, p);
    held_ += size;
    return true;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<size_t, void*>> free_;
  size_t held_ = 0;
  size_t limit_ = 0;
};

LargeBlockPool& BlockPool() {
  static auto* pool = new LargeBlockPool();  // never destroyed: arenas may outlive static destruction
  return *pool;
}

size_t RoundToHugePage(size_t size) { return (size + kHugePage - 1) / kHugePage * kHugePage; }

// Arena blocks of 2 MiB and more are 2 MiB aligned and marked for
// transparent huge pages: a parsed trace takes ~6x its file size, and
// faulting that in 4 KiB pages is a large part of the read (docs/xspace.md).
void* AllocateBlock(size_t size) {
  if (size < kHugePage) return std::malloc(size);
  const size_t rounded = RoundToHugePage(size);
  if (void* reused = BlockPool().Take(rounded)) return reused;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p) ::madvise(p, rounded, MADV_HUGEPAGE);  // a hint; without THP it is ignored
  return p;
}

void FreeBlock(void* p, size_t size) {
  if (size >= kHugePage && BlockPool().Put(p, RoundToHugePage(size))) return;
  std::free(p);
}

// A fresh trace whose arena grows in blocks sized for `bytes` of input:
// large blocks for large files (fewer allocations), small ones for small.
HostTrace NewTraceForBytes(int64_t bytes) {
  google::protobuf::ArenaOptions options;
  options.start_block_size = 4096;
  options.max_block_size = static_cast<size_t>(std::clamp<int64_t>(bytes / 16, 8192, 4 << 20));
  options.block_alloc = AllocateBlock;
  options.block_dealloc = FreeBlock;
  HostTrace trace;
  trace.arena = std::make_unique<google::protobuf::Arena>(options);
  trace.space = google::protobuf::Arena::CreateMessage<xspace::XSpace>(trace.arena.get());
  return trace;
}

// Parses all of `size` bytes from `stream` into `space`; trailing data that
// protobuf would stop at (an end-group tag) or a short read is a failure.
bool ParseAll(ZeroCopyInputStream* stream, int64_t size, xspace::XSpace* space) {
  CodedInputStream coded(stream);
  coded.SetTotalBytesLimit(static_cast<int>(size));
  if (!space->ParseFromCodedStream(&coded)) return false;
  return coded.ConsumedEntireMessage() && coded.CurrentPosition() == size;
}

// Host name and line base: what the model needs beyond the message.
bool FinishTrace(std::string_view name, std::string file_host, HostTrace* trace,
                 std::string* error, XSpaceReadResult* result) {
  LineBase base;
  std::string base_error;
  if (!DetectLineBase(*trace->space, &base, &base_error)) {
    *error = std::string(name) + ": " + base_error;
    return false;
  }
  trace->line_base_ns = base.base_ns;
  trace->line_base_known = base.known;
  const std::string listed = trace->space->hostnames().empty() ? "" : trace->space->hostnames(0);
  trace->host = file_host.empty() ? listed : file_host;
  if (std::string w = HostnameWarning(name, file_host, listed); result && !w.empty()) {
    result->warnings.push_back(std::move(w));
  }
  if (result && !base.known) {
    result->warnings.push_back(std::string(name) +
                               ": line timestamps are relative and no Task Environment "
                               "profile_start_time says to what; the trace cannot be aligned "
                               "until its start is given");
  }
  return true;
}

bool SizeAcceptable(std::string_view name, int64_t size, std::string* error) {
  if (size == 0) {
    *error = std::string(name) + ": empty (0 bytes), not an XSpace";
    return false;
  }
  if (size > kMaxXSpaceBytes) {
    *error = std::string(name) + ": " + std::to_string(size) +
             " bytes is over protobuf's 2 GiB message limit (" + std::to_string(kMaxXSpaceBytes) +
             " bytes); no XSpace producer can write such a file";
    return false;
  }
  return true;
}

class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() { ::close(fd_); }
  FileCloser(const FileCloser&) = delete;
  FileCloser& operator=(const FileCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

std::string HostnameWarning(std::string_view name, std::string_view file_host, std::string_view listed) {
  if (file_host.empty() || listed.empty() || listed == file_host) return "";
  return std::string(name) + ": hostnames[0] is " + QuotedText(listed) + " but the file name says " +
         QuotedText(file_host) + "; using the file name, as XProf does";
}

void SetXSpaceBlockReuse(size_t max_bytes) { BlockPool().SetLimit(max_bytes); }

std::string HostFromXSpaceFileName(const std::filesystem::path& path) {
  std::string name = path.filename().string();
  if (name.size() > kXSpaceFileSuffix.size() && name.ends_with(kXSpaceFileSuffix)) {
    name.resize(name.size() - kXSpaceFileSuffix.size());
  }
  return name;
}

bool ReadXSpaceFile(const std::filesystem::path& path, HostTrace* out, std::string* error,
                    XSpaceReadResult* result) {
  *out = HostTrace();
  const std::string name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = name + ": cannot open: " + std::strerror(errno);
    return false;
  }
  FileCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = name + ": not a regular file";
    return false;
  }
  if (!SizeAcceptable(name, st.st_size, error)) return false;

  HostTrace trace = NewTraceForBytes(st.st_size);
  bool parsed;
  int read_errno;
  {
    google::protobuf::io::FileInputStream stream(fd, kReadBlockBytes);
    parsed = ParseAll(&stream, st.st_size, trace.space);
    read_errno = stream.GetErrno();
  }
  if (read_errno != 0) {
    *error = name + ": read failed: " + std::strerror(read_errno);
    return false;
  }
  if (!parsed) {
    std::string why = "the file changed while it was read";
    if (::lseek(fd, 0, SEEK_SET) == 0) {
      google::protobuf::io::FileInputStream again(fd, kReadBlockBytes);
      why = DiagnoseXSpaceWire(&again, st.st_size);
    }
    *error = name + ": not a valid XSpace (" + std::to_string(st.st_size) + " bytes): " + why;
    return false;
  }
  trace.source = path;
  if (!FinishTrace(name, HostFromXSpaceFileName(path), &trace, error, result)) return false;
  *out = std::move(trace);
  return true;
}

bool ParseXSpace(std::string_view bytes, HostTrace* out, std::string* error,
                 XSpaceReadResult* result) {
  *out = HostTrace();
  const std::string name = "<XSpace bytes>";
  const auto size = static_cast<int64_t>(bytes.size());
  if (!SizeAcceptable(name, size, error)) return false;
  HostTrace trace = NewTraceForBytes(size);
  google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(size));
  if (!ParseAll(&stream, size, trace.space)) {
    google::protobuf::io::ArrayInputStream again(bytes.data(), static_cast<int>(size));
    *error = name + ": not a valid XSpace (" + std::to_string(size) +
             " bytes): " + DiagnoseXSpaceWire(&again, size);
    return false;
  }
  if (!FinishTrace(name, "", &trace, error, result)) return false;
  *out = std::move(trace);
  return true;
}

}  // namespace chronolink::trace
