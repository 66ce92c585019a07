// The global solve: see global_solver.h and docs/solver.md for the maths.
#include "agent/solve/global_solver.h"

// Eigen is header-only; its headers include each other by relative paths, so
// the eigen3/ prefix needs no extra include directory.
#include <eigen3/Eigen/Dense>
#include <eigen3/Eigen/Sparse>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <random>
#include <utility>

#include "agent/solve/edge_measurements.h"
#include "agent/solve/link_covariance.h"
#include "agent/solve/node_index.h"
#include "agent/solve/prober_instants.h"

namespace chronolink {

const NodeSolution* SolveResult::Find(uint32_t node) const {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), node,
                             [](const NodeSolution& s, uint32_t id) { return s.node < id; });
  return it != nodes.end() && it->node == node ? &*it : nullptr;
}

namespace {

double RobustFactor(RobustLoss loss, double k, double z) {
  z = std::fabs(z);
  switch (loss) {
    case RobustLoss::kNone: return 1.0;
    case RobustLoss::kHuber: return z <= k ? 1.0 : k / z;
    case RobustLoss::kCauchy: {
      const double q = z / k;
      return 1.0 / (1.0 + q * q);
    }
    case RobustLoss::kTukey: {
      if (z >= k) return 0.0;
      const double q = z / k;
      return (1.0 - q * q) * (1.0 - q * q);
    }
  }
  return 1.0;
}

// Conjugate gradient's relative tolerance for the stochastic variance's
// probes: their own sampling error is several %; against 1e-6, 1e-2 moved
// the mean estimate by < 0.1 % (the worst node's by 1 %) at a third of the
// iterations.
constexpr double kProbeTolerance = 1e-2;

// Weighted least squares on one connected component. Unknowns are the
// component's nodes except the anchor (fixed to 0): the reduced weighted
// Laplacian is then symmetric positive definite.
class ComponentSystem {
 public:
  ComponentSystem(const std::vector<int>& comp_nodes, int anchor_local,
                  const std::vector<const EdgeMeasurement*>& meas, const std::vector<int>& local_of,
                  const SolverOptions& opt)
      : n_(static_cast<int>(comp_nodes.size())), anchor_(anchor_local), meas_(meas),
        local_of_(local_of), opt_(opt) {
    BuildPattern();
  }

  int Var(int local) const { return local < anchor_ ? local : (local == anchor_ ? -1 : local - 1); }
  int n() const { return n_; }

  // Solves for x (size n, x[anchor] = 0) given values and weights per
  // measurement. With `warm` (a solution of a nearby system: the previous
  // re-weighting pass) conjugate gradient starts from it, so a pass that
  // moves little costs few iterations.
  bool SolveFor(const std::vector<double>& y, const std::vector<double>& w, std::vector<double>& x,
                const std::vector<double>* warm = nullptr) {
    const int m = n_ - 1;
    if (m <= 0) {
      x.assign(n_, 0.0);
      return true;
    }
    Eigen::VectorXd rhs = Eigen::VectorXd::Zero(m);
    FillValues(y, w, &rhs);
    Eigen::VectorXd sol;
    bool ok = true;
    if (m <= opt_.direct_solver_max_nodes) {
      if (!ldlt_analyzed_) {
        ldlt_.analyzePattern(L_);
        ldlt_analyzed_ = true;
      }
      ldlt_.factorize(L_);
      ok = ldlt_.info() == Eigen::Success;
      if (ok) sol = ldlt_.solve(rhs);
    } else {
      // Start from the warm solution, else from the measurements propagated
      // along a BFS tree from the anchor, so CG only corrects the loop
      // disagreement.
      const Eigen::VectorXd guess = warm != nullptr ? Reduced(*warm) : TreeGuess(y, w);
      Eigen::ConjugateGradient<Eigen::SparseMatrix<double>, Eigen::Lower | Eigen::Upper,
                               Eigen::DiagonalPreconditioner<double>> cg;
      cg.setTolerance(opt_.cg_tolerance);
      cg.setMaxIterations(std::max(1000, 4 * m));
      cg.compute(L_);
      sol = cg.solveWithGuess(rhs, guess);
      ok = cg.info() == Eigen::Success || cg.error() < 1e-9;
    }
    if (!ok) return false;
    x.assign(n_, 0.0);
    for (int i = 0; i < n_; ++i) {
      const int v = Var(i);
      x[i] = v >= 0 ? sol[v] : 0.0;
    }
    return true;
  }

  // Dense covariance (n×n, anchor row/column zero) of the solution for
  // weights w: the inverse of the reduced Laplacian.
  Eigen::MatrixXd Covariance(const std::vector<double>& w) const {
    Eigen::MatrixXd C = Eigen::MatrixXd::Zero(n_, n_);
    const int m = n_ - 1;
    if (m <= 0) return C;
    Eigen::MatrixXd L = Eigen::MatrixXd::Zero(m, m);
    for (size_t e = 0; e < meas_.size(); ++e) {
      const int va = Var(local_of_[meas_[e]->from]), vb = Var(local_of_[meas_[e]->to]);
      if (va >= 0) L(va, va) += w[e];
      if (vb >= 0) L(vb, vb) += w[e];
      if (va >= 0 && vb >= 0) { L(va, vb) -= w[e]; L(vb, va) -= w[e]; }
    }
    Eigen::MatrixXd inv = L.ldlt().solve(Eigen::MatrixXd::Identity(m, m));
    for (int i = 0; i < n_; ++i)
      for (int j = 0; j < n_; ++j)
        if (Var(i) >= 0 && Var(j) >= 0) C(i, j) = inv(Var(i), Var(j));
    return C;
  }

