// chronolink's clock-mapping page: the node's current local clock ->
// cluster clock mapping, published by the agent in shared memory
// (/dev/shm/chronolink-<node>) and read by profilers and collectors without
// a system call. Header-only and dependency-free on purpose: include it and
// read. Seqlock: the writer makes `seq` odd while it writes; a reader
// retries (a bounded number of times) until it sees the same even `seq`
// before and after reading the fields.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace chronolink {

constexpr uint32_t kClockPageMagic = 0x434C4D50;  // "CLMP"
constexpr uint32_t kClockPageVersion = 2;

// The page layout (version 2: version 1 and the two published_* fields). Every field is an atomic so that concurrent
// access is defined behaviour; all are lock-free on 64-bit Linux.
struct ClockMappingPage {
  std::atomic<uint32_t> magic;
  std::atomic<uint32_t> version;
  std::atomic<uint64_t> seq;             // odd while the writer is inside
  std::atomic<uint32_t> node_id;
  std::atomic<uint32_t> flags;           // bit 0: valid (a solved mapping exists)
  std::atomic<int64_t> local_ref_ns;     // reference instant, local CLOCK_REALTIME
  std::atomic<int64_t> offset_ns;        // cluster - local at local_ref_ns
  std::atomic<int64_t> drift_ppt;        // d(cluster - local)/d(local), parts per 10^12
  std::atomic<int64_t> uncertainty_ns;   // at local_ref_ns
  std::atomic<int64_t> uncertainty_growth_ppt;  // added per ns away from local_ref_ns, ppt
  std::atomic<int64_t> valid_until_ns;   // local instant after which the mapping is stale
  // The local clock and CLOCK_MONOTONIC, read together when the mapping was
  // written: a reader that finds them moved apart knows the local clock
  // stepped since (before the agent could withdraw the mapping).
  std::atomic<int64_t> published_local_ns;
  std::atomic<int64_t> published_monotonic_ns;
};
static_assert(std::atomic<int64_t>::is_always_lock_free, "the page needs lock-free 64-bit atomics");

constexpr uint32_t kClockPageValid = 1u << 0;

// One consistent copy of the page's mapping.
struct ClockMapping {
  uint32_t node_id = 0;
  bool valid = false;
  int64_t local_ref_ns = 0;
  int64_t offset_ns = 0;
  int64_t drift_ppt = 0;
  int64_t uncertainty_ns = 0;
  int64_t uncertainty_growth_ppt = 0;
  int64_t valid_until_ns = 0;
  int64_t published_local_ns = 0;
  int64_t published_monotonic_ns = 0;

  // Whether the local clock stepped since the mapping was written, judged
  // from a local reading and CLOCK_MONOTONIC taken together now: the two
  // move together but for steps (NTP slews both alike); 200 ppm of the time
  // since covers a test bed's virtual drift, so a 1 ms step is seen up to
  // 5 s after the mapping was written (the agent rewrites it every window,
  // and withdraws it itself within 100 ms of a step).
  bool ClockSteppedSince(int64_t local_ns, int64_t monotonic_ns) const {
    const __int128 moved = static_cast<__int128>(local_ns) - published_local_ns;
    __int128 elapsed = static_cast<__int128>(monotonic_ns) - published_monotonic_ns;
    __int128 apart = moved - elapsed;
    if (apart < 0) apart = -apart;
    if (elapsed < 0) elapsed = -elapsed;
    return apart > 20'000 + elapsed * 200 / 1'000'000;
  }

  // local -> cluster time, int64 throughout (the drift term uses a 128-bit
  // product, so no epoch value passes through floating point).
  int64_t ToCluster(int64_t local_ns) const {
    const __int128 dt = static_cast<__int128>(local_ns) - local_ref_ns;
    return local_ns + offset_ns + static_cast<int64_t>(dt * drift_ppt / 1'000'000'000'000);
  }
  int64_t UncertaintyAt(int64_t local_ns) const {
    __int128 dt = static_cast<__int128>(local_ns) - local_ref_ns;
    if (dt < 0) dt = -dt;
    return uncertainty_ns + static_cast<int64_t>(dt * uncertainty_growth_ppt / 1'000'000'000'000);
  }
};

// Reads one consistent snapshot; false when the writer kept the page busy
// for `max_attempts` tries (it holds it for nanoseconds, so this means a
// writer died mid-write) or the page is not a chronolink page.
inline bool ReadClockMapping(const ClockMappingPage& page, ClockMapping* out,
                             int max_attempts = 1000) {
  if (page.magic.load(std::memory_order_relaxed) != kClockPageMagic ||
      page.version.load(std::memory_order_relaxed) != kClockPageVersion) {
    return false;
  }
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    const uint64_t s1 = page.seq.load(std::memory_order_acquire);
    if (s1 & 1) continue;
    ClockMapping m;
    m.node_id = page.node_id.load(std::memory_order_relaxed);
    m.valid = (page.flags.load(std::memory_order_relaxed) & kClockPageValid) != 0;
    m.local_ref_ns = page.local_ref_ns.load(std::memory_order_relaxed);
    m.offset_ns = page.offset_ns.load(std::memory_order_relaxed);
    m.drift_ppt = page.drift_ppt.load(std::memory_order_relaxed);
    m.uncertainty_ns = page.uncertainty_ns.load(std::memory_order_relaxed);
    m.uncertainty_growth_ppt = page.uncertainty_growth_ppt.load(std::memory_order_relaxed);
    m.valid_until_ns = page.valid_until_ns.load(std::memory_order_relaxed);
    m.published_local_ns = page.published_local_ns.load(std::memory_order_relaxed);
    m.published_monotonic_ns = page.published_monotonic_ns.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (page.seq.load(std::memory_order_relaxed) == s1) {
      *out = m;
      return true;
    }
  }
  return false;
}

// A read-only view of an agent's page: ClockMappingReader r; r.Open(node)
// once, then r.Read(&m) as often as wanted (no system call).
class ClockMappingReader {
 public:
  ClockMappingReader() = default;
  ~ClockMappingReader() { Close(); }
  ClockMappingReader(const ClockMappingReader&) = delete;
  ClockMappingReader& operator=(const ClockMappingReader&) = delete;

  static std::string PathFor(uint32_t node_id) {
    return "/dev/shm/chronolink-" + std::to_string(node_id);
  }

  bool Open(const std::string& path) {
    Close();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(ClockMappingPage))) {
      ::close(fd);
      return false;
    }
    void* p = ::mmap(nullptr, sizeof(ClockMappingPage), PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return false;
    page_ = static_cast<const ClockMappingPage*>(p);
    return true;
  }
  bool Read(ClockMapping* out) const { return page_ != nullptr && ReadClockMapping(*page_, out); }
  void Close() {
    if (page_ != nullptr) ::munmap(const_cast<ClockMappingPage*>(page_), sizeof(ClockMappingPage));
    page_ = nullptr;
  }

 private:
  const ClockMappingPage* page_ = nullptr;
};

}  // namespace chronolink
