// Calibration methods over HistogramObserver statistics (see calibrator.h for the definitions).
#include "engine/compress/quant/calibrator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lathe {

namespace {

constexpr double kSmoothingEps = 1e-4;  // MXNet/TVM _smooth_distribution

/// ∫_a^b (x - Q(x))^2 dx / (b - a) for the affine quantizer (scale s, zero point zp, [qmin, qmax]),
/// summed exactly over the pieces between Q's rounding boundaries (ties are measure zero).
double mean_sq_error_on_interval(double a, double b, double s, int32_t zp, int32_t qmin, int32_t qmax) {
  auto level = [&](double x) {
    const double q = std::floor(x / s + 0.5) + zp;
    return static_cast<int64_t>(std::clamp(q, static_cast<double>(qmin), static_cast<double>(qmax)));
  };
  const int64_t qa = level(a), qb = level(b);
  if (!(b > a)) {
    const double e = a - (qa - zp) * s;
    return e * e;
  }
  double acc = 0;
  for (int64_t q = qa; q <= qb; ++q) {
    const double y = (q - zp) * s;
    const double u = q == qa ? a : (q - zp - 0.5) * s;
    const double v = q == qb ? b : (q - zp + 0.5) * s;
    acc += ((v - y) * (v - y) * (v - y) - (u - y) * (u - y) * (u - y)) / 3.0;
  }
  return acc / (b - a);
}

/// MXNet/TVM's _smooth_distribution on counts: eps on zero bins, taken evenly from non-zero bins
/// (never driving one to zero or below).
void smooth_distribution(std::vector<double>& p) {
  int64_t zeros = 0;
  double min_nonzero = std::numeric_limits<double>::infinity();
  for (double v : p) {
    if (v == 0)
      ++zeros;
    else
      min_nonzero = std::min(min_nonzero, v);
  }
  const int64_t nonzeros = static_cast<int64_t>(p.size()) - zeros;
  if (zeros == 0 || nonzeros == 0)
    return;
  const double eps1 =
      std::min(kSmoothingEps * static_cast<double>(zeros) / static_cast<double>(nonzeros), 0.5 * min_nonzero);
  const double eps0 = eps1 * static_cast<double>(nonzeros) / static_cast<double>(zeros);  // mass conserved
  for (double& v : p)
    v = v == 0 ? eps0 : v - eps1;
}

struct Setup {
  bool is_signed;
  const Histogram* hist;  // the one this calibration reads
};

Setup setup_for(const HistogramObserver& obs, int bits, bool symmetric) {
  LATHE_CHECK(!obs.empty(), "calibrate: the observer has seen no data");
  quant_qmax(bits, symmetric, true);  // validates bits
  const bool is_signed = symmetric && obs.min() < 0;
  return {is_signed, symmetric ? &obs.abs_histogram() : &obs.histogram()};
}

CalibrationResult make_result(const HistogramObserver& obs, const Setup& s, CalibrationMethod m, double lo, double hi,
                              int bits, bool symmetric) {
  CalibrationResult r;
  r.method = std::string(calibration_method_name(m));
  r.bits = bits;
  r.symmetric = symmetric;
  r.is_signed = s.is_signed;
  if (symmetric) {
    hi = std::max(std::fabs(lo), std::fabs(hi));
    lo = s.is_signed ? -hi : 0.0;
  }
  r.lo = lo;
  r.hi = hi;
  r.mse = histogram_quant_mse(*s.hist, r.params());
  r.score = r.mse;
  return r;
}

/// TensorRT threshold on the |x| histogram (zeros removed from bin 0); returns {t, KL}.
std::pair<double, double> entropy_threshold(const HistogramObserver& obs, int levels) {
  const Histogram& h = obs.abs_histogram();
  if (!h.has_range())
    return {0.0, 0.0};
  LATHE_CHECK(h.bins() >= levels, "entropy calibration needs at least ", levels, " histogram bins, the observer has ",
              h.bins());
  std::vector<double> counts = h.counts;
  counts[0] = std::max(0.0, counts[0] - static_cast<double>(obs.zero_count()));
  int best_i = h.bins();
  double best_kl = std::numeric_limits<double>::infinity();
  for (int i = levels; i <= h.bins(); ++i) {
    const double kl = tensorrt_kl_divergence(counts, i, levels);
    if (kl < best_kl) {  // ties keep the smallest threshold
      best_kl = kl;
      best_i = i;
    }
  }
  return {h.edge(best_i), best_kl};
}

/// Symmetric MSE: the bin edge t minimising the error of [-t, t] (or [0, t]).
std::pair<double, double> mse_threshold_symmetric(const Histogram& h, int bits, bool is_signed) {
  if (!h.has_range())
    return {0.0, 0.0};
  double best_t = h.hi, best = std::numeric_limits<double>::infinity();
  for (int i = 1; i <= h.bins(); ++i) {
    const double t = h.edge(i);
    const double e = histogram_quant_mse(h, make_quant_params(is_signed ? -t : 0.0, t, bits, true, is_signed));
    if (e < best) {
      best = e;
      best_t = t;
    }
  }
  return {best_t, best};
}

/// Asymmetric MSE: (lo, hi) bin edges with lo <= 0 <= hi, coarse grid then bin-by-bin refinement.
std::pair<double, double> mse_range_asymmetric(const Histogram& h, int bits) {
  if (!h.has_range())
    return {0.0, 0.0};
  const int nb = h.bins();
  int zero_lo = 0, zero_hi = nb;  // last edge <= 0, first edge >= 0
  for (int j = 0; j <= nb; ++j)
    if (h.edge(j) <= 0)
      zero_lo = j;
  for (int j = nb; j >= 0; --j)
    if (h.edge(j) >= 0)
      zero_hi = j;
  auto error = [&](int ja, int jb) {
    const double a = h.edge(ja), b = h.edge(jb);
    if (!(b > a))
      return std::numeric_limits<double>::infinity();
    return histogram_quant_mse(h, make_quant_params(a, b, bits, false, false));
  };
  const int stride = std::max(1, nb / 128);
  auto grid = [&](int from, int to) {  // from..to inclusive, every stride, both ends included
    std::vector<int> g;
    for (int j = from; j < to; j += stride)
      g.push_back(j);
    g.push_back(to);
    return g;
  };
  int best_a = 0, best_b = nb;
  double best = error(best_a, best_b);
  auto consider = [&](int ja, int jb) {
    const double e = error(ja, jb);
    if (e < best) {
      best = e;
      best_a = ja;
      best_b = jb;
    }
  };
  for (int ja : grid(0, zero_lo))
    for (int jb : grid(zero_hi, nb))
      consider(ja, jb);
  const int ca = best_a, cb = best_b;
  for (int ja = std::max(0, ca - stride); ja <= std::min(zero_lo, ca + stride); ++ja)
    for (int jb = std::max(zero_hi, cb - stride); jb <= std::min(nb, cb + stride); ++jb)
      consider(ja, jb);
  return {h.edge(best_a), h.edge(best_b)};
}

}  // namespace

