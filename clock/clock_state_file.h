// Test-only: one test bed node's clock, shared by every process of the node
// through a file (docs/testbed.md "Clocks as deployed"). Two trajectories of
// true time t (the kernel clock all namespaces share):
//   - the oscillator (`raw`): the node's CLOCK_MONOTONIC_RAW, drawn once when
//     the test bed makes the node (oscillator_model.h) and never changed;
//   - the discipline (`correction`): what a clock daemon adds to it, knots
//     appended as it changes the frequency or steps the clock.
// The node's CLOCK_REALTIME is raw + correction; its CLOCK_MONOTONIC the
// same without the steps. Writers (the test bed, the clock shim inside a
// daemon) append under an exclusive flock; readers (the agent, the shim,
// the truth) copy knots under a seqlock and never block a writer.
//
// Layout (native byte order; the file never leaves the machine):
//   header, 128 bytes:
//     char magic[8] "CLKSTAT1"; u32 version (1); u32 knot_bytes (48);
//     u64 seq (odd while a writer changes the file); u32 raw_count,
//     raw_capacity, correction_count, correction_capacity; u64 generation
//     (bumped when knots are withdrawn); u32 node; the rest zero;
//   raw_capacity knots, then correction_capacity knots, each 48 bytes:
//     i64 t_ns; i64 value_hi; u64 value_lo; i64 slope; i64 steps_hi;
//     u64 steps_lo
//   (value and steps are FineNs halves; steps: the sum of the steps up to
//   and including this knot, for CLOCK_MONOTONIC).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "clock/clock_trajectory.h"

namespace chronolink {

inline constexpr char kClockStateMagic[8] = {'C', 'L', 'K', 'S', 'T', 'A', 'T', '1'};
inline constexpr uint32_t kClockStateVersion = 1;
inline constexpr size_t kClockStateHeaderBytes = 128;
inline constexpr size_t kClockStateKnotBytes = 48;

// A correction knot with the steps so far (for CLOCK_MONOTONIC).
struct CorrectionKnot {
  TrajectoryKnot knot;
  FineNs steps = 0;
};

// Creates `path` (refusing an existing file) with the oscillator's knots and
// room for `correction_capacity` correction knots; the correction starts at
// zero with slope 0 at the oscillator's first knot.
bool CreateClockStateFile(const std::string& path, uint32_t node, const ClockTrajectory& raw,
                          uint32_t correction_capacity, std::string* error);

// The node's clock as a reader sees it: refreshed from the file on demand.
class ClockStateReader {
 public:
  bool Open(const std::string& path, std::string* error);
  ~ClockStateReader();
  ClockStateReader() = default;
  ClockStateReader(const ClockStateReader&) = delete;
  ClockStateReader& operator=(const ClockStateReader&) = delete;

  // Copies what the writers appended since the last call (everything after a
  // withdrawal); cheap when nothing changed (one read of seq). False with
  // *error when the file no longer makes sense.
  bool Refresh(std::string* error);

  const ClockTrajectory& raw() const { return raw_; }
  const ClockTrajectory& correction() const { return correction_; }
  uint32_t node() const { return node_; }

  // Readings at true t (refresh first to see the latest knots).
  int64_t RawAt(int64_t t_ns) const { return raw_.ReadAt(t_ns); }
  int64_t RealtimeAt(int64_t t_ns) const;
  int64_t MonotonicAt(int64_t t_ns) const;
  // The true instant at which CLOCK_REALTIME reads `reading_ns` (to 1 ns;
  // for deadlines handed to the kernel).
  int64_t TrueInstantOfRealtime(int64_t reading_ns) const;

 private:
  FineNs StepsAt(int64_t t_ns) const;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  uint32_t node_ = 0;
  uint64_t seen_seq_ = 1;  // odd: nothing copied yet
  uint64_t seen_generation_ = 0;
  ClockTrajectory raw_;
  ClockTrajectory correction_;
  std::vector<FineNs> steps_;  // per correction knot
};

// Appends to the correction of a node's clock (the test bed's discipline
// tools, the clock shim). Each call takes the file's flock.
class ClockStateWriter {
 public:
  bool Open(const std::string& path, std::string* error);
  ~ClockStateWriter();
  ClockStateWriter() = default;
  ClockStateWriter(const ClockStateWriter&) = delete;
  ClockStateWriter& operator=(const ClockStateWriter&) = delete;

  // From true t on, the correction changes at `slope` (fine units per ns:
  // 1e8 is +0.1 ppm), after stepping by `step` (fine units). Refused when t
  // is not after the last knot or the correction is full.
  bool ChangeAt(int64_t t_ns, int64_t slope, FineNs step, std::string* error);
  // Withdraws the knots after true t (a discipline that had planned ahead
  // and was told otherwise); readers start again from the file.
  bool WithdrawAfter(int64_t t_ns, std::string* error);

 private:
  int fd_ = -1;
  uint8_t* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace chronolink
