// How the measurements of one link (its two directions, or more) covary,
// for both solvers' uncertainty. The two directions of a link share its
// delay asymmetry, so their errors are correlated: where every measurement
// states its shared part sᵢ the covariance of two is sᵢsⱼ, else
// rho·uᵢuⱼ. The inverse-variance mean of the link's measurements then has
// variance (Σwᵢ + cross) / (Σwᵢ)², wᵢ = 1/uᵢ², with the cross term
// Σᵢ≠ⱼ wᵢwⱼsᵢsⱼ or rho·Σᵢ≠ⱼ√(wᵢwⱼ), instead of 1/Σwᵢ (docs/solver.md
// "Uncertainty"). Pure arithmetic.
#pragma once

#include <algorithm>
#include <cmath>

namespace chronolink {

class LinkCovariance {
 public:
  // One measurement of the link: weight w = 1/u², shared part s (< 0: unknown).
  void Add(double w, double s) {
    sum_w_ += w;
    sum_sqrt_w_ += std::sqrt(w);
    sum_ws_ += w * s;
    sum_ws2_ += w * s * w * s;
    shared_known_ = shared_known_ && s >= 0;
  }
  double sum_w() const { return sum_w_; }
  // Σᵢ≠ⱼ of the covariances in weight units: Σᵢ≠ⱼ xᵢxⱼ = (Σxᵢ)² − Σxᵢ²,
  // with xᵢ = wᵢsᵢ, or √wᵢ times rho (clamped to [0, 1]) where a shared part
  // is unknown.
  double Cross(double rho) const {
    if (shared_known_) return sum_ws_ * sum_ws_ - sum_ws2_;
    return std::clamp(rho, 0.0, 1.0) * (sum_sqrt_w_ * sum_sqrt_w_ - sum_w_);
  }
  // The variance of the inverse-variance mean, the directions counted as
  // correlated; 1/Σw were they independent.
  double MeanVariance(double rho) const { return (sum_w_ + Cross(rho)) / (sum_w_ * sum_w_); }

 private:
  double sum_w_ = 0, sum_sqrt_w_ = 0, sum_ws_ = 0, sum_ws2_ = 0;
  bool shared_known_ = true;
};

}  // namespace chronolink
