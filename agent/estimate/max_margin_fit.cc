// Exact 2-D max-vertical-margin separator. docs/estimator.md has the maths;
// this file follows it section by section.
//
// Numerics. Every input is int64 ns. Points are shifted to dx = x - x0 and
// dy = y - y_ref with checked int64 subtraction and must satisfy
// |dx|, |dy| < 2^62 (146 years), so any difference of two shifted
// coordinates fits in int64 (< 2^63) and any product of two such differences
// fits in __int128 (< 2^126), as does a sum or difference of two products
// (< 2^127). All combinatorial decisions (hull orientation tests, slope
// comparisons, the sign of the gap, which point is the deepest violator) are
// therefore exact integer arithmetic. Slopes are kept as exact rationals
// num/den. Only the final outputs (alpha, beta, margin, uncertainty) are
// divided, in long double, and rounded once to double.
#include "agent/estimate/max_margin_fit.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace chronolink {
namespace {

using i128 = __int128;

constexpr int64_t kCoordLimit = int64_t{1} << 62;

struct Pt {
  int64_t x;  // x - x0
  int64_t y;  // y - y_ref
};

inline bool PtLess(const Pt& a, const Pt& b) { return a.x < b.x || (a.x == b.x && a.y < b.y); }

// Orientation of o -> a -> b: > 0 left turn, < 0 right turn, 0 collinear.
inline i128 Cross(const Pt& o, const Pt& a, const Pt& b) {
  return static_cast<i128>(a.x - o.x) * (b.y - o.y) - static_cast<i128>(a.y - o.y) * (b.x - o.x);
}

// An exact slope num/den (den > 0) or one of the two infinities.
struct Slope {
  int64_t num = 0;
  int64_t den = 1;
  int inf = 0;  // -1: -infinity, +1: +infinity, 0: finite
};
constexpr Slope kNegInf{0, 1, -1};
constexpr Slope kPosInf{0, 1, +1};
constexpr Slope kZero{0, 1, 0};

inline int Compare(const Slope& a, const Slope& b) {
  if (a.inf != 0 || b.inf != 0) return (a.inf > b.inf) - (a.inf < b.inf);
  const i128 l = static_cast<i128>(a.num) * b.den;
  const i128 r = static_cast<i128>(b.num) * a.den;
  return (l > r) - (l < r);
}
inline const Slope& Min(const Slope& a, const Slope& b) { return Compare(b, a) < 0 ? b : a; }
inline const Slope& Max(const Slope& a, const Slope& b) { return Compare(b, a) > 0 ? b : a; }

// Slope of the segment a -> b, a.x < b.x.
inline Slope SegmentSlope(const Pt& a, const Pt& b) { return {b.y - a.y, b.x - a.x, 0}; }

// Value at dx = 0 of the line with finite slope s through p: p.y - s * p.x.
inline long double ValueAtX0(const Pt& p, const Slope& s) {
  const i128 n = static_cast<i128>(p.y) * s.den - static_cast<i128>(s.num) * p.x;
  return static_cast<long double>(n) / static_cast<long double>(s.den);
}

// Lower hull of `pts` (sorted by (x, y)); of several points with one x only
// the lowest can be a vertex. Collinear points are dropped, so edge slopes
// strictly increase.
void LowerHull(const std::vector<Pt>& pts, std::vector<Pt>* h) {
  h->clear();
  for (const Pt& p : pts) {
    if (!h->empty() && h->back().x == p.x) continue;  // back() has the smaller y
    while (h->size() >= 2 && Cross((*h)[h->size() - 2], h->back(), p) <= 0) h->pop_back();
    h->push_back(p);
  }
}

// Upper hull of `pts` (sorted by (x, y)); keeps the highest point of each x.
// Edge slopes strictly decrease.
void UpperHull(const std::vector<Pt>& pts, std::vector<Pt>* h) {
  h->clear();
  for (const Pt& p : pts) {
    if (!h->empty() && h->back().x == p.x) h->pop_back();  // p has the larger y
    while (h->size() >= 2 && Cross((*h)[h->size() - 2], h->back(), p) >= 0) h->pop_back();
    h->push_back(p);
  }
}

// The two chains and the breakpoints of
//   g(a) = G_U(a) - G_L(a),  G_U(a) = min_u (y_u - a x_u),  G_L(a) = max_l (y_l - a x_l).
// For a in [SU(i), SU(i+1)] the minimum of G_U is attained at u[i]; for a in
// [TL(j+1), TL(j)] the maximum of G_L at l[j]. A state (i, j) therefore owns
// the slope interval [Lo(i,j), Hi(i,j)] on which g is linear with
// derivative l[j].x - u[i].x.
struct Chains {
  std::vector<Pt> u;  // lower hull of the upper bounds, x ascending
  std::vector<Pt> l;  // upper hull of the lower bounds, x ascending

