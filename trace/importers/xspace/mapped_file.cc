#include "trace/importers/xspace/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace chronolink::trace {
namespace {

// The one mapping the handler may repair (0, 0: none).
std::atomic<uintptr_t> g_begin{0};
std::atomic<uintptr_t> g_end{0};
std::atomic<bool> g_torn{false};

void OnSigbus(int sig, siginfo_t* info, void*) {
  const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  const uintptr_t begin = g_begin.load(), end = g_end.load();
  if (info->si_code > 0 && begin != 0 && at >= begin && at < end) {  // the kernel's, not a kill()
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    void* where = reinterpret_cast<void*>(at & ~(page - 1));
    if (::mmap(where, page, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
      g_torn.store(true);
      return;  // the load runs again and reads zeros
    }
  }
  // Not ours (or not repairable): die of it, as without the handler.
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void InstallHandlerOnce() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    return ::sigaction(SIGBUS, &sa, nullptr) == 0;
  }();
  (void)installed;
}

}  // namespace

bool MappedFile::Open(const std::filesystem::path& path, size_t max_bytes, std::string* why) {
  Close();
  if (g_begin.load() != 0) {
    *why = "another file is mapped";
    return false;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
      static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    *why = "not a regular file of a size the reader accepts";
    return false;
  }
  InstallHandlerOnce();
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) {
    *why = std::string("cannot map: ") + std::strerror(errno);
    return false;
  }
  data_ = static_cast<const char*>(data);
  size_ = size;
  g_torn.store(false);
  g_end.store(reinterpret_cast<uintptr_t>(data_) + size_);
  g_begin.store(reinterpret_cast<uintptr_t>(data_));
  return true;
}

void MappedFile::Close() {
  if (data_ == nullptr) return;
  g_begin.store(0);
  g_end.store(0);
  ::munmap(const_cast<char*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

bool MappedFile::torn() const { return data_ != nullptr && g_torn.load(); }

}  // namespace chronolink::trace
