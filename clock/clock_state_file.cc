#include "clock/clock_state_file.h"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace chronolink {
namespace {

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t knot_bytes;
  uint64_t seq;
  uint32_t raw_count;
  uint32_t raw_capacity;
  uint32_t correction_count;
  uint32_t correction_capacity;
  uint64_t generation;
  uint32_t node;
};
static_assert(sizeof(Header) <= kClockStateHeaderBytes);

struct StoredKnot {
  int64_t t_ns;
  int64_t value_hi;
  uint64_t value_lo;
  int64_t slope;
  int64_t steps_hi;
  uint64_t steps_lo;
};
static_assert(sizeof(StoredKnot) == kClockStateKnotBytes);

StoredKnot Store(const TrajectoryKnot& k, FineNs steps) {
  return {k.t_ns, static_cast<int64_t>(k.value >> 64), static_cast<uint64_t>(k.value), k.slope,
          static_cast<int64_t>(steps >> 64), static_cast<uint64_t>(steps)};
}
FineNs Join(int64_t hi, uint64_t lo) {
  return static_cast<FineNs>((static_cast<unsigned __int128>(static_cast<uint64_t>(hi)) << 64) | lo);
}

std::atomic_ref<uint64_t> Seq(const uint8_t* map) {
  return std::atomic_ref<uint64_t>(reinterpret_cast<Header*>(const_cast<uint8_t*>(map))->seq);
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

size_t FileBytes(uint32_t raw_capacity, uint32_t correction_capacity) {
  return kClockStateHeaderBytes + (static_cast<size_t>(raw_capacity) + correction_capacity) * kClockStateKnotBytes;
}

// Checks a mapped file's header; its capacities must fit the file.
bool CheckHeader(const uint8_t* map, size_t size, const std::string& path, std::string* error) {
  Header h;
  if (size < kClockStateHeaderBytes) {
    *error = path + ": too short to be a clock state file";
    return false;
  }
  std::memcpy(&h, map, sizeof h);
  if (std::memcmp(h.magic, kClockStateMagic, 8) != 0 || h.version != kClockStateVersion ||
      h.knot_bytes != kClockStateKnotBytes) {
    *error = path + ": not a version 1 clock state file";
    return false;
  }
  if (FileBytes(h.raw_capacity, h.correction_capacity) != size || h.raw_count == 0 ||
      h.raw_count > h.raw_capacity || h.correction_capacity == 0) {
    *error = path + ": its capacities do not match its size";
    return false;
  }
  return true;
}

const StoredKnot* Knots(const uint8_t* map) {
  return reinterpret_cast<const StoredKnot*>(map + kClockStateHeaderBytes);
}

// The system call itself: the test bed's discipline shim interposes
// clock_gettime and reads this file from inside it.
int64_t MonotonicNs() {
  timespec ts{};
  ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// How long a reader waits for a writer (they hold the file for
// microseconds; one that died mid-change leaves seq odd until the next).
constexpr int64_t kReaderPatienceNs = 200'000'000;

}  // namespace

bool CreateClockStateFile(const std::string& path, uint32_t node, const ClockTrajectory& raw,
                          uint32_t correction_capacity, std::string* error) {
  if (raw.empty() || correction_capacity == 0) {
    *error = "a clock state needs an oscillator knot and room for corrections";
    return false;
  }
  const auto raw_n = static_cast<uint32_t>(raw.knots().size());
  const size_t size = FileBytes(raw_n, correction_capacity);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    *error = Errno("cannot create " + path);
    return false;
  }
  std::vector<uint8_t> bytes(size, 0);
  Header h{};
  std::memcpy(h.magic, kClockStateMagic, 8);
  h.version = kClockStateVersion;
  h.knot_bytes = kClockStateKnotBytes;
  h.seq = 2;
  h.raw_count = h.raw_capacity = raw_n;
  h.correction_count = 1;
  h.correction_capacity = correction_capacity;
  h.node = node;
  std::memcpy(bytes.data(), &h, sizeof h);
  auto* knots = reinterpret_cast<StoredKnot*>(bytes.data() + kClockStateHeaderBytes);
  for (uint32_t i = 0; i < raw_n; ++i) knots[i] = Store(raw.knots()[i], 0);
  knots[raw_n] = Store({raw.knots().front().t_ns, 0, 0}, 0);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes.data() + done, size - done);
    if (n <= 0) {
      *error = Errno("cannot write " + path);
      ::close(fd);
      ::unlink(path.c_str());
      return false;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return true;
}