  // The same diagonal, estimated for large components (Hutchinson): with L⁺
  // the pseudo-inverse of the full Laplacian, the variance against the mean
  // is L⁺ᵢᵢ and against the anchor L⁺ᵢᵢ + L⁺ₐₐ − 2L⁺ᵢₐ. L⁺z for z ⊥ 1 is the
  // reduced system's solution (anchor 0) with its mean removed. diag(L⁺) is
  // the mean of z ⊙ L⁺z over Rademacher vectors z (projected on 1⊥, which
  // leaves L⁺z unchanged); its error is set by the off-diagonal of L⁺, which
  // is small in a well-connected graph, whereas the reduced inverse's own
  // off-diagonal (every node's shared path to the anchor) would swamp it.
  // The column of the anchor is solved exactly. Deterministic (fixed seed).
  std::vector<double> StochasticVariance(const std::vector<double>& w, bool mean_ref, int probes) {
    using Block = Eigen::MatrixXd;
    const int m = n_ - 1;
    std::vector<double> var(n_, 0.0);
    if (m <= 0) return var;
    probes = std::max(1, probes);
    // The system's values are rewritten with the covariance's weights (the
    // last use of the system in a solve).
    Eigen::VectorXd rhs = Eigen::VectorXd::Zero(m);
    const std::vector<double> zero(meas_.size(), 0.0);
    FillValues(zero, w, &rhs);
    const double tol = kProbeTolerance;

    // The probes (and, last, the anchor's column for a named reference), as
    // the columns of one block: L⁺V for V ⊥ 1 by the reduced system.
    const int cols = probes + (mean_ref ? 0 : 1);
    std::mt19937_64 rng(0x5eed);
    Block Z(n_, probes);
    for (int i = 0; i < n_; ++i)
      for (int k = 0; k < probes; ++k) Z(i, k) = (rng() & 1) ? 1.0 : -1.0;
    Block B(m, cols);
    const Eigen::RowVectorXd zmean = Z.colwise().mean();
    for (int i = 0; i < n_; ++i) {
      const int v = Var(i);
      if (v < 0) continue;
      B.row(v).head(probes) = Z.row(i) - zmean;
      if (!mean_ref) B(v, probes) = -1.0 / n_;  // e_anchor − 1/n, less the anchor's row
    }
    const Block S = SolveColumns(B, tol);
    Block Y(n_, cols);
    for (int i = 0; i < n_; ++i) Y.row(i) = Var(i) >= 0 ? Block(S.row(Var(i))) : Block::Zero(1, cols);
    Y.rowwise() -= Eigen::RowVectorXd(Y.colwise().mean());

    // A control variate: the first terms of L⁺ ≈ Σₖ D⁻¹(WD⁻¹)ᵏ (D the
    // weighted degrees, W the weights between nodes), M = D⁻¹ + D⁻¹WD⁻¹ +
    // D⁻¹WD⁻¹WD⁻¹, whose diagonal is known; the probes then estimate only
    // diag(L⁺ − M), whose error comes from the off-diagonal of L⁺ − M:
    // without the neighbours' and second neighbours' terms, several times
    // smaller than that of L⁺ (unbiased whatever M is).
    std::vector<double> deg(n_, 0.0);
    for (size_t e = 0; e < meas_.size(); ++e) {
      deg[local_of_[meas_[e]->from]] += w[e];
      deg[local_of_[meas_[e]->to]] += w[e];
    }
    Eigen::VectorXd dinv(n_);
    for (int i = 0; i < n_; ++i) dinv[i] = deg[i] > 0 ? 1.0 / deg[i] : 0.0;
    // W D⁻¹ v, column by column over the measurements' local indices.
    std::vector<int> ia(meas_.size()), ib(meas_.size());
    std::vector<double> ca(meas_.size()), cb(meas_.size());
    for (size_t e = 0; e < meas_.size(); ++e) {
      ia[e] = local_of_[meas_[e]->from];
      ib[e] = local_of_[meas_[e]->to];
      ca[e] = w[e] * dinv[ib[e]];  // into a, from b
      cb[e] = w[e] * dinv[ia[e]];
    }
    auto walk = [&](const Block& v) {
      Block out = Block::Zero(n_, v.cols());
      for (int c = 0; c < v.cols(); ++c) {
        const double* in = v.col(c).data();
        double* o = out.col(c).data();
        for (size_t e = 0; e < ia.size(); ++e) {
          o[ia[e]] += ca[e] * in[ib[e]];
          o[ib[e]] += cb[e] * in[ia[e]];
        }
      }
      return out;
    };
    const Block W1 = walk(Z);
    const Block MZ = dinv.asDiagonal() * (Z + W1 + walk(W1));
    Eigen::VectorXd diag = Z.cwiseProduct(Y.leftCols(probes) - MZ).rowwise().sum() / probes;
    // diag(M)ᵢ = 1/dᵢ + Σⱼ wᵢⱼ² / (dᵢ² dⱼ), a pair's measurements summed.
    std::vector<std::pair<uint64_t, double>> pw(meas_.size());
    for (size_t e = 0; e < meas_.size(); ++e) {
      const auto lo = static_cast<uint64_t>(std::min(ia[e], ib[e]));
      const auto hi = static_cast<uint64_t>(std::max(ia[e], ib[e]));
      pw[e] = {lo << 32 | hi, w[e]};
    }
    std::sort(pw.begin(), pw.end());
    diag += dinv;
    for (size_t i = 0; i < pw.size();) {
      double wij = 0;
      size_t j = i;
      for (; j < pw.size() && pw[j].first == pw[i].first; ++j) wij += pw[j].second;
      const auto a = static_cast<int>(pw[i].first >> 32), b = static_cast<int>(pw[i].first & 0xffffffffu);
      diag[a] += wij * wij * dinv[a] * dinv[a] * dinv[b];
      diag[b] += wij * wij * dinv[b] * dinv[b] * dinv[a];
      i = j;
    }
    // Floors no estimate may go below: L⁺ᵢᵢ ≥ (1 − 1/n)²/dᵢ, and the
    // resistance between two nodes is at least that of the cut around either.
    const double shrink = (1 - 1.0 / n_) * (1 - 1.0 / n_);
    for (int i = 0; i < n_; ++i) diag[i] = std::max(diag[i], shrink * dinv[i]);
    if (mean_ref) {
      for (int i = 0; i < n_; ++i) var[i] = diag[i];
    } else {
      const auto col = Y.col(probes);  // L⁺ e_anchor
      for (int i = 0; i < n_; ++i)
        var[i] = i == anchor_ ? 0.0
                              : std::max(diag[i] + col[anchor_] - 2.0 * col[i], std::max(dinv[i], dinv[anchor_]));
    }
    return var;
  }