std::string_view calibration_method_name(CalibrationMethod m) {
  switch (m) {
    case CalibrationMethod::minmax:
      return "minmax";
    case CalibrationMethod::percentile:
      return "percentile";
    case CalibrationMethod::entropy:
      return "entropy";
    case CalibrationMethod::mse:
      return "mse";
  }
  return "?";
}

CalibrationMethod calibration_method_from_name(std::string_view name) {
  for (CalibrationMethod m :
       {CalibrationMethod::minmax, CalibrationMethod::percentile, CalibrationMethod::entropy, CalibrationMethod::mse})
    if (name == calibration_method_name(m))
      return m;
  throw ConfigError(
      detail::concat("unknown calibration method '", name, "' (allowed: minmax, percentile, entropy, mse)"));
}

double histogram_quantile(const Histogram& h, double fraction) {
  LATHE_CHECK(fraction >= 0 && fraction <= 1, "histogram_quantile: fraction ", fraction, " outside [0, 1]");
  const double total = h.total();
  if (total == 0 || !h.has_range())
    return h.lo;
  const double target = fraction * total;
  double cum = 0;
  for (int j = 0; j < h.bins(); ++j) {
    const double c = h.counts[j];
    if (c > 0 && cum + c >= target)
      return h.edge(j) + h.bin_width() * std::max(0.0, target - cum) / c;
    cum += c;
  }
  return h.hi;
}

