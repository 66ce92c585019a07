#include "clock/clock_trajectory.h"

#include <algorithm>
#include <cstdlib>

namespace chronolink {

FineNs FloorDiv(FineNs a, FineNs b) {
  FineNs q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

ClockTrajectory::ClockTrajectory(int64_t t0_ns, int64_t value_ns, int64_t slope) {
  knots_.push_back({t0_ns, static_cast<FineNs>(value_ns) * kFinePerNs, slope});
  monotone_ = slope > 0;
}

bool ClockTrajectory::Append(const TrajectoryKnot& knot) {
  if (!knots_.empty() && knot.t_ns <= knots_.back().t_ns) return false;
  knots_.push_back(knot);
  monotone_ = monotone_ && knot.slope > 0;
  return true;
}

bool ClockTrajectory::ChangeAt(int64_t t_ns, int64_t slope, FineNs step_fine) {
  if (knots_.empty()) return Append({t_ns, step_fine, slope});
  if (t_ns <= knots_.back().t_ns) return false;
  return Append({t_ns, ValueAt(t_ns) + step_fine, slope});
}

size_t ClockTrajectory::SegmentOf(int64_t t_ns) const {
  // The last knot at or before t; the first one for t before it.
  const auto after = std::upper_bound(knots_.begin(), knots_.end(), t_ns,
                                      [](int64_t t, const TrajectoryKnot& k) { return t < k.t_ns; });
  return after == knots_.begin() ? 0 : static_cast<size_t>(after - knots_.begin()) - 1;
}

FineNs ClockTrajectory::ValueAt(int64_t t_ns) const {
  if (knots_.empty()) return static_cast<FineNs>(t_ns) * kFinePerNs;
  const TrajectoryKnot& k = knots_[SegmentOf(t_ns)];
  return k.value + static_cast<FineNs>(t_ns - k.t_ns) * k.slope;
}

int64_t ClockTrajectory::ReadAt(int64_t t_ns) const {
  return static_cast<int64_t>(FloorDiv(ValueAt(t_ns), kFinePerNs));
}

int64_t ClockTrajectory::SlopeAt(int64_t t_ns) const {
  return knots_.empty() ? kFinePerNs : knots_[SegmentOf(t_ns)].slope;
}

int64_t ClockTrajectory::TrueInstantOf(int64_t reading_ns) const {
  if (knots_.empty()) return reading_ns;
  const FineNs target = static_cast<FineNs>(reading_ns) * kFinePerNs;
  // The last segment whose start value is at or below the target: across a
  // step back the later one, as the clock reads the value again there.
  size_t k = 0;
  for (size_t i = knots_.size(); i-- > 0;) {
    if (knots_[i].value <= target) {
      k = i;
      break;
    }
  }
  const TrajectoryKnot& knot = knots_[k];
  // Smallest t with value + (t - t_k)·slope >= target: a ceiling division.
  const FineNs need = target - knot.value;
  const FineNs dt = -FloorDiv(-need, knot.slope);
  int64_t t = knot.t_ns + static_cast<int64_t>(dt);
  // Skipped forward by a step: the instant of the step.
  if (k + 1 < knots_.size() && t > knots_[k + 1].t_ns) t = knots_[k + 1].t_ns;
  return t;
}

ClockTrajectory ClockTrajectory::Sum(const ClockTrajectory& a, const ClockTrajectory& b) {
  std::vector<int64_t> at;
  for (const auto& k : a.knots_) at.push_back(k.t_ns);
  for (const auto& k : b.knots_) at.push_back(k.t_ns);
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  ClockTrajectory sum;
  for (const int64_t t : at) sum.Append({t, a.ValueAt(t) + b.ValueAt(t), a.SlopeAt(t) + b.SlopeAt(t)});
  return sum;
}

std::string FineToText(FineNs v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  unsigned __int128 u = negative ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string digits;
  while (u != 0) {
    digits.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  if (negative) digits.push_back('-');
  std::reverse(digits.begin(), digits.end());
  return digits;
}

std::optional<FineNs> FineFromText(const std::string& text) {
  size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) i = 1;
  if (i >= text.size() || text.size() - i > 38) return std::nullopt;  // |v| < 1e38 < 2^127
  FineNs v = 0;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    v = v * 10 + (text[i] - '0');
  }
  return negative ? -v : v;
}

}  // namespace chronolink
