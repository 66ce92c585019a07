// chronolink's clock-mapping page: the node's current local clock ->
// cluster clock mapping, published by the agent in shared memory
// (/dev/shm/chronolink-<node>) and read by profilers and collectors.
// Header-only and dependency-free on purpose: include it and read.
// Seqlock: the writer makes `seq` odd while it writes; a reader retries (a
// bounded number of times) until it sees the same even `seq` before and
// after reading the fields. ClockMappingReader opens a page only when its
// owner is trusted (ClockPageOwners) and copies it out per read.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// The page's bytes as a plain struct, the same layout as ClockMappingPage:
// what a reader copies out of the file.
struct ClockMappingPageImage {
  uint32_t magic;
  uint32_t version;
  uint64_t seq;
  uint32_t node_id;
  uint32_t flags;
  int64_t local_ref_ns;
  int64_t offset_ns;
  int64_t drift_ppt;
  int64_t uncertainty_ns;
  int64_t uncertainty_growth_ppt;
  int64_t valid_until_ns;
  int64_t published_local_ns;
  int64_t published_monotonic_ns;

  // False when the bytes are not a chronolink page of this version.
  bool ToMapping(ClockMapping* out) const {
    if (magic != kClockPageMagic || version != kClockPageVersion) return false;
    ClockMapping m;
    m.node_id = node_id;
    m.valid = (flags & kClockPageValid) != 0;
    m.local_ref_ns = local_ref_ns;
    m.offset_ns = offset_ns;
    m.drift_ppt = drift_ppt;
    m.uncertainty_ns = uncertainty_ns;
    m.uncertainty_growth_ppt = uncertainty_growth_ppt;
    m.valid_until_ns = valid_until_ns;
    m.published_local_ns = published_local_ns;
    m.published_monotonic_ns = published_monotonic_ns;
    *out = m;
    return true;
  }
};
static_assert(sizeof(ClockMappingPageImage) == sizeof(ClockMappingPage) &&
                  sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                  sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
              "the image must have the page's layout");
static_assert(offsetof(ClockMappingPageImage, seq) == offsetof(ClockMappingPage, seq) &&
                  offsetof(ClockMappingPageImage, local_ref_ns) == offsetof(ClockMappingPage, local_ref_ns) &&
                  offsetof(ClockMappingPageImage, published_monotonic_ns) ==
                      offsetof(ClockMappingPage, published_monotonic_ns),
              "the image must have the page's layout");

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

// Who may own a page a reader trusts. Anyone may create files in /dev/shm,
// so a file at a page's path proves nothing by being there: a local user
// who planted one before the agent started could feed every reader a false
// mapping, truncate it under a mapped reader (SIGBUS), or leave a FIFO that
// blocks open() for ever. A reader trusts a page only when it is a regular
// file with one link, not writable by group or others, owned by root, by
// the reader's own user, or by the agent's user named here (the DaemonSet's
// uid 10001; the collector's --clock-page-owner). Nobody else can write or
// shorten such a file.
struct ClockPageOwners {
  static constexpr uid_t kNone = static_cast<uid_t>(-1);
  uid_t agent_uid = kNone;  // the agent's user, when it is neither root nor the reader's

  bool Trusts(uid_t owner) const {
    return owner == 0 || owner == ::geteuid() || (agent_uid != kNone && owner == agent_uid);
  }
};

// What Open found at the path.
struct ClockPageOpen {
  enum State { kOpen, kAbsent, kRefused } state = kAbsent;
  std::string why;  // for kAbsent and kRefused: what was found, in words
  explicit operator bool() const { return state == kOpen; }
};

// Why the file behind `fd` (opened from `path`) must not be trusted, or "".
inline std::string ClockPageRefusal(int fd, const ClockPageOwners& owners) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "cannot be examined";
  if (!S_ISREG(st.st_mode)) {
    return S_ISFIFO(st.st_mode) ? "is a FIFO, not a page" : "is not a regular file";
  }
  if (!owners.Trusts(st.st_uid)) {
    return "is owned by uid " + std::to_string(st.st_uid) +
           ", neither root, this process's user (uid " + std::to_string(::geteuid()) +
           ") nor the agent's user" +
           (owners.agent_uid == ClockPageOwners::kNone ? std::string(" (none named: --clock-page-owner)")
                                                       : " (uid " + std::to_string(owners.agent_uid) + ")") +
           ": another local user could have written it";
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "is writable by its group or others";
  if (st.st_nlink != 1) return "has " + std::to_string(st.st_nlink) + " hard links";
  if (st.st_size < static_cast<off_t>(sizeof(ClockMappingPage))) return "is too short to be a page";
  return "";
}

// A read-only view of an agent's page: ClockMappingReader r; r.Open(path)
// once, then r.Read(&m) as often as wanted. Each Read copies the page out
// with pread (three calls, the seqlock's two reads of `seq` around the
// copy; about a microsecond: docs/PERFORMANCE.md) instead of reading a
// shared mapping: a page shortened under a mapping kills its reader with
// SIGBUS, and through the C API the process that embeds it; a short pread
// is only a failed read.
class ClockMappingReader {
 public:
  explicit ClockMappingReader(ClockPageOwners owners = {}) : owners_(owners) {}
  ~ClockMappingReader() { Close(); }
  ClockMappingReader(const ClockMappingReader&) = delete;
  ClockMappingReader& operator=(const ClockMappingReader&) = delete;

  static std::string PathFor(uint32_t node_id) {
    return "/dev/shm/chronolink-" + std::to_string(node_id);
  }

  // O_NOFOLLOW: a symbolic link is refused, not followed. O_NONBLOCK: a
  // FIFO at the path cannot block the open (it is refused after).
  ClockPageOpen Open(const std::string& path) {
    Close();
    ClockPageOpen r;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
      const int err = errno;
      r.state = err == ENOENT ? ClockPageOpen::kAbsent : ClockPageOpen::kRefused;
      r.why = err == ENOENT  ? "no page at this path (is the agent running?)"
              : err == ELOOP ? "is a symbolic link: not followed"
                             : std::string("cannot be opened: ") + std::strerror(err);
      return r;
    }
    r.why = ClockPageRefusal(fd, owners_);
    if (!r.why.empty()) {
      ::close(fd);
      r.state = ClockPageOpen::kRefused;
      return r;
    }
    fd_ = fd;
    r.state = ClockPageOpen::kOpen;
    return r;
  }
  // False when there is no open page, the page is not a chronolink page, it
  // shrank, or the writer kept it busy for every attempt.
  bool Read(ClockMapping* out, int max_attempts = 1000) const {
    if (fd_ < 0) return false;
    for (int attempt = 0; attempt < max_attempts; ++attempt) {
      uint64_t s1 = 0;
      if (!ReadSeq(&s1)) return false;
      if (s1 & 1) continue;
      std::atomic_thread_fence(std::memory_order_acquire);
      ClockMappingPageImage copy;
      if (::pread(fd_, &copy, sizeof(copy), 0) != static_cast<ssize_t>(sizeof(copy))) return false;
      std::atomic_thread_fence(std::memory_order_acquire);
      uint64_t s2 = 0;
      if (!ReadSeq(&s2)) return false;
      if (s1 != s2 || copy.seq != s1) continue;
      return copy.ToMapping(out);
    }
    return false;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  bool ReadSeq(uint64_t* seq) const {
    return ::pread(fd_, seq, sizeof(*seq), offsetof(ClockMappingPageImage, seq)) ==
           static_cast<ssize_t>(sizeof(*seq));
  }

  ClockPageOwners owners_;
  int fd_ = -1;
};

}  // namespace chronolink