namespace {
bool MapFile(const std::string& path, bool writable, int* fd_out, uint8_t** map, size_t* size, std::string* error) {
  const int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *error = Errno("cannot open clock state " + path);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = path + ": not a regular file";
    ::close(fd);
    return false;
  }
  *size = static_cast<size_t>(st.st_size);
  void* m = *size == 0 ? MAP_FAILED
                       : ::mmap(nullptr, *size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    *error = Errno("cannot map " + path);
    ::close(fd);
    return false;
  }
  *map = static_cast<uint8_t*>(m);
  if (!CheckHeader(*map, *size, path, error)) {
    ::munmap(m, *size);
    ::close(fd);
    return false;
  }
  if (fd_out) {
    *fd_out = fd;
  } else {
    ::close(fd);
  }
  return true;
}
}  // namespace

bool ClockStateReader::Open(const std::string& path, std::string* error) {
  uint8_t* map = nullptr;
  if (!MapFile(path, /*writable=*/false, nullptr, &map, &size_, error)) return false;
  map_ = map;
  Header h;
  std::memcpy(&h, map_, sizeof h);
  node_ = h.node;
  return Refresh(error);
}

ClockStateReader::~ClockStateReader() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), size_);
}

bool ClockStateReader::Refresh(std::string* error) {
  if (Seq(map_).load(std::memory_order_acquire) == seen_seq_) return true;  // nothing new: no clock read
  const int64_t give_up = MonotonicNs() + kReaderPatienceNs;
  while (MonotonicNs() < give_up) {
    const uint64_t seq = Seq(map_).load(std::memory_order_acquire);
    if (seq & 1) {  // a writer is changing it
      sched_yield();
      continue;
    }
    if (seq == seen_seq_) return true;
    Header h;
    std::memcpy(&h, map_, sizeof h);
    if (h.raw_count == 0 || h.raw_count > h.raw_capacity || h.correction_count == 0 ||
        h.correction_count > h.correction_capacity) {
      continue;  // torn: read again
    }
    // The oscillator never changes: copied once. Corrections are appended:
    // only the new ones are copied, unless some were withdrawn (generation).
    const bool again = h.generation != seen_generation_ || h.correction_count < correction_.knots().size();
    const size_t have = again ? 0 : correction_.knots().size();
    ClockTrajectory raw;
    std::vector<TrajectoryKnot> added;
    std::vector<FineNs> added_steps;
    const StoredKnot* knots = Knots(map_);
    bool ordered = true;
    for (uint32_t i = 0; raw_.empty() && i < h.raw_count && ordered; ++i) {
      ordered = raw.Append({knots[i].t_ns, Join(knots[i].value_hi, knots[i].value_lo), knots[i].slope});
    }
    const StoredKnot* corr = knots + h.raw_capacity;
    for (size_t i = have; i < h.correction_count; ++i) {
      added.push_back({corr[i].t_ns, Join(corr[i].value_hi, corr[i].value_lo), corr[i].slope});
      added_steps.push_back(Join(corr[i].steps_hi, corr[i].steps_lo));
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (Seq(map_).load(std::memory_order_relaxed) != seq) continue;  // a writer came in between
    if (!ordered || (raw_.empty() && !raw.monotone())) {
      *error = "the clock state's oscillator knots do not move forward in time";
      return false;
    }
    if (raw_.empty()) raw_ = std::move(raw);
    if (again) {
      correction_ = ClockTrajectory();
      steps_.clear();
    }
    for (size_t i = 0; i < added.size(); ++i) {
      if (!correction_.Append(added[i])) {
        *error = "the clock state's corrections do not move forward in time";
        correction_ = ClockTrajectory();
        steps_.clear();
        seen_seq_ = 1;
        return false;
      }
      steps_.push_back(added_steps[i]);
    }
    seen_generation_ = h.generation;
    seen_seq_ = seq;
    return true;
  }
  *error = "the clock state's writer did not finish within 200 ms (its seq stayed odd); the last state read is kept";
  return false;
}

FineNs ClockStateReader::StepsAt(int64_t t_ns) const {
  return steps_.empty() ? 0 : steps_[correction_.SegmentOf(t_ns)];
}

int64_t ClockStateReader::RealtimeAt(int64_t t_ns) const {
  return static_cast<int64_t>(FloorDiv(raw_.ValueAt(t_ns) + correction_.ValueAt(t_ns), kFinePerNs));
}

int64_t ClockStateReader::MonotonicAt(int64_t t_ns) const {
  return static_cast<int64_t>(FloorDiv(raw_.ValueAt(t_ns) + correction_.ValueAt(t_ns) - StepsAt(t_ns), kFinePerNs));
}

int64_t ClockStateReader::TrueInstantOfRealtime(int64_t reading_ns) const {
  int64_t t = reading_ns;
  for (int i = 0; i < 6; ++i) {  // Newton on a clock of slope ~1
    const int64_t miss = RealtimeAt(t) - reading_ns;
    if (miss == 0) break;
    t -= miss;
  }
  for (int i = 0; i < 64 && RealtimeAt(t) < reading_ns; ++i) ++t;
  for (int i = 0; i < 64 && RealtimeAt(t - 1) >= reading_ns; ++i) --t;
  return t;
}

bool ClockStateWriter::Open(const std::string& path, std::string* error) {
  return MapFile(path, /*writable=*/true, &fd_, &map_, &size_, error);
}

ClockStateWriter::~ClockStateWriter() {
  if (map_) ::munmap(map_, size_);
  if (fd_ >= 0) ::close(fd_);
}

namespace {
// Holds the file's flock for one change and brackets it with the seqlock.
class LockedChange {
 public:
  // Odd while changing, the next even number after; from whatever a writer
  // that died mid-change left (its flock went with it).
  LockedChange(int fd, uint8_t* map) : fd_(fd), map_(map) {
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
    odd_ = Seq(map_).load(std::memory_order_relaxed) | 1;
    Seq(map_).store(odd_, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  ~LockedChange() {
    Seq(map_).store(odd_ + 1, std::memory_order_release);
    ::flock(fd_, LOCK_UN);
  }
  Header* header() { return reinterpret_cast<Header*>(map_); }
  StoredKnot* corrections() {
    return reinterpret_cast<StoredKnot*>(map_ + kClockStateHeaderBytes) + header()->raw_capacity;
  }

 private:
  int fd_;
  uint8_t* map_;
  uint64_t odd_ = 1;
};
}  // namespace

bool ClockStateWriter::ChangeAt(int64_t t_ns, int64_t slope, FineNs step, std::string* error) {
  LockedChange change(fd_, map_);
  Header* h = change.header();
  StoredKnot* knots = change.corrections();
  if (h->correction_count >= h->correction_capacity) {
    *error = "the clock state's corrections are full";
    return false;
  }
  const StoredKnot& last = knots[h->correction_count - 1];
  if (t_ns <= last.t_ns) {
    *error = "a correction must come after the last one";
    return false;
  }
  const FineNs value = Join(last.value_hi, last.value_lo) + static_cast<FineNs>(t_ns - last.t_ns) * last.slope;
  knots[h->correction_count] = Store({t_ns, value + step, slope}, Join(last.steps_hi, last.steps_lo) + step);
  ++h->correction_count;
  return true;
}

bool ClockStateWriter::WithdrawAfter(int64_t t_ns, std::string* error) {
  (void)error;
  LockedChange change(fd_, map_);
  Header* h = change.header();
  const StoredKnot* knots = change.corrections();
  uint32_t keep = h->correction_count;
  while (keep > 1 && knots[keep - 1].t_ns > t_ns) --keep;
  if (keep != h->correction_count) {
    h->correction_count = keep;
    ++h->generation;
  }
  return true;
}

}  // namespace chronolink
