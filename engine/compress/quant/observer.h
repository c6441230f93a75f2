// Observers: statistics of tensors collected over a calibration set, from which the calibrators
// (calibrator.h) derive quantization ranges. Every method (min-max, percentile, entropy, MSE) works
// from the same HistogramObserver, so one pass over the data serves them all.
//
// HistogramObserver keeps two histograms of a fixed number of bins (2048 by default, TensorRT's):
//   abs_histogram(): |x| over [0, R]       (symmetric calibration)
//   histogram():     x over [lo, hi] with lo <= 0 <= hi (asymmetric calibration)
// The first batch holding a non-zero value sets the range tightly to its data (the top edge 1e-9
// of the width above the max, so every bin is half-open and no value sits on an edge). When a
// later batch falls outside, the range grows by an integer factor k (the smallest that covers the
// data) and, for the signed histogram, by a whole number m of old bins to the left, so that every
// new bin edge is an old bin edge: new bin j is exactly the sum of old bins [j*k - m, (j+1)*k - m).
// No bin's mass is ever split (PyTorch's HistogramObserver spreads old bins over new ones in
// proportion to their overlap, which blurs the histogram each time it grows). The price is
// resolution: after growing, the data fills between 1/k and all of the bins. Counts stay exact
// integers (held in double, exact up to 2^53).
//
// MinMaxObserver keeps running min and max per tensor or per channel (weights: axis 0).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/formats/quant_params.h"
#include "engine/core/tensor.h"

namespace lathe {

/// Equal-width bins over [lo, hi]; bin j covers [edge(j), edge(j + 1)), the last bin also holds hi.
struct Histogram {
  double lo = 0, hi = 0;
  std::vector<double> counts;

  int bins() const { return static_cast<int>(counts.size()); }
  double bin_width() const { return counts.empty() ? 0 : (hi - lo) / static_cast<double>(counts.size()); }
  double edge(int j) const { return j == bins() ? hi : lo + j * bin_width(); }
  double center(int j) const { return lo + (j + 0.5) * bin_width(); }
  /// The bin holding x (values outside the range go to the first or last bin).
  int bin_of(double x) const;
  double total() const;
  /// True once a non-zero value has set the range (hi > lo).
  bool has_range() const { return hi > lo; }
};

class HistogramObserver {
 public:
  static constexpr int kDefaultBins = 2048;

  explicit HistogramObserver(int bins = kDefaultBins);

  /// Accumulates the values of a host f32 tensor (any layout). Throws lathe::Error on NaN or
  /// infinity, naming the element.
  void observe(const Tensor& t);
  void observe(const float* data, int64_t n);
  void reset();

  bool empty() const { return m_count == 0; }
  int64_t count() const { return m_count; }
  /// Number of exact zeros seen (e.g. ReLU outputs); the entropy calibrator leaves them out.
  int64_t zero_count() const { return m_zeros; }
  double min() const { return m_min; }
  double max() const { return m_max; }
  double abs_max() const;
  int bins() const { return m_bins; }
  /// |x| over [0, R], R >= abs_max(). Before any non-zero value arrives, has_range() is false and
  /// the zeros seen so far are only in zero_count().
  const Histogram& abs_histogram() const { return m_abs; }
  /// x over [lo, hi] with lo <= min(min(), 0) and hi >= max(max(), 0).
  const Histogram& histogram() const { return m_signed; }

 private:
  int m_bins;
  int64_t m_count = 0;
  int64_t m_zeros = 0;
  double m_min = 0, m_max = 0;
  Histogram m_abs, m_signed;
};

/// Grows `h` (keeping all its bins) to cover [lo, hi] with lo <= h.lo and hi strictly below the new
/// top edge, as described in the header comment: a whole-bin shift m to the left, the smallest
/// integer width factor k, old bins summed into new ones without splitting. No-op when [lo, hi]
/// already fits. Exposed for tests.
void grow_histogram(Histogram& h, double lo, double hi);

class MinMaxObserver {
 public:
  /// axis -1: one range for the whole tensor; else one range per index of that dimension
  /// (axis 0 for Linear [O, K] and Conv2d [O, C, KH, KW] weights).
  explicit MinMaxObserver(int axis = -1) : m_axis(axis) {}

  /// Accumulates a host f32 tensor (any layout); the channel count is fixed by the first call.
  void observe(const Tensor& t);

  bool empty() const { return m_min.empty(); }
  int axis() const { return m_axis; }
  /// One entry per tensor (axis -1) or per channel.
  const std::vector<double>& min() const { return m_min; }
  const std::vector<double>& max() const { return m_max; }
  /// Quantization parameters covering the observed ranges (per tensor or per channel).
  QuantParams params(int bits = 8, bool symmetric = true, bool is_signed = true) const;

 private:
  int m_axis;
  std::vector<double> m_min, m_max;
};

}  // namespace lathe