  // L_red X = B, column by column: conjugate gradient with the diagonal
  // preconditioner from zero, to a relative residual of tol. (One product of
  // the sparse matrix with the whole block per iteration was slower here
  // than Eigen's solver column by column.)
  template <typename Block>
  Block SolveColumns(const Block& B, double tol) const {
    Eigen::ConjugateGradient<Eigen::SparseMatrix<double>, Eigen::Lower | Eigen::Upper,
                             Eigen::DiagonalPreconditioner<double>> cg;
    cg.setTolerance(tol);
    cg.setMaxIterations(std::max(1000, 4 * static_cast<int>(B.rows())));
    cg.compute(L_);
    Block X(B.rows(), B.cols());
    for (int c = 0; c < B.cols(); ++c) {
      const Eigen::VectorXd b = B.col(c);
      X.col(c) = cg.solve(b);
    }
    return X;
  }

  // Resistance (variance) of the least-resistance path from the anchor to
  // every node, parallel measurements of a pair combined: by Rayleigh's
  // monotonicity an upper bound on the exact variance against the anchor.
  std::vector<double> PathVariance(const std::vector<double>& w) const {
    std::vector<std::map<int, double>> adj(n_);
    for (size_t e = 0; e < meas_.size(); ++e) {
      const int a = local_of_[meas_[e]->from], b = local_of_[meas_[e]->to];
      adj[a][b] += w[e];
      adj[b][a] += w[e];
    }
    std::vector<double> dist(n_, std::numeric_limits<double>::infinity());
    using Item = std::pair<double, int>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
    dist[anchor_] = 0;
    pq.emplace(0.0, anchor_);
    while (!pq.empty()) {
      auto [d, i] = pq.top();
      pq.pop();
      if (d > dist[i]) continue;
      for (auto [j, wij] : adj[i]) {
        const double nd = d + 1.0 / wij;
        if (nd < dist[j]) { dist[j] = nd; pq.emplace(nd, j); }
      }
    }
    return dist;
  }

 private:
  // The reduced Laplacian's sparsity, built once per component; each
  // measurement's four entries are remembered as offsets into its values, so
  // a re-weighting pass rewrites values without building the matrix again.
  void BuildPattern() {
    const int m = n_ - 1;
    if (m <= 0) return;
    std::vector<Eigen::Triplet<double>> trip;
    trip.reserve(meas_.size() * 4);
    for (const EdgeMeasurement* e : meas_) {
      const int va = Var(local_of_[e->from]), vb = Var(local_of_[e->to]);
      if (va >= 0) trip.emplace_back(va, va, 1.0);
      if (vb >= 0) trip.emplace_back(vb, vb, 1.0);
      if (va >= 0 && vb >= 0) { trip.emplace_back(va, vb, 1.0); trip.emplace_back(vb, va, 1.0); }
    }
    L_.resize(m, m);
    L_.setFromTriplets(trip.begin(), trip.end());
    L_.makeCompressed();
    slots_.resize(meas_.size());
    auto offset = [&](int r, int c) { return static_cast<int>(&L_.coeffRef(r, c) - L_.valuePtr()); };
    for (size_t k = 0; k < meas_.size(); ++k) {
      const int va = Var(local_of_[meas_[k]->from]), vb = Var(local_of_[meas_[k]->to]);
      slots_[k] = {va >= 0 ? offset(va, va) : -1, vb >= 0 ? offset(vb, vb) : -1,
                   va >= 0 && vb >= 0 ? offset(va, vb) : -1, va >= 0 && vb >= 0 ? offset(vb, va) : -1};
    }
  }

