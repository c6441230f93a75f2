// Calibrators: the quantization range of a tensor from one HistogramObserver's statistics, by
// min-max, percentile, entropy (TensorRT's KL-divergence search) or MSE. All methods read the same
// histograms, so calibrate_all() compares them at the cost of one calibration pass.
//
// Symmetric calibration works on the |x| histogram and returns [-t, t]; when the observer never saw
// a negative value (ReLU outputs) the result is unsigned, [0, t] over 2^b - 1 steps (u8, zero point
// 0). Asymmetric calibration works on the x histogram and returns [lo, hi] for u8 with a zero point.
//
//   minmax      the observed [min, max] (symmetric: max |x|).
//   percentile  symmetric: the p-th percentile of |x|; asymmetric: the (100 - p)-th and p-th
//               percentiles of x. Linear interpolation inside the bin (mass assumed uniform there).
//   entropy     TensorRT (Migacz, "8-bit Inference with TensorRT", GTC 2017): for each candidate
//               i in [L, bins] (L = 128 levels for signed 8-bit, 2^(b-1) in general, 2^b unsigned):
//               P = hist[0:i] with the mass of hist[i:] added to P[i-1]; Q = hist[0:i] merged into
//               L groups of i / L bins (the last group takes the remainder), each group's mass
//               spread evenly over its non-zero bins (zero bins stay zero); t = i * bin width for the
//               i minimising KL(P || Q). Two details, both documented choices:
//               - Smoothing: P[i-1] can be non-zero where Q is zero (the outliers fall on an empty
//                 bin), making KL infinite. As MXNet/TVM's _smooth_distribution does, both P and Q
//                 (as counts) get eps = 1e-4 on their zero bins, taken evenly from their non-zero
//                 bins, before normalising. Such candidates get a large but finite divergence.
//               - Exact zeros (zero_count(), e.g. half of a ReLU output) are removed from bin 0
//                 first: any threshold represents 0 exactly, and a spike in bin 0 would otherwise
//                 dominate Q's first group (pytorch-quantization replaces bin 0 by bin 1 for the
//                 same reason). Zero-heavy and zero-free data of the same shape calibrate alike.
//               Asymmetric: the symmetric threshold t, intersected with [min, max] (TensorRT's method
//               has no asymmetric form).
//   mse         the range minimising the expected squared error E[(x - deq(q(x)))^2] (rounding
//               inside the range plus clipping outside), computed from the histogram with each bin's
//               mass spread uniformly over the bin and the exact quantizer (integrated piece by piece
//               between its rounding boundaries; a bin-centre rule aliases when the quantization step
//               is close to the bin width). Symmetric: t over every bin edge. Asymmetric: a search
//               over (lo, hi) bin edges around 0, on a grid of bins/128 then refined bin by bin.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/compress/quant/observer.h"
#include "engine/backend/formats/quant_params.h"

namespace lathe {

enum class CalibrationMethod { minmax, percentile, entropy, mse };

std::string_view calibration_method_name(CalibrationMethod m);
/// "minmax", "percentile", "entropy" or "mse"; throws lathe::ConfigError naming the allowed values.
CalibrationMethod calibration_method_from_name(std::string_view name);

struct CalibrationResult {
  double lo = 0, hi = 0;  // the range to quantize (symmetric signed: lo = -hi)
  std::string method;
  double score = 0;  // entropy: KL(P || Q) at the optimum; other methods: the MSE below
  double mse = 0;    // histogram estimate of E[(x - deq(q(x)))^2] for this range, every method
  int bits = 8;
  bool symmetric = true;
  bool is_signed = true;  // false: u8 (symmetric on x >= 0, or asymmetric)

  /// Per-tensor quantization parameters for [lo, hi].
  QuantParams params() const { return make_quant_params(lo, hi, bits, symmetric, is_signed); }
};

/// The range for one method. `percentile` in (0, 100] is used by the percentile method only.
/// Throws lathe::Error on an empty observer or bad arguments.
CalibrationResult calibrate(const HistogramObserver& observer, CalibrationMethod method, double percentile = 99.99,
                            int bits = 8, bool symmetric = true);

/// Every method (minmax, percentile, entropy, mse, in that order) from the same statistics.
std::vector<CalibrationResult> calibrate_all(const HistogramObserver& observer, double percentile = 99.99, int bits = 8,
                                             bool symmetric = true);

// ---- building blocks, exposed for tests and reports ----

/// The value below which `fraction` (0..1) of the histogram's mass lies, interpolated linearly
/// inside the bin where the cumulative mass crosses it.
double histogram_quantile(const Histogram& h, double fraction);

/// TensorRT's KL(P || Q) for candidate threshold bin i (levels <= i <= counts.size()), as described
/// in the header comment (smoothing included; no zero removal, the caller does that).
double tensorrt_kl_divergence(const std::vector<double>& counts, int i, int levels);

/// Expected squared quantization error per value of the histogram's data under per-tensor
/// parameters `p`, each bin's mass uniform over the bin. 0 for an empty histogram.
double histogram_quant_mse(const Histogram& h, const QuantParams& p);

}  // namespace lathe
