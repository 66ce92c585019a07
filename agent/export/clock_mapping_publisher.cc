#include "agent/export/clock_mapping_publisher.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/own_output_file.h"

namespace chronolink {

namespace {
// Far beyond what a solve of real clocks gives (an hour; 1 %), far inside
// what int64 ns and the ppt drift field hold.
constexpr double kMaxOffsetNs = 3.6e12;
constexpr double kMaxDrift = 0.01;
std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Why an opened page must not be used, or "". The page's directory is
// usually /dev/shm, where any local user may create files: a page someone
// else owns, or can write, or that is linked elsewhere, could be fed a false
// mapping behind the agent's back.
std::string PageRefusal(const struct stat& st) {
  if (std::string why = OwnFileRefusal(st); !why.empty()) {
    return why + ": a page the agent does not hold alone could carry a false mapping";
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return "is writable by its group or others (mode " + Octal(st.st_mode) +
           "): they could write a false mapping into it";
  }
  return "";
}

}  // namespace

int OpenOwnPage(const std::string& path, std::string* error) {
  // O_NOFOLLOW: a symbolic link planted at the path is refused, not followed
  // (to a file of the agent's user's, which the page would overwrite).
  // O_NONBLOCK: a FIFO planted there cannot stall the open.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, kClockPageMode);
  const std::string remove = "; remove it (rm '" + path + "') and restart the agent";
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (err == ELOOP) {
      *error = "clock page '" + path + "' is a symbolic link: refusing to follow it" + remove;
    } else if (err == EACCES && ::lstat(path.c_str(), &st) == 0 && !PageRefusal(st).empty()) {
      *error = "clock page '" + path + "' " + PageRefusal(st) + remove;
    } else {
      *error = "cannot create clock page '" + path + "': " + std::strerror(err);
    }
    return -1;
  }
  struct stat st {};
  std::string why = ::fstat(fd, &st) != 0 ? std::string("cannot be examined: ") + std::strerror(errno)
                                          : PageRefusal(st);
  // Readers (profilers, collectors) run as other users: readable by all,
  // whatever the umask; writable by the agent alone.
  if (why.empty() && (st.st_mode & 07777) != kClockPageMode && ::fchmod(fd, kClockPageMode) != 0) {
    why = std::string("cannot be made mode 0644: ") + std::strerror(errno);
  }
  if (!why.empty()) {
    *error = "clock page '" + path + "' " + why + remove;
    ::close(fd);
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

ClockMapping MappingFromSolution(const NodeSolution& s, int64_t t_ns, int64_t valid_for_ns,
                                 int64_t growth_ppt) {
  ClockMapping m;
  m.node_id = s.node;
  if (!s.reachable) return m;
  // A solution no clock can have (an offset or drift beyond any crystal, an
  // instant at the end of time) gives no mapping rather than an overflow.
  // The leader's line through the node's last solved offsets where it sent
  // one (agent/cluster/page_drift_history.h), else the instant's own drift.
  const double drift = s.page_drift.value_or(s.drift);
  if (!std::isfinite(s.offset_ns) || std::abs(s.offset_ns) > kMaxOffsetNs || !std::isfinite(drift) ||
      std::abs(drift) > kMaxDrift || !std::isfinite(s.uncertainty_ns) || s.uncertainty_ns > kMaxOffsetNs) {
    return m;
  }
  const int64_t offset = std::llround(s.offset_ns);  // node − cluster at T
  if (__builtin_add_overflow(t_ns, offset, &m.local_ref_ns) ||
      __builtin_add_overflow(m.local_ref_ns, valid_for_ns, &m.valid_until_ns)) {
    ClockMapping none;
    none.node_id = s.node;
    return none;
  }
  m.valid = true;
  m.offset_ns = -offset;
  // d(cluster − local)/d(local) = −drift / (1 + drift), drift being d(node − cluster)/d(cluster).
  m.drift_ppt = std::llround(-drift / (1.0 + drift) * 1e12);
  m.uncertainty_ns = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(s.uncertainty_ns)));
  m.uncertainty_growth_ppt = growth_ppt;
  return m;
}