  // The weighted Laplacian's values and the right-hand side for (y, w).
  void FillValues(const std::vector<double>& y, const std::vector<double>& w, Eigen::VectorXd* rhs) {
    double* v = L_.valuePtr();
    std::fill(v, v + L_.nonZeros(), 0.0);
    for (size_t e = 0; e < meas_.size(); ++e) {
      const Slots& s = slots_[e];
      const double we = w[e];
      if (s.aa >= 0) { v[s.aa] += we; (*rhs)[Var(local_of_[meas_[e]->from])] -= we * y[e]; }
      if (s.bb >= 0) { v[s.bb] += we; (*rhs)[Var(local_of_[meas_[e]->to])] += we * y[e]; }
      if (s.ab >= 0) { v[s.ab] -= we; v[s.ba] -= we; }
    }
  }

  Eigen::VectorXd Reduced(const std::vector<double>& x) const {
    Eigen::VectorXd g(n_ - 1);
    for (int i = 0; i < n_; ++i)
      if (Var(i) >= 0) g[Var(i)] = x[i];
    return g;
  }

  Eigen::VectorXd TreeGuess(const std::vector<double>& y, const std::vector<double>& w) const {
    std::vector<std::vector<std::pair<int, double>>> adj(n_);  // (neighbour, x[nb] − x[self])
    for (size_t e = 0; e < meas_.size(); ++e) {
      if (w[e] <= 0) continue;
      const int a = local_of_[meas_[e]->from], b = local_of_[meas_[e]->to];
      adj[a].emplace_back(b, y[e]);
      adj[b].emplace_back(a, -y[e]);
    }
    std::vector<double> x(n_, 0.0);
    std::vector<char> seen(n_, 0);
    std::queue<int> q;
    q.push(anchor_);
    seen[anchor_] = 1;
    while (!q.empty()) {
      const int i = q.front();
      q.pop();
      for (auto [j, d] : adj[i])
        if (!seen[j]) { seen[j] = 1; x[j] = x[i] + d; q.push(j); }
    }
    return Reduced(x);
  }

  struct Slots {
    int aa, bb, ab, ba;  // value offsets of (a,a), (b,b), (a,b), (b,a); -1 for the anchor's
  };

  int n_;
  int anchor_;
  const std::vector<const EdgeMeasurement*>& meas_;
  const std::vector<int>& local_of_;
  const SolverOptions& opt_;
  Eigen::SparseMatrix<double> L_;
  std::vector<Slots> slots_;
  Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> ldlt_;
  bool ldlt_analyzed_ = false;
};

// The weights the uncertainty is computed with. The offsets weight every
// directed measurement independently; but the two directions of one link
// are correlated (link_covariance.h), so the weighted mean of a link's
// measurements (what the solve takes of them) has a larger variance than
// 1/Σwᵢ: each direction's weight is scaled by the ratio, so that the link
// counts once in the covariance as one measurement of that variance.
// The measurements' indices by link: (lower, higher) node as one sorted
// key, so that a link's measurements are adjacent.
std::vector<std::pair<uint64_t, uint32_t>> MeasurementsByLink(const std::vector<const EdgeMeasurement*>& meas) {
  std::vector<std::pair<uint64_t, uint32_t>> order(meas.size());
  for (size_t e = 0; e < meas.size(); ++e) {
    const auto lo = static_cast<uint64_t>(std::min(meas[e]->from, meas[e]->to));
    const auto hi = static_cast<uint64_t>(std::max(meas[e]->from, meas[e]->to));
    order[e] = {lo << 32 | hi, static_cast<uint32_t>(e)};
  }
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<double> CovarianceWeights(const std::vector<const EdgeMeasurement*>& meas, const std::vector<double>& w,
                                      double rho) {
  std::vector<double> out = w;
  const auto order = MeasurementsByLink(meas);
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    LinkCovariance link;
    for (; j < order.size() && order[j].first == order[i].first; ++j) {
      link.Add(w[order[j].second], meas[order[j].second]->shared_ns);
    }
    const double denom = link.sum_w() + link.Cross(rho);
    const double f = denom > 0 ? link.sum_w() / denom : 1.0;
    for (size_t k = i; k < j; ++k) out[order[k].second] *= f;
    i = j;
  }
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[mid];
}

}  // namespace

