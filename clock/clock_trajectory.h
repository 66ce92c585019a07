// A clock as a deployed node has one, for the test bed and the simulator:
// what it reads at each true instant t, exactly. All namespaces of a test bed
// share one kernel clock; t is that clock (int64 ns), and a node's clock is a
// piecewise-linear function of it:
//
//   c(t) = v_k + (t - t_k) * s_k      for t_k <= t < t_{k+1}
//
// with v_k in femtoseconds-of-a-nanosecond ("fine" units, 1e-15 ns, int128)
// and the slope s_k in fine units per ns (1e15 is a perfect clock; 1e15 + y
// runs fast by y·1e-15, so 100 ppm is 1e11). A reading is floor(c(t) / 1e15)
// ns, as a real clock reads whole nanoseconds. Every knot is exact integer
// arithmetic, so the C++ readers (the agent's ingestion, the clock shim) and
// the Python truth (tools/testbed/clock_trajectory.py) agree to the bit.
//
// An oscillator's wander is a run of knots with changing slopes; a
// discipline (chronyd, the kernel PLL) adds its own slope changes and steps
// (clock_trajectory_model.h builds both). A knot's value need not continue
// the previous segment: that is a step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chronolink {

using FineNs = __int128;  // 1e-15 ns
inline constexpr int64_t kFinePerNs = 1'000'000'000'000'000;

struct TrajectoryKnot {
  int64_t t_ns = 0;    // true instant the segment starts
  FineNs value = 0;    // the clock at t_ns, fine units
  int64_t slope = kFinePerNs;  // fine units per true ns (> 0 for a clock)

  friend bool operator==(const TrajectoryKnot&, const TrajectoryKnot&) = default;
};

class ClockTrajectory {
 public:
  ClockTrajectory() = default;
  // A clock reading `value_ns` at true `t0_ns`, running at `slope`.
  ClockTrajectory(int64_t t0_ns, int64_t value_ns, int64_t slope = kFinePerNs);

  // Appends a knot at t_ns > the last knot's: the clock goes on from where
  // it is at t_ns with a new slope (a frequency change), optionally stepped
  // by step_fine. False (nothing appended) when t_ns is not after the last
  // knot. A correction (a discipline's part of a clock) may have any slope;
  // a clock's are positive (monotone()).
  bool ChangeAt(int64_t t_ns, int64_t slope, FineNs step_fine = 0);
  // Appends a knot as it is (for readers of a knot log); the same check.
  bool Append(const TrajectoryKnot& knot);

  // The clock at true t (fine units); before the first knot the first
  // segment is extended backwards.
  FineNs ValueAt(int64_t t_ns) const;
  // What the clock reads at true t: floor(ValueAt / 1e15).
  int64_t ReadAt(int64_t t_ns) const;
  // The first true instant at which the clock reads `reading_ns` or more;
  // across a step back the later such instant (as VirtualClock::Invert).
  // Needs a monotone trajectory (every slope positive).
  int64_t TrueInstantOf(int64_t reading_ns) const;
  bool monotone() const { return monotone_; }
  // The slope at true t (fine units per ns).
  int64_t SlopeAt(int64_t t_ns) const;

  const std::vector<TrajectoryKnot>& knots() const { return knots_; }
  bool empty() const { return knots_.empty(); }
  // The index of the knot whose segment holds true t (0 before the first;
  // the trajectory must not be empty).
  size_t SegmentOf(int64_t t_ns) const;

  // The sum of two trajectories (a clock and a discipline's correction):
  // knots at the union of both, each value and slope the sum. `b`'s values
  // are taken as corrections (its first knot's value is added as is).
  static ClockTrajectory Sum(const ClockTrajectory& a, const ClockTrajectory& b);

 private:
  std::vector<TrajectoryKnot> knots_;
  bool monotone_ = true;
};

// Floor division of fine units by a positive divisor (toward -infinity).
FineNs FloorDiv(FineNs a, FineNs b);

// A fine value as decimal text and back (JSON and the knot log carry it as
// a string: no reader may pass it through a double).
std::string FineToText(FineNs v);
std::optional<FineNs> FineFromText(const std::string& text);

}  // namespace chronolink