  size_t p() const { return u.size() - 1; }
  size_t q() const { return l.size() - 1; }
  // U edge slopes ascend: SU(0) = -inf, SU(k) = slope(u[k-1], u[k]), SU(p+1) = +inf.
  Slope SU(size_t k) const {
    if (k == 0) return kNegInf;
    if (k > p()) return kPosInf;
    return SegmentSlope(u[k - 1], u[k]);
  }
  // L edge slopes descend: TL(0) = +inf, TL(k) = slope(l[k-1], l[k]), TL(q+1) = -inf.
  Slope TL(size_t k) const {
    if (k == 0) return kPosInf;
    if (k > q()) return kNegInf;
    return SegmentSlope(l[k - 1], l[k]);
  }
  Slope Lo(size_t i, size_t j) const { return Max(SU(i), TL(j + 1)); }
  Slope Hi(size_t i, size_t j) const { return Min(SU(i + 1), TL(j)); }
  void StepRight(size_t* i, size_t* j) const {
    const Slope hi = Hi(*i, *j);
    if (*i < p() && Compare(SU(*i + 1), hi) == 0) ++*i;
    if (*j > 0 && Compare(TL(*j), hi) == 0) --*j;
  }
  void StepLeft(size_t* i, size_t* j) const {
    const Slope lo = Lo(*i, *j);
    if (*i > 0 && Compare(SU(*i), lo) == 0) --*i;
    if (*j < q() && Compare(TL(*j + 1), lo) == 0) ++*j;
  }
};

struct Optimum {
  bool bounded = false;  // false: g grows without limit (x-ranges do not interleave)
  Slope a;               // the chosen maximiser of g
  size_t i = 0, j = 0;   // supporting vertices u[i], l[j] at a
  i128 gap_num = 0;      // g(a) * a.den, exact
};

// Maximises g by walking the merged breakpoints from a = -inf: O(p + q).
// Ties (g flat at its top) take the slope nearest 0 in the flat interval.
Optimum Maximise(const Chains& c) {
  Optimum o;
  size_t i = 0, j = c.q();
  for (;;) {
    const int64_t d = c.l[j].x - c.u[i].x;  // g' on the interior of [Lo, Hi]
    if (d > 0) {
      if (c.Hi(i, j).inf != 0) return o;  // increasing to +inf
      c.StepRight(&i, &j);
      continue;
    }
    const Slope lo = c.Lo(i, j);
    if (d == 0) {
      const Slope hi = c.Hi(i, j);
      if (lo.inf == 0 && Compare(lo, kZero) > 0) {
        o.a = lo;
      } else if (hi.inf == 0 && Compare(hi, kZero) < 0) {
        o.a = hi;
      } else {
        o.a = kZero;
      }
    } else {
      if (lo.inf != 0) return o;  // decreasing from -inf
      o.a = lo;
    }
    break;
  }
  o.bounded = true;
  o.i = i;
  o.j = j;
  const Pt& u = c.u[i];
  const Pt& l = c.l[j];
  o.gap_num = static_cast<i128>(u.y - l.y) * o.a.den - static_cast<i128>(o.a.num) * (u.x - l.x);
  return o;
}

// One end of the range of separating slopes, with the pair of vertices the
// extreme separating line passes through.
struct SlopeEnd {
  Slope a;  // +-inf when unbounded
  size_t i = 0, j = 0;
};

// Largest slope a >= opt.a with g(a) >= 0 (requires g(opt.a) > 0).
SlopeEnd MaxSeparatingSlope(const Chains& c, const Optimum& opt) {
  size_t i = opt.i, j = opt.j;
  for (;;) {
    const Pt& u = c.u[i];
    const Pt& l = c.l[j];
    const Slope hi = c.Hi(i, j);
    if (u.x > l.x) {  // g decreasing here; its root is the line through u and l
      const Slope root{u.y - l.y, u.x - l.x, 0};
      if (hi.inf != 0 || Compare(root, hi) <= 0) return {root, i, j};
    }
    if (hi.inf != 0) return {kPosInf, i, j};
    c.StepRight(&i, &j);
  }
}

// Smallest slope a <= opt.a with g(a) >= 0 (requires g(opt.a) > 0).
SlopeEnd MinSeparatingSlope(const Chains& c, const Optimum& opt) {
  size_t i = opt.i, j = opt.j;
  for (;;) {
    const Pt& u = c.u[i];
    const Pt& l = c.l[j];
    const Slope lo = c.Lo(i, j);
    if (l.x > u.x) {  // g increasing here; its root is the line through u and l
      const Slope root{l.y - u.y, l.x - u.x, 0};
      if (lo.inf != 0 || Compare(root, lo) >= 0) return {root, i, j};
    }
    if (lo.inf != 0) return {kNegInf, i, j};
    c.StepLeft(&i, &j);
  }
}

constexpr long double kInf = std::numeric_limits<long double>::infinity();

// Exact range, at x0, of the values of all separating lines:
//   top = max over a in [lo, hi] of G_U(a)   (G_U concave)
//   bot = min over a in [lo, hi] of G_L(a)   (G_L convex)
// The unconstrained optimum of G_U is the lower hull of the upper bounds
// evaluated at x0 (attained at the slope of the hull edge over x0); when that
// slope is not a separating slope, the optimum is at the nearer end of the
// slope range, i.e. on an extreme separating line.
void SeparatingRangeAtX0(const Chains& c, const SlopeEnd& lo, const SlopeEnd& hi, long double* top,
                         long double* bot) {
  // --- top, from the upper bounds' lower hull u.
  {
    // argmax of G_U is [A1, A2]: the slope(s) at which the supporting vertex
    // crosses x0.
    size_t k = 0;
    while (k < c.u.size() && c.u[k].x < 0) ++k;
    Slope a1, a2;
    bool at_vertex = false;
    if (k == c.u.size()) {
      a1 = a2 = kPosInf;
    } else if (c.u[k].x > 0) {
      a1 = a2 = c.SU(k);
    } else {
      at_vertex = true;
      a1 = c.SU(k);
      a2 = c.SU(k + 1);
    }
    if (Compare(a2, lo.a) < 0) {
      *top = lo.a.inf != 0 ? kInf : ValueAtX0(c.u[lo.i], lo.a);
    } else if (Compare(a1, hi.a) > 0) {
      *top = hi.a.inf != 0 ? kInf : ValueAtX0(c.u[hi.i], hi.a);
    } else if (at_vertex) {
      *top = static_cast<long double>(c.u[k].y);
    } else if (a1.inf != 0) {
      *top = kInf;  // x0 outside the hull's x-range and the slope range unbounded that way
    } else {
      *top = ValueAtX0(c.u[k], a1);  // the hull edge over x0
    }
  }
  // --- bottom, from the lower bounds' upper hull l (slopes descend along x).
  {
    size_t k = 0;
    while (k < c.l.size() && c.l[k].x < 0) ++k;
    Slope a1, a2;  // argmin of G_L is [a1, a2]
    bool at_vertex = false;
    if (k == c.l.size()) {
      a1 = a2 = kNegInf;
    } else if (c.l[k].x > 0) {
      a1 = a2 = c.TL(k);
    } else {
      at_vertex = true;
      a1 = c.TL(k + 1);
      a2 = c.TL(k);
    }
    if (Compare(a2, lo.a) < 0) {
      *bot = lo.a.inf != 0 ? -kInf : ValueAtX0(c.l[lo.j], lo.a);
    } else if (Compare(a1, hi.a) > 0) {
      *bot = hi.a.inf != 0 ? -kInf : ValueAtX0(c.l[hi.j], hi.a);
    } else if (at_vertex) {
      *bot = static_cast<long double>(c.l[k].y);
    } else if (a1.inf != 0) {
      *bot = -kInf;
    } else {
      *bot = ValueAtX0(c.l[k], a1);
    }
  }
}

// Copies and shifts one side into (x, y) order. The caller's bounds are
// mostly in x order already (a late stamp displaces a point by a few places),
// so this is an insertion sort with a budget of element moves: O(n) for such
// input; past the budget it finishes with std::sort. Either way the result is
// the unique (x, y)-sorted sequence. False when a coordinate is out of range.
bool Prepare(std::span<const OffsetBound> in, int64_t x0, int64_t y_ref, std::vector<Pt>* out) {
  out->resize(in.size());
  Pt* const v = out->data();
  size_t moves_left = 8 * in.size() + 64;
  bool insertion = true;
  for (size_t k = 0; k < in.size(); ++k) {
    Pt p;
    if (__builtin_sub_overflow(in[k].x_ns, x0, &p.x) || __builtin_sub_overflow(in[k].y_ns, y_ref, &p.y))
      return false;
    if (p.x <= -kCoordLimit || p.x >= kCoordLimit || p.y <= -kCoordLimit || p.y >= kCoordLimit)
      return false;
    size_t pos = k;
    if (insertion) {
      while (pos > 0 && PtLess(p, v[pos - 1])) {
        v[pos] = v[pos - 1];
        --pos;
        if (--moves_left == 0) {
          insertion = false;
          break;
        }
      }
    }
    v[pos] = p;
  }
  if (!insertion) std::sort(out->begin(), out->end(), PtLess);
  return true;
}

// Residual numerators r = (y - a x) * a.den of one side, and their lower median.
i128 MedianResidual(const std::vector<Pt>& pts, const Slope& a, std::vector<i128>* scratch) {
  scratch->resize(pts.size());
  for (size_t k = 0; k < pts.size(); ++k)
    (*scratch)[k] = static_cast<i128>(pts[k].y) * a.den - static_cast<i128>(a.num) * pts[k].x;
  const size_t mid = (pts.size() - 1) / 2;
  std::nth_element(scratch->begin(), scratch->begin() + static_cast<std::ptrdiff_t>(mid), scratch->end());
  return (*scratch)[mid];
}

// Picks and removes the deepest binding violator. Candidates are the hull
// vertices that attain G_U(a*) or G_L(a*) (the supporting vertex and, at a
// breakpoint, the other end of the edge of slope a*). Depth of an upper
// candidate: how far its residual y - a* x lies below the median residual of
// the upper points; of a lower candidate: how far above the lower median.
// Ties: upper before lower, then smaller x.
void RemoveDeepestViolator(const Chains& c, const Optimum& opt, std::vector<Pt>* upper,
                           std::vector<Pt>* lower, std::vector<i128>* scratch) {
  const Slope& a = opt.a;
  auto resid = [&a](const Pt& p) {
    return static_cast<i128>(p.y) * a.den - static_cast<i128>(a.num) * p.x;
  };
  const i128 med_u = MedianResidual(*upper, a, scratch);
  const i128 med_l = MedianResidual(*lower, a, scratch);

  bool have = false, best_is_upper = true;
  Pt best{};
  i128 best_depth = 0;
  auto consider = [&](const Pt& p, bool is_upper) {
    const i128 depth = is_upper ? med_u - resid(p) : resid(p) - med_l;
    bool better = !have || depth > best_depth;
    if (have && depth == best_depth) better = is_upper != best_is_upper ? is_upper : p.x < best.x;
    if (better) {
      have = true;
      best = p;
      best_depth = depth;
      best_is_upper = is_upper;
    }
  };
  consider(c.u[opt.i], true);
  if (opt.i > 0 && Compare(c.SU(opt.i), a) == 0) consider(c.u[opt.i - 1], true);
  if (opt.i < c.p() && Compare(c.SU(opt.i + 1), a) == 0) consider(c.u[opt.i + 1], true);
  consider(c.l[opt.j], false);
  if (opt.j > 0 && Compare(c.TL(opt.j), a) == 0) consider(c.l[opt.j - 1], false);
  if (opt.j < c.q() && Compare(c.TL(opt.j + 1), a) == 0) consider(c.l[opt.j + 1], false);

  std::vector<Pt>* side = best_is_upper ? upper : lower;
  auto it = std::lower_bound(side->begin(), side->end(), best, PtLess);
  side->erase(it);  // a hull vertex is always one of the side's points
}

// --- §4b: the line on the floors' means.
// For a slope a, F_U(a) is the mean of the k smallest residuals y - a x of
// the upper bounds and F_L(a) the mean of the k largest of the lower. F_U is
// concave (a minimum over k-subsets of linear functions), F_L convex, so
// f = F_U - F_L is concave, with supergradient (sum of x over those lower
// bounds - sum of x over those upper bounds) / k at a. Bisection on its sign
// finds the maximiser; the line runs midway between F_U and F_L. In double
// (WithinDoubleRange). k = 1 is the hard margin's line.
struct FloorMeans {
  double upper = 0;      // F_U(a)
  double lower = 0;      // F_L(a)
  double rise_sign = 0;  // the sign of f's supergradient at a
};

using Ranked = std::pair<double, int64_t>;  // (residual, oriented so that the deepest is smallest; x)

double DeepestMean(const std::vector<Pt>& pts, size_t k, double a, double sign, std::vector<Ranked>* scratch,
                   double* sum_x) {
  scratch->resize(pts.size());
  for (size_t n = 0; n < pts.size(); ++n) {
    const double r = static_cast<double>(pts[n].y) - a * static_cast<double>(pts[n].x);
    (*scratch)[n] = {sign * r, pts[n].x};
  }
  std::nth_element(scratch->begin(), scratch->begin() + static_cast<std::ptrdiff_t>(k - 1), scratch->end());
  std::sort(scratch->begin(), scratch->begin() + static_cast<std::ptrdiff_t>(k));  // a fixed order of summation
  double sum = 0;
  *sum_x = 0;
  for (size_t n = 0; n < k; ++n) {
    sum += (*scratch)[n].first;
    *sum_x += static_cast<double>((*scratch)[n].second);
  }
  return sign * sum / static_cast<double>(k);
}

FloorMeans FloorMeansAt(const std::vector<Pt>& up, const std::vector<Pt>& lo, size_t k, double a,
                        std::vector<Ranked>* scratch) {
  FloorMeans m;
  double x_upper = 0, x_lower = 0;
  m.upper = DeepestMean(up, k, a, +1.0, scratch, &x_upper);
  m.lower = DeepestMean(lo, k, a, -1.0, scratch, &x_lower);
  m.rise_sign = (x_lower > x_upper) - (x_lower < x_upper);
  return m;
}

// x within 2^52 ns (52 days) of x0 and y within 2^40 ns (18 min) of y_ref
// (the smallest upper bound) are exact in double; with slopes within
// 4e-3 (FitFloorMeans' reach) a residual y - a x then rounds by under
// 0.005 ns, and by about 1e-9 ns in a real window (|a x| ~ 1e6 ns).
bool WithinDoubleRange(const std::vector<Pt>& pts) {
  constexpr int64_t kX = int64_t{1} << 52;
  constexpr int64_t kY = int64_t{1} << 40;
  return std::all_of(pts.begin(), pts.end(),
                     [](const Pt& p) { return p.x > -kX && p.x < kX && p.y > -kY && p.y < kY; });
}

// Keeps, of one side, the points that can be among its k deepest at some
// slope in [left, right]. A residual is linear in the slope, so over the
// bracket it lies between its values at the two ends; at every slope there
// the k-th deepest is no deeper than the k-th smallest of the points' worse
// ends, so a point whose better end lies past that is never among the k
// (kRoundingNs covers the double rounding of a residual: WithinDoubleRange).
// Exact: the k deepest at any slope in the bracket are the same points, with
// the same residuals, in or out of the pruned set.
void KeepFloorCandidates(std::vector<Pt>* pts, size_t k, double left, double right, double sign,
                         std::vector<double>* worse) {
  constexpr double kRoundingNs = 0.01;
  auto ends = [&](const Pt& p) {
    const double y = static_cast<double>(p.y), x = static_cast<double>(p.x);
    const double a = sign * (y - left * x), b = sign * (y - right * x);
    return std::pair(std::min(a, b), std::max(a, b));
  };
  worse->resize(pts->size());
  for (size_t n = 0; n < pts->size(); ++n) (*worse)[n] = ends((*pts)[n]).second;
  std::nth_element(worse->begin(), worse->begin() + static_cast<std::ptrdiff_t>(k - 1), worse->end());
  const double bound = (*worse)[k - 1] + kRoundingNs;
  std::erase_if(*pts, [&](const Pt& p) { return ends(p).first > bound; });
}

std::atomic<int64_t> floor_candidate_mismatches{0};

struct FloorScratch {
  std::vector<Ranked> ranked;
  std::vector<Pt> up, lo;  // the candidates
  std::vector<double> worse;
};

// Bisects on the sign of f's supergradient within [left, right] (which
// brackets the maximiser) down to `resolution`; with `prune`, on the
// candidates KeepFloorCandidates leaves, narrowed again each 8 halvings.
double BisectFloorSlope(const std::vector<Pt>& up, const std::vector<Pt>& lo, size_t k, double left, double right,
                        double resolution, bool prune, FloorScratch* s) {
  s->up = up;
  s->lo = lo;
  for (int step = 0; right - left > resolution; ++step) {
    if (prune && step % 8 == 0) {
      KeepFloorCandidates(&s->up, k, left, right, +1.0, &s->worse);
      KeepFloorCandidates(&s->lo, k, left, right, -1.0, &s->worse);
    }
    const double mid = left + (right - left) / 2;
    const double sign = FloorMeansAt(s->up, s->lo, k, mid, &s->ranked).rise_sign;
    if (sign > 0) {
      left = mid;
    } else if (sign < 0) {
      right = mid;
    } else {
      left = right = mid;  // on the flat top: every slope here keeps the same gap
    }
  }
  return left + (right - left) / 2;
}

// The floors' line: its slope and its value at x0 (relative to y_ref).
// False, and the caller keeps the hard line, when the maximiser is not
// bracketed within kFloorSlopeReach of the hard line's slope.
bool FitFloorMeans(const std::vector<Pt>& up, const std::vector<Pt>& lo, size_t k, double hard_slope,
                   bool prune, FloorScratch* scratch, double* slope, double* value) {
  constexpr double kFirstReach = 1e-6;       // 1 ppm either side of the hard line's slope
  constexpr double kFloorSlopeReach = 4e-3;  // twenty times two clocks' largest drift apart
  constexpr double kValueResolutionNs = 1e-7;
  if (!WithinDoubleRange(up) || !WithinDoubleRange(lo)) return false;
  // Bisect until the slope's doubt moves no point's residual, nor the line
  // at x0, by more than kValueResolutionNs.
  int64_t far = 1;
  for (const auto* side : {&up, &lo})
    for (const Pt& p : *side) far = std::max(far, p.x < 0 ? -p.x : p.x);
  const double resolution = kValueResolutionNs / static_cast<double>(far);
  double reach = kFirstReach;
  double left = hard_slope - reach, right = hard_slope + reach;
  for (;;) {
    const bool rises = FloorMeansAt(up, lo, k, left, &scratch->ranked).rise_sign >= 0;
    const bool falls = FloorMeansAt(up, lo, k, right, &scratch->ranked).rise_sign <= 0;
    if (rises && falls) break;
    reach *= 4;
    if (reach > kFloorSlopeReach) return false;
    if (!rises) left = hard_slope - reach;
    if (!falls) right = hard_slope + reach;
  }
  *slope = BisectFloorSlope(up, lo, k, left, right, resolution, prune, scratch);
  const FloorMeans m = FloorMeansAt(up, lo, k, *slope, &scratch->ranked);
  if (prune) {
    // The candidates' answer must be the whole set's, to the bit; one more
    // pass over every bound checks it, and the simple path answers if not.
    const FloorMeans c = FloorMeansAt(scratch->up, scratch->lo, k, *slope, &scratch->ranked);
    if (c.upper != m.upper || c.lower != m.lower) {
      floor_candidate_mismatches.fetch_add(1, std::memory_order_relaxed);
      return FitFloorMeans(up, lo, k, hard_slope, false, scratch, slope, value);
    }
  }
  *value = (m.upper + m.lower) / 2;
  return true;
}

size_t FloorPoints(const MaxMarginOptions& o, size_t n_upper, size_t n_lower) {
  const size_t by_count = std::min(n_upper, n_lower) / kBoundsPerFloorPoint;
  return std::max<size_t>(1, std::min(static_cast<size_t>(std::max(1, o.floor_points)), by_count));
}

// The line at the prior's slope, moved toward the window's own by its
// weight: its value rests on the floors' means there (the deepest bound of
// each side where k is 1), as the floors' line's does at its own slope. Not
// taken outside the floors' line's double range, nor where the prior
// strays from the window's own slope by more than kMaxDriftPriorStray.
void TakeDriftPrior(const std::vector<Pt>& up, const std::vector<Pt>& lo, size_t k, const DriftPrior& prior,
                    int64_t y_ref, std::vector<Ranked>* scratch, LineFit* fit) {
  const double own = fit->own_alpha;
  if (!std::isfinite(prior.slope) || !std::isfinite(prior.own_weight)) return;
  if (std::abs(prior.slope - own) > kMaxDriftPriorStray) return;
  if (!WithinDoubleRange(up) || !WithinDoubleRange(lo)) return;
  const double slope = prior.slope + std::clamp(prior.own_weight, 0.0, 1.0) * (own - prior.slope);
  const FloorMeans m = FloorMeansAt(up, lo, k, slope, scratch);
  fit->alpha = slope;
  fit->beta_ns =
      static_cast<double>(static_cast<long double>(y_ref) + static_cast<long double>((m.upper + m.lower) / 2));
  fit->drift_prior_taken = true;
}

// Per-thread buffers, reused across calls: a fresh allocation per window costs
// more than the whole fit (page faults on every call above the allocator's
// mmap threshold), and windows on one thread have similar sizes.
struct Workspace {
  std::vector<Pt> up, lo;
  Chains c;
  std::vector<i128> scratch;
  FloorScratch floors;
};

}  // namespace