namespace {
// The first pass only finds each prober's offset to carry its estimates'
// x0 to the reference clock: an offset wrong by 1 µs moves an estimate by
// alpha × 1 µs (0.1 ns at 100 ppm). It skips the drifts and the
// uncertainty and stops conjugate gradient at a looser tolerance.
enum class SolvePass { kProberOffsets, kFinal };
constexpr double kProberPassTolerance = 1e-9;
constexpr int kProberPassRobustIterations = 3;  // enough to set gross outliers aside

SolveResult SolveOnce(std::span<const EdgeEstimate> edges, int64_t T, const SolverOptions& opt,
                      const SolveResult* warm, SolvePass pass);
}  // namespace

SolveResult Solve(std::span<const EdgeEstimate> edges, int64_t T, const SolverOptions& opt,
                  const SolveResult* previous) {
  // T is an instant of the reference clock; an estimate's x0 is on its
  // prober's clock. Evaluating at T directly would be off by alpha times the
  // prober's offset (45 ppm x 3.7 ms = 166 ns). So solve once, then move each
  // estimate onto the reference clock with its prober's solved offset and
  // solve again; more than once where alpha^2 x the offsets (0.5 ns at 100
  // ppm and 50 ms) is not small: 720 ns where a fit clock anchored in a
  // daemon's start-up slew ran 3 000 ppm off and 80 ms away
  // (prober_instants.h).
  SolveResult probers = SolveOnce(edges, T, opt, previous, SolvePass::kProberOffsets);
  std::vector<EdgeEstimate> shifted = ShiftedToProbers(edges, probers);
  for (int pass = ProberPasses(edges, probers); pass > 1; --pass) {
    probers = SolveOnce(shifted, T, opt, &probers, SolvePass::kProberOffsets);
    shifted = ShiftedToProbers(edges, probers);
  }
  return SolveOnce(shifted, T, opt, &probers, SolvePass::kFinal);
}