double tensorrt_kl_divergence(const std::vector<double>& counts, int i, int levels) {
  const int nb = static_cast<int>(counts.size());
  LATHE_CHECK(levels >= 1 && i >= levels && i <= nb, "tensorrt_kl_divergence: threshold bin ", i, " with ", levels,
              " levels over ", nb, " bins");
  std::vector<double> p(counts.begin(), counts.begin() + i), q(i, 0.0);
  double outliers = 0;
  for (int b = i; b < nb; ++b)
    outliers += counts[b];
  p[i - 1] += outliers;
  const int merged = i / levels;
  for (int level = 0; level < levels; ++level) {
    const int start = level * merged, stop = level == levels - 1 ? i : start + merged;
    double sum = 0;
    int nonzero = 0;
    for (int b = start; b < stop; ++b) {
      sum += counts[b];
      nonzero += counts[b] != 0;
    }
    if (nonzero == 0)
      continue;
    for (int b = start; b < stop; ++b)
      if (counts[b] != 0)
        q[b] = sum / nonzero;
  }
  smooth_distribution(p);
  smooth_distribution(q);
  double sp = 0, sq = 0;
  for (int b = 0; b < i; ++b) {
    sp += p[b];
    sq += q[b];
  }
  if (sp == 0 || sq == 0)
    return 0;
  double kl = 0;
  for (int b = 0; b < i; ++b) {
    if (p[b] <= 0)
      continue;
    const double pb = p[b] / sp, qb = q[b] / sq;
    kl += pb * std::log(pb / qb);
  }
  return kl;
}

double histogram_quant_mse(const Histogram& h, const QuantParams& p) {
  LATHE_CHECK(!p.per_channel(), "histogram_quant_mse takes per-tensor parameters, got ", p.describe());
  p.validate();
  const double total = h.total();
  if (total == 0)
    return 0;
  const double s = p.scale[0];
  const int32_t zp = p.zero_point[0], qmin = p.qmin(), qmax = p.qmax();
  double acc = 0;
  for (int j = 0; j < h.bins(); ++j) {
    if (h.counts[j] == 0)
      continue;
    acc += h.counts[j] * mean_sq_error_on_interval(h.edge(j), h.edge(j + 1), s, zp, qmin, qmax);
  }
  return acc / total;
}

CalibrationResult calibrate(const HistogramObserver& obs, CalibrationMethod method, double percentile, int bits,
                            bool symmetric) {
  const Setup s = setup_for(obs, bits, symmetric);
  switch (method) {
    case CalibrationMethod::minmax:
      return make_result(obs, s, method, obs.min(), obs.max(), bits, symmetric);
    case CalibrationMethod::percentile: {
      LATHE_CHECK(percentile > 0 && percentile <= 100, "percentile calibration: percentile ", percentile,
                  " outside (0, 100]");
      const double f = percentile / 100.0;
      if (symmetric) {
        const double t = std::min(histogram_quantile(*s.hist, f), obs.abs_max());
        return make_result(obs, s, method, 0.0, t, bits, symmetric);
      }
      const double lo = std::max(histogram_quantile(*s.hist, 1.0 - f), obs.min());
      const double hi = std::min(histogram_quantile(*s.hist, f), obs.max());
      return make_result(obs, s, method, std::min(lo, 0.0), std::max(hi, 0.0), bits, symmetric);
    }
    case CalibrationMethod::entropy: {
      const int levels = obs.min() < 0 ? 1 << (bits - 1) : 1 << bits;  // 128 for s8, 256 for u8
      const auto [t, kl] = entropy_threshold(obs, levels);
      CalibrationResult r = symmetric ? make_result(obs, s, method, 0.0, t, bits, symmetric)
                                      : make_result(obs, s, method, std::max(std::min(obs.min(), 0.0), -t),
                                                    std::min(std::max(obs.max(), 0.0), t), bits, symmetric);
      r.score = kl;
      return r;
    }
    case CalibrationMethod::mse: {
      if (symmetric) {
        const auto [t, e] = mse_threshold_symmetric(*s.hist, bits, s.is_signed);
        return make_result(obs, s, method, 0.0, t, bits, symmetric);
      }
      const auto [lo, hi] = mse_range_asymmetric(*s.hist, bits);
      return make_result(obs, s, method, lo, hi, bits, symmetric);
    }
  }
  LATHE_FAIL("unknown calibration method");
}

std::vector<CalibrationResult> calibrate_all(const HistogramObserver& obs, double percentile, int bits,
                                             bool symmetric) {
  std::vector<CalibrationResult> out;
  for (CalibrationMethod m :
       {CalibrationMethod::minmax, CalibrationMethod::percentile, CalibrationMethod::entropy, CalibrationMethod::mse})
    out.push_back(calibrate(obs, m, percentile, bits, symmetric));
  return out;
}

}  // namespace lathe