int64_t FloorCandidateMismatches() { return floor_candidate_mismatches.load(std::memory_order_relaxed); }

LineFit FitMaxMarginLine(std::span<const OffsetBound> upper, std::span<const OffsetBound> lower, int64_t x0_ns,
                         const MaxMarginOptions& options, std::optional<DriftPrior> prior) {
  LineFit fit;
  fit.x0_ns = x0_ns;
  fit.upper_points = static_cast<int>(upper.size());
  fit.lower_points = static_cast<int>(lower.size());
  if (upper.size() < 2 || lower.size() < 2) return fit;

  // y_ref: any int64 near the data does for the exact hard line. The floors'
  // line is in double, so the reference is one the input's order cannot
  // change: the smallest upper bound.
  const int64_t y_ref =
      std::min_element(upper.begin(), upper.end(), [](const auto& a, const auto& b) { return a.y_ns < b.y_ns; })->y_ns;
  thread_local Workspace ws;
  std::vector<Pt>& up = ws.up;
  std::vector<Pt>& lo = ws.lo;
  if (!Prepare(upper, x0_ns, y_ref, &up) || !Prepare(lower, x0_ns, y_ref, &lo)) return fit;

  const size_t total = up.size() + lo.size();
  int budget = std::max(0, options.max_violators);
  const double frac_cap = std::floor(std::max(0.0, options.max_violator_fraction) * static_cast<double>(total));
  if (frac_cap < budget) budget = static_cast<int>(frac_cap);

  Chains& c = ws.c;
  std::vector<i128>& scratch = ws.scratch;
  for (;;) {
    fit.upper_points = static_cast<int>(up.size());
    fit.lower_points = static_cast<int>(lo.size());
    if (up.size() < 2 || lo.size() < 2) return fit;
    LowerHull(up, &c.u);
    UpperHull(lo, &c.l);
    const Optimum opt = Maximise(c);
    if (!opt.bounded) return fit;  // the data do not pin the slope (x-ranges do not interleave)

    const Slope& a = opt.a;
    const Pt& u = c.u[opt.i];
    const Pt& l = c.l[opt.j];
    const long double den = static_cast<long double>(a.den);
    const i128 mid_num =
        static_cast<i128>(u.y + l.y) * a.den - static_cast<i128>(a.num) * (u.x + l.x);
    fit.alpha = static_cast<double>(static_cast<long double>(a.num) / den);
    fit.beta_ns = static_cast<double>(static_cast<long double>(y_ref) +
                                      static_cast<long double>(mid_num) / (2.0L * den));
    fit.margin_ns = static_cast<double>(static_cast<long double>(opt.gap_num) / (2.0L * den));

    if (opt.gap_num > 0) {
      const SlopeEnd smin = MinSeparatingSlope(c, opt);
      const SlopeEnd smax = MaxSeparatingSlope(c, opt);
      long double top = 0, bot = 0;
      SeparatingRangeAtX0(c, smin, smax, &top, &bot);
      fit.uncertainty_ns = static_cast<double>((top - bot) / 2.0L);
      fit.ok = true;
      size_t k = FloorPoints(options, up.size(), lo.size());
      double slope = 0, value = 0;
      if (k > 1 && FitFloorMeans(up, lo, k, fit.alpha, options.prune_floor_candidates, &ws.floors, &slope, &value)) {
        const double floors_beta =
            static_cast<double>(static_cast<long double>(y_ref) + static_cast<long double>(value));
        fit.floor_shift_ns = floors_beta - fit.beta_ns;
        if (std::abs(fit.floor_shift_ns) <= options.max_floor_shift_in_bands * fit.uncertainty_ns) {
          fit.alpha = slope;
          fit.beta_ns = floors_beta;
          fit.floor_points = static_cast<int>(k);
        } else {
          fit.floors_refused = true;
          k = 1;  // a drift prior's line, too, rests on the deepest bound of each side
        }
      }
      fit.own_alpha = fit.alpha;
      if (prior) TakeDriftPrior(up, lo, k, *prior, y_ref, &ws.floors.ranked, &fit);
      return fit;
    }
    if (fit.violators_removed >= budget) return fit;  // inseparable within the budget
    RemoveDeepestViolator(c, opt, &up, &lo, &scratch);
    ++fit.violators_removed;
  }
}

}  // namespace chronolink