namespace {

// A nearby solution's offsets (carried to T on its drifts) and drifts for
// the component's nodes, relative to the anchor as the system solves them;
// false when it lacks a node.
bool WarmStart(const SolveResult& warm, int64_t T, const std::vector<int>& comp_nodes,
               const std::vector<uint32_t>& ids, int anchor, std::vector<double>* x, std::vector<double>* xd) {
  x->resize(comp_nodes.size());
  xd->resize(comp_nodes.size());
  const double dt = static_cast<double>(T - warm.reference_instant_ns);
  const NodeIndex index_of = NodeIndex::Of(warm);
  for (size_t i = 0; i < comp_nodes.size(); ++i) {
    const int k = index_of(ids[comp_nodes[i]]);
    const NodeSolution* s = k >= 0 ? &warm.nodes[k] : nullptr;
    if (s == nullptr || !s->reachable || !std::isfinite(s->offset_ns) || !std::isfinite(s->drift)) return false;
    (*x)[i] = s->offset_ns + s->drift * dt;
    (*xd)[i] = s->drift;
  }
  const double x_anchor = (*x)[anchor], xd_anchor = (*xd)[anchor];
  for (size_t i = 0; i < comp_nodes.size(); ++i) {
    (*x)[i] -= x_anchor;
    (*xd)[i] -= xd_anchor;
  }
  return true;
}

struct ReferenceComponent {
  std::vector<int> nodes;     // node indices, ascending
  std::vector<int> local_of;  // per node: its index in `nodes`, or -1
  std::vector<const EdgeMeasurement*> meas;  // those between its nodes, in order
  int size() const { return static_cast<int>(nodes.size()); }
};

ReferenceComponent ReferenceComponentOf(const Components& c, const std::vector<EdgeMeasurement>& meas) {
  const int node_count = static_cast<int>(c.root.size());
  ReferenceComponent rc;
  rc.local_of.assign(node_count, -1);
  if (c.reference_root < 0) return rc;
  for (int i = 0; i < node_count; ++i) {
    if (c.root[i] == c.reference_root) {
      rc.local_of[i] = static_cast<int>(rc.nodes.size());
      rc.nodes.push_back(i);
    }
  }
  for (const auto& m : meas) {
    if (c.root[m.from] == c.reference_root) rc.meas.push_back(&m);
  }
  return rc;
}

// The reference component's solution: per node (its local index) and per
// measurement (its index in ReferenceComponent::meas).
struct ComponentSolution {
  std::vector<double> offset, drift, variance;
  // Per node: how much of its stamping bias's variance the edges' own
  // floors already carry through the solve (0 where not computed).
  std::vector<double> bias_carried;
  std::vector<double> weight;  // the offsets' final weights: 1/u² × robust
  std::vector<double> robust;  // the robust factor alone
  int robust_iterations = 0;
  bool converged = false;
  bool exact_uncertainty = true;
};

// The offsets: iteratively re-weighted least squares. False when a linear
// solve failed.
bool SolveOffsets(ComponentSystem& sys, const ReferenceComponent& rc, const std::vector<double>& y,
                  const std::vector<double>& w0, const SolverOptions& opt, const std::vector<double>* warm_offset,
                  ComponentSolution* sol) {
  const auto& meas = rc.meas;
  std::vector<double>& x = sol->offset;
  std::vector<double>& w = sol->weight;
  w = w0;
  bool ok = sys.SolveFor(y, w, x, warm_offset);
  int iter = 0;
  bool converged = opt.loss == RobustLoss::kNone;
  while (ok && opt.loss != RobustLoss::kNone && iter < opt.robust_iterations) {
    ++iter;
    // Residuals in units of their uncertainty, scaled by a robust estimate
    // of their spread (1.4826·MAD), floored at 1: while a gross outlier
    // still spreads its error over the good edges of its loops, the
    // scale grows with it, so the good edges keep their weight and the
    // outlier stands out (the far tail of a loss at a fixed scale would
    // shrink all of them alike and never escape).
    std::vector<double> z(meas.size()), absz(meas.size());
    for (size_t e = 0; e < meas.size(); ++e) {
      const double r = y[e] - (x[rc.local_of[meas[e]->to]] - x[rc.local_of[meas[e]->from]]);
      z[e] = r / meas[e]->uncertainty_ns;
      absz[e] = std::fabs(z[e]);
    }
    // Huber is convex: its minimum does not depend on the start, so it
    // keeps the nominal scale.
    const double scale = opt.loss != RobustLoss::kHuber ? std::max(1.0, 1.4826 * Median(absz)) : 1.0;
    for (size_t e = 0; e < meas.size(); ++e) {
      sol->robust[e] = std::max(RobustFactor(opt.loss, opt.robust_threshold, z[e] / scale), 1e-12);
      w[e] = w0[e] * sol->robust[e];
    }
    std::vector<double> xn;
    ok = sys.SolveFor(y, w, xn, &x);
    double moved = 0;
    for (int i = 0; i < rc.size() && ok; ++i) moved = std::max(moved, std::fabs(xn[i] - x[i]));
    if (ok) x = std::move(xn);
    if (moved <= opt.robust_tolerance_ns && scale == 1.0) {
      converged = true;
      break;
    }
  }
  sol->robust_iterations = iter;
  sol->converged = ok && converged;
  return ok;
}

// The drifts: the same system with the offsets' weights (an edge rejected
// for its offset is not trusted for its drift), re-weighted again against a
// robust scale of the drift residuals (1.4826·MAD). False when a linear
// solve failed, here or (offsets_ok) for the offsets.
bool SolveDrifts(ComponentSystem& sys, const ReferenceComponent& rc, const std::vector<double>& yd,
                 const SolverOptions& opt, const std::vector<double>* warm_drift, bool offsets_ok,
                 ComponentSolution* sol) {
  const auto& meas = rc.meas;
  std::vector<double>& xd = sol->drift;
  std::vector<double> wd = sol->weight;
  bool ok = sys.SolveFor(yd, wd, xd, warm_drift) && offsets_ok;
  for (int it = 0; ok && opt.loss != RobustLoss::kNone && it < 5; ++it) {
    std::vector<double> rd(meas.size());
    for (size_t e = 0; e < meas.size(); ++e) rd[e] = yd[e] - (xd[rc.local_of[meas[e]->to]] - xd[rc.local_of[meas[e]->from]]);
    std::vector<double> absr(rd.size());
    for (size_t e = 0; e < rd.size(); ++e) absr[e] = std::fabs(rd[e]);
    const double scale = std::max(1.4826 * Median(absr), 1e-12);
    for (size_t e = 0; e < meas.size(); ++e) {
      wd[e] = sol->weight[e] * std::max(RobustFactor(opt.loss, opt.robust_threshold, rd[e] / scale), 1e-12);
    }
    const std::vector<double> xd_prev = xd;
    ok = sys.SolveFor(yd, wd, xd, &xd_prev);
  }
  return ok;
}

// Components up to this size get the bias their links' floors carry taken
// off their node floor (BiasCarriedByEdgeFloors: one more dense inverse).
constexpr int kBiasCarriedMaxNodes = 100;

// The part of each node's stamping-bias variance that its edges' own
// floors (node_bias_floor_ns each, shared by a link's two directions)
// already carry into its offset: what the floors of a link add to node i is
// f²·(Σ over the link's measurements of gᵢₑ·sₑ)², with g = the offsets'
// solve, dθ̂ᵢ/dyₑ = wₑ(Mᵢ,to − Mᵢ,from), M the inverse of its Laplacian, and
// sₑ = ±1 as the measurement runs along the link or against it. In a
// 2-node cluster the one link's floor is all of it: f² of the named
// reference's 2f² (docs/solver.md, "A node's own bias").
std::vector<double> BiasCarriedByEdgeFloors(const ComponentSystem& sys, const ReferenceComponent& rc,
                                            const std::vector<double>& w, double floor_ns, bool mean_ref) {
  const int n = rc.size();
  const Eigen::MatrixXd M = sys.Covariance(w);
  const auto order = MeasurementsByLink(rc.meas);
  std::vector<double> carried(n, 0.0);
  Eigen::VectorXd g(n);
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    g.setZero();
    double f = floor_ns;
    for (; j < order.size() && order[j].first == order[i].first; ++j) {
      const EdgeMeasurement& m = *rc.meas[order[j].second];
      const int a = rc.local_of[m.from], b = rc.local_of[m.to];
      const double along = m.from < m.to ? 1.0 : -1.0;
      g += along * w[order[j].second] * (M.col(b) - M.col(a));
      f = std::min(f, m.uncertainty_ns);
    }
    if (mean_ref) g.array() -= g.mean();
    for (int k = 0; k < n; ++k) carried[k] += f * f * g[k] * g[k];
    i = j;
  }
  return carried;
}

