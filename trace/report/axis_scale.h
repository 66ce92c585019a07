// Scales and tick marks for the report's plots: a linear scale whose domain
// is widened to round ("nice") tick values, so that every labelled tick
// sits on the frame or a grid line, and a log scale of whole decades for
// quantities that span orders of magnitude (collective skew before and
// after alignment). Pure values; thread-safe.
#pragma once

#include <vector>

namespace chronolink::trace::report {

class LinearScale {
 public:
  enum class Domain {
    kNice,   // widened to the nice ticks around the data: a y axis's labels sit on its frame
    kExact,  // the data's own range, ticks inside it: a time axis wastes no width
  };

  // Data [lo, hi] onto pixels [pixel_lo, pixel_hi] (pixel_hi < pixel_lo for
  // a y axis that grows upwards) with about `target_ticks` nice ticks. An
  // empty or non-finite range gets a small one around its value.
  LinearScale(double lo, double hi, double pixel_lo, double pixel_hi, int target_ticks,
              Domain domain = Domain::kNice);

  // The same domain and ticks onto other pixels (a second plot of one axis).
  LinearScale OnPixels(double pixel_lo, double pixel_hi) const;

  double operator()(double value) const;
  const std::vector<double>& ticks() const { return ticks_; }
  // Decimals that tell the ticks apart.
  int decimals() const { return decimals_; }
  double lo() const { return lo_; }
  double hi() const { return hi_; }

 private:
  double lo_, hi_, pixel_lo_, pixel_hi_;
  std::vector<double> ticks_;
  int decimals_ = 0;
};

class LogScale {
 public:
  // Positive data up to `max` onto pixels, whole decades from the one at or
  // below `min_positive` (at least `floor`) to the one at or above `max`.
  LogScale(double min_positive, double max, double floor, double pixel_lo, double pixel_hi);

  // Values at or below the lowest decade map onto its pixel.
  double operator()(double value) const;
  const std::vector<double>& decades() const { return decades_; }

 private:
  double log_lo_, log_hi_, pixel_lo_, pixel_hi_;
  std::vector<double> decades_;
};

// 1, 2 or 5 times a power of ten, at least `raw`.
double NiceStep(double raw);

}  // namespace chronolink::trace::report