ClockMapping FollowOwnDiscipline(const ClockMapping& solved, const FitDiscipline& then, int64_t now_ns,
                                 const FitDiscipline& now) {
  if (!solved.valid) return solved;
  // In the node's fit clock F the cluster clock runs at (1 + k)(1 + then.rate),
  // k being the page's drift: straight, since F follows the oscillator alone.
  // The local clock is F + d, and d moved by (now.d − then.d) where the line
  // took then.rate × the F between: the cluster clock at now_ns is off the
  // line by (1 + k) times the difference, and runs against the local clock
  // at (1 + k)(1 + then.rate) / (1 + now.rate) now.
  const double k = static_cast<double>(solved.drift_ppt) * 1e-12;
  const int64_t d_moved = now.d_ns - then.d_ns;
  const int64_t fit_moved = (now_ns - solved.local_ref_ns) - d_moved;
  const double off_line = static_cast<double>(d_moved) - then.rate * static_cast<double>(fit_moved);
  ClockMapping m = solved;
  m.local_ref_ns = now_ns;
  m.offset_ns = solved.ToCluster(now_ns) - now_ns - std::llround((1 + k) * off_line);
  m.drift_ppt = std::llround(((1 + k) * (1 + then.rate) / (1 + now.rate) - 1) * 1e12);
  m.uncertainty_ns = solved.UncertaintyAt(now_ns);
  return m;
}

ClockMappingPublisher::~ClockMappingPublisher() { Close(); }

bool ClockMappingPublisher::Open(const std::string& path, uint32_t node_id, std::string* error) {
  Close();
  const int fd = OpenOwnPage(path, error);
  if (fd < 0) return false;
  if (::ftruncate(fd, sizeof(ClockMappingPage)) != 0) {
    *error = "cannot size clock page '" + path + "': " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  void* p = ::mmap(nullptr, sizeof(ClockMappingPage), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    *error = "cannot map clock page '" + path + "': " + std::strerror(errno);
    return false;
  }
  page_ = static_cast<ClockMappingPage*>(p);
  // A page left by a killed writer may be mid-write (odd seq): make it even.
  const uint64_t s = page_->seq.load(std::memory_order_relaxed);
  page_->seq.store((s | 1) + 1, std::memory_order_release);
  ClockMapping none;
  none.node_id = node_id;
  Publish(none);
  page_->version.store(kClockPageVersion, std::memory_order_relaxed);
  page_->magic.store(kClockPageMagic, std::memory_order_release);
  return true;
}

void ClockMappingPublisher::Publish(const ClockMapping& m) {
  if (page_ == nullptr) return;
  const uint64_t s = page_->seq.load(std::memory_order_relaxed);
  page_->seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  page_->node_id.store(m.node_id, std::memory_order_relaxed);
  page_->flags.store(m.valid ? kClockPageValid : 0u, std::memory_order_relaxed);
  page_->local_ref_ns.store(m.local_ref_ns, std::memory_order_relaxed);
  page_->offset_ns.store(m.offset_ns, std::memory_order_relaxed);
  page_->drift_ppt.store(m.drift_ppt, std::memory_order_relaxed);
  page_->uncertainty_ns.store(m.uncertainty_ns, std::memory_order_relaxed);
  page_->uncertainty_growth_ppt.store(m.uncertainty_growth_ppt, std::memory_order_relaxed);
  page_->valid_until_ns.store(m.valid_until_ns, std::memory_order_relaxed);
  page_->published_local_ns.store(m.published_local_ns, std::memory_order_relaxed);
  page_->published_monotonic_ns.store(m.published_monotonic_ns, std::memory_order_relaxed);
  page_->seq.store(s + 2, std::memory_order_release);
}

void ClockMappingPublisher::Close() {
  if (page_ == nullptr) return;
  ClockMapping m;
  ReadClockMapping(*page_, &m);
  m.valid = false;
  Publish(m);
  ::munmap(page_, sizeof(ClockMappingPage));
  page_ = nullptr;
}

}  // namespace chronolink