// Each node's variance, with the offsets' final weights and the two
// directions of a link counted as correlated: exact up to
// exact_uncertainty_max_nodes, then stochastic or along paths.
void NodeVariances(ComponentSystem& sys, const ReferenceComponent& rc, const SolverOptions& opt,
                   ComponentSolution* sol) {
  const int n = rc.size();
  const bool mean_ref = !opt.reference_node.has_value();
  const std::vector<double> wc = CovarianceWeights(rc.meas, sol->weight, opt.direction_correlation);
  std::vector<double>& var = sol->variance;
  if (n <= opt.exact_uncertainty_max_nodes) {
    const Eigen::MatrixXd C = sys.Covariance(wc);
    if (mean_ref) {
      const Eigen::VectorXd row = C.rowwise().sum();
      const double total = row.sum();
      for (int i = 0; i < n; ++i) var[i] = C(i, i) - 2.0 * row[i] / n + total / (double(n) * n);
    } else {
      for (int i = 0; i < n; ++i) var[i] = C(i, i);
    }
  } else if (opt.uncertainty_probes > 0) {
    sol->exact_uncertainty = false;
    var = sys.StochasticVariance(wc, mean_ref, opt.uncertainty_probes);
  } else {
    sol->exact_uncertainty = false;
    var = sys.PathVariance(wc);
  }
  // Small components only (it takes a dense inverse of its own): beyond,
  // every node has several edges, whose floors carry a small part of its
  // bias, and the whole floor is kept.
  sol->bias_carried.assign(n, 0.0);
  if (n <= kBiasCarriedMaxNodes && opt.node_bias_floor_ns > 0) {
    sol->bias_carried = BiasCarriedByEdgeFloors(sys, rc, sol->weight, opt.node_bias_floor_ns, mean_ref);
  }
}

// Offsets, drifts and (final pass) variances of the reference component.
// The prober-offsets pass skips the drifts and the variances.
bool SolveReferenceComponent(const ReferenceComponent& rc, int64_t T, const std::vector<uint32_t>& ids,
                             const NodeIndex& index_of, const SolverOptions& opt, const SolveResult* warm,
                             SolvePass pass, ComponentSolution* sol) {
  const int n = rc.size();
  const int anchor = opt.reference_node ? rc.local_of[index_of(*opt.reference_node)] : 0;
  ComponentSystem sys(rc.nodes, anchor, rc.meas, rc.local_of, opt);
  std::vector<double> y(rc.meas.size()), yd(rc.meas.size()), w0(rc.meas.size());
  for (size_t e = 0; e < rc.meas.size(); ++e) {
    y[e] = rc.meas[e]->offset_ns;
    yd[e] = rc.meas[e]->drift;
    w0[e] = 1.0 / (rc.meas[e]->uncertainty_ns * rc.meas[e]->uncertainty_ns);
  }
  std::vector<double> warm_x, warm_xd;
  const bool warmed = warm != nullptr && WarmStart(*warm, T, rc.nodes, ids, anchor, &warm_x, &warm_xd);

  bool ok = SolveOffsets(sys, rc, y, w0, opt, warmed ? &warm_x : nullptr, sol);
  if (pass == SolvePass::kFinal) {
    ok = SolveDrifts(sys, rc, yd, opt, warmed ? &warm_xd : nullptr, ok, sol);
    sol->converged = sol->converged && ok;
    NodeVariances(sys, rc, opt, sol);
  }
  if (!opt.reference_node.has_value()) {  // the mean of the nodes is the reference
    const double mx = std::accumulate(sol->offset.begin(), sol->offset.end(), 0.0) / n;
    const double md = std::accumulate(sol->drift.begin(), sol->drift.end(), 0.0) / n;
    for (int i = 0; i < n; ++i) {
      sol->offset[i] -= mx;
      sol->drift[i] -= md;
    }
  }
  return ok;
}

// Per node: offset, drift, uncertainty and the weighted RMS residual of
// its measurements; per measurement: its residual and robust weight.
void WriteSolution(const std::vector<EdgeMeasurement>& meas, const ReferenceComponent& rc, const ComponentSolution& sol,
                   const std::vector<uint32_t>& ids, const SolverOptions& opt, SolveResult* result) {
  const int node_count = static_cast<int>(ids.size());
  // The node's own stamping bias, or its wander where that is larger, and a
  // named reference's, which every other node's offset carries (the
  // reference itself is exact by naming). What its links carry is taken
  // off for the floor only: the wander's part of a link's sigma is left in
  // (chronolink-sim: taken off too, 3σ covered 98.7-99.4 % at 20-50 ns/√s,
  // against 99.1-99.6 %; docs/solver.md "A node's own wander").
  const double b = std::max(0.0, opt.node_bias_floor_ns);
  const auto own_variance = [&](uint32_t id) {
    const auto it = opt.node_shared_sigma_ns.find(id);
    const double s = it != opt.node_shared_sigma_ns.end() && std::isfinite(it->second) ? std::max(b, it->second) : b;
    return s * s;
  };
  const double reference_variance = opt.reference_node ? own_variance(*opt.reference_node) : 0.0;
  const std::vector<double>& x = sol.offset;
  std::vector<double> sum_wr2(node_count, 0.0), sum_w(node_count, 0.0);
  for (size_t e = 0; e < rc.meas.size(); ++e) {
    const EdgeMeasurement& m = *rc.meas[e];
    const double r = m.offset_ns - (x[rc.local_of[m.to]] - x[rc.local_of[m.from]]);
    for (int k : {m.from, m.to}) {
      sum_wr2[k] += sol.weight[e] * r * r;
      sum_w[k] += sol.weight[e];
    }
  }
  for (int i = 0; i < node_count; ++i) {
    NodeSolution& s = result->nodes[i];
    const int l = rc.local_of[i];
    if (l < 0) continue;
    s.reachable = true;
    s.offset_ns = x[l];
    s.drift = sol.drift[l];
    const bool named_reference = opt.reference_node && ids[i] == *opt.reference_node;
    const double carried = l < static_cast<int>(sol.bias_carried.size()) ? sol.bias_carried[l] : 0.0;
    s.uncertainty_ns = named_reference ? 0.0
                                       : std::sqrt(std::max(sol.variance[l], 0.0) +
                                                   std::max(0.0, own_variance(ids[i]) + reference_variance - carried));
    s.residual_ns = sum_w[i] > 0 ? std::sqrt(sum_wr2[i] / sum_w[i]) : 0.0;
  }
  size_t ce = 0;
  result->edges.reserve(meas.size());
  for (const auto& m : meas) {
    EdgeResidual er;
    er.node = ids[m.from];
    er.peer = ids[m.to];
    er.x0_ns = m.x0_ns;
    er.measured_ns = m.offset_ns;
    er.uncertainty_ns = m.uncertainty_ns;
    result->nodes[m.from].edges_used++;
    result->nodes[m.to].edges_used++;
    if (ce < rc.meas.size() && rc.meas[ce] == &m) {
      er.in_reference_component = true;
      er.residual_ns = m.offset_ns - (x[rc.local_of[m.to]] - x[rc.local_of[m.from]]);
      er.robust_weight = sol.robust[ce];
      ++ce;
    }
    result->edges.push_back(er);
  }
}

// One solve at T: measurements, components, the reference component's
// solution, the outputs.
SolveResult SolveOnce(std::span<const EdgeEstimate> edges, int64_t T, const SolverOptions& options,
                      const SolveResult* warm, SolvePass pass) {
  SolverOptions opt = options;
  if (pass == SolvePass::kProberOffsets) {
    opt.cg_tolerance = std::max(opt.cg_tolerance, kProberPassTolerance);
    opt.robust_iterations = std::min(opt.robust_iterations, kProberPassRobustIterations);
  }
  const std::vector<uint32_t> ids = SortedNodeIds(edges, opt.reference_node);
  const int node_count = static_cast<int>(ids.size());
  const NodeIndex index_of(ids);
  const std::vector<EdgeMeasurement> meas = MeasurementsAt(edges, T, opt, index_of);
  const Components components = FindComponents(
      node_count,
      [&meas](const auto& join) {
        for (const EdgeMeasurement& m : meas) join(m.from, m.to);
      },
      opt.reference_node ? std::optional<int>(index_of(*opt.reference_node)) : std::nullopt);

  SolveResult result;
  result.reference_instant_ns = T;
  result.reference_node = opt.reference_node;
  result.components = components.count;
  result.nodes.resize(node_count);
  for (int i = 0; i < node_count; ++i) {
    result.nodes[i].node = ids[i];
    result.nodes[i].component = components.label[i];
  }

  const ReferenceComponent rc = ReferenceComponentOf(components, meas);
  ComponentSolution sol;
  sol.offset.assign(rc.size(), 0.0);
  sol.drift.assign(rc.size(), 0.0);
  sol.variance.assign(rc.size(), 0.0);
  sol.weight.assign(rc.meas.size(), 0.0);
  sol.robust.assign(rc.meas.size(), 1.0);
  if (rc.size() > 0) {
    SolveReferenceComponent(rc, T, ids, index_of, opt, warm, pass, &sol);
    result.robust_iterations = sol.robust_iterations;
    result.converged = sol.converged;
    result.exact_uncertainty = sol.exact_uncertainty;
  }
  WriteSolution(meas, rc, sol, ids, opt, &result);
  return result;
}
}  // namespace

}  // namespace chronolink
