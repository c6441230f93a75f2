// Calibrators on hand-computed cases: min-max exact; percentile on a uniform histogram; TensorRT
// KL on a 4-bin case worked by hand and on a Gaussian sample; MSE against a brute-force search over
// the raw samples (with its own quantizer, not the library's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "engine/compress/quant/calibrator.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

HistogramObserver observe_values(const std::vector<float>& v, int bins = HistogramObserver::kDefaultBins) {
  HistogramObserver obs(bins);
  obs.observe(v.data(), static_cast<int64_t>(v.size()));
  return obs;
}

/// Mean squared error of quantizing the raw samples to [lo, hi] (test-local quantizer: symmetric
/// signed when lo == -hi, else asymmetric u8 with a rounded zero point).
double raw_mse(const std::vector<float>& x, double lo, double hi, int bits) {
  const bool symmetric = lo == -hi;
  double scale, zp = 0, qmin, qmax;
  if (symmetric) {
    qmax = (1 << (bits - 1)) - 1;
    qmin = -qmax;
    scale = hi / qmax;
  } else {
    qmin = 0;
    qmax = (1 << bits) - 1;
    scale = (hi - lo) / (qmax - qmin);
    zp = std::round(-lo / scale);
  }
  double acc = 0;
  const double inv = 1.0 / scale;
  for (float f : x) {
    const double r = f * inv;  // round half away from zero (ties have measure zero here)
    const double q = std::clamp(static_cast<double>(static_cast<int64_t>(r + (r >= 0 ? 0.5 : -0.5))) + zp, qmin, qmax);
    const double e = f - (q - zp) * scale;
    acc += e * e;
  }
  return acc / static_cast<double>(x.size());
}

TEST(Calibrator, MinMaxIsExact) {
  const auto obs = observe_values({0.5f, -3.25f, 1.5f, 0.0f, -1.0f});
  const CalibrationResult s = calibrate(obs, CalibrationMethod::minmax);
  EXPECT_EQ(s.lo, -3.25);
  EXPECT_EQ(s.hi, 3.25);
  EXPECT_TRUE(s.is_signed);
  EXPECT_FLOAT_EQ(s.params().scale[0], 3.25f / 127);
  const CalibrationResult a = calibrate(obs, CalibrationMethod::minmax, 99.99, 8, false);
  EXPECT_EQ(a.lo, -3.25);
  EXPECT_EQ(a.hi, 1.5);
  EXPECT_FALSE(a.is_signed);
  // Non-negative data (ReLU output): unsigned, [0, max], 255 steps.
  const CalibrationResult u = calibrate(observe_values({0.0f, 2.0f, 0.25f}), CalibrationMethod::minmax);
  EXPECT_EQ(u.lo, 0.0);
  EXPECT_EQ(u.hi, 2.0);
  EXPECT_FALSE(u.is_signed);
  EXPECT_FLOAT_EQ(u.params().scale[0], 2.0f / 255);
}

TEST(Calibrator, PercentileOnUniformHistogram) {
  // 2048 bins of width 1, 10 counts each: the q-quantile is q * 2048, interpolated in its bin.
  Histogram h{0.0, 2048.0, std::vector<double>(2048, 10.0)};
  EXPECT_DOUBLE_EQ(histogram_quantile(h, 0.5), 1024.0);
  EXPECT_NEAR(histogram_quantile(h, 0.9999), 0.9999 * 2048, 1e-9);
  EXPECT_NEAR(histogram_quantile(h, 0.99999), 0.99999 * 2048, 1e-9);
  EXPECT_NEAR(histogram_quantile(h, 0.123), 0.123 * 2048, 1e-9);
  EXPECT_DOUBLE_EQ(histogram_quantile(h, 1.0), 2048.0);

  // Through the observer: x_k = (k + 0.5) / n spans [0, 1) evenly; |x| and x agree.
  const int n = 204800;
  std::vector<float> x(n);
  for (int k = 0; k < n; ++k)
    x[k] = static_cast<float>((k + 0.5) / n);
  const auto obs = observe_values(x);
  const double w = obs.abs_histogram().bin_width();
  for (double p : {99.9, 99.99, 99.999, 90.0}) {
    const CalibrationResult r = calibrate(obs, CalibrationMethod::percentile, p);
    EXPECT_NEAR(r.hi, p / 100.0, w) << p;
    EXPECT_EQ(r.lo, 0.0);
  }
  // Asymmetric on uniform [-1, 1): the 0.1% and 99.9% points are -0.998 and 0.998.
  for (int k = 0; k < n; ++k)
    x[k] = static_cast<float>(2.0 * (k + 0.5) / n - 1.0);
  const auto obs2 = observe_values(x);
  const CalibrationResult a = calibrate(obs2, CalibrationMethod::percentile, 99.9, 8, false);
  EXPECT_NEAR(a.lo, -0.998, obs2.histogram().bin_width());
  EXPECT_NEAR(a.hi, 0.998, obs2.histogram().bin_width());
}

TEST(Calibrator, EntropyKlHandComputed) {
  // counts [4, 2, 1, 1], 2 levels (2-bit signed).
  //  i = 2: P = [4, 2 + 2] -> [1/2, 1/2];      Q = [4, 2] -> [2/3, 1/3]
  //  i = 3: P = [4, 2, 1 + 1] -> [1/2, 1/4, 1/4]; groups {0}, {1, 2}: Q = [4, 1.5, 1.5] / 7
  //  i = 4: P = [4, 2, 1, 1] / 8;              groups {0, 1}, {2, 3}: Q = [3, 3, 1, 1] / 8
  const std::vector<double> counts{4, 2, 1, 1};
  const double kl2 = 0.5 * std::log(0.5 / (2.0 / 3)) + 0.5 * std::log(0.5 / (1.0 / 3));
  const double kl3 = 0.5 * std::log(0.5 / (4.0 / 7)) + 2 * 0.25 * std::log(0.25 / (1.5 / 7));
  const double kl4 = 0.5 * std::log(4.0 / 3) + 0.25 * std::log(2.0 / 3);
  EXPECT_NEAR(tensorrt_kl_divergence(counts, 2, 2), kl2, 1e-12);
  EXPECT_NEAR(tensorrt_kl_divergence(counts, 3, 2), kl3, 1e-12);
  EXPECT_NEAR(tensorrt_kl_divergence(counts, 4, 2), kl4, 1e-12);
  ASSERT_LT(kl3, kl4);
  ASSERT_LT(kl3, kl2);
  // An outlier folded onto an empty bin: Q is zero there, smoothing keeps KL finite but large.
  const double kl_empty = tensorrt_kl_divergence({4, 0, 0, 1}, 2, 2);
  EXPECT_TRUE(std::isfinite(kl_empty));
  EXPECT_GT(kl_empty, 1.0);

  // The same counts through the observer (4 bins of width 1 over [0, 4]) at 2 bits: t = 3.
  const auto obs = observe_values({0.5f, -0.25f, 0.75f, -0.6f, 1.5f, -1.2f, 2.5f, -4.0f}, 4);
  ASSERT_EQ(obs.abs_histogram().counts, counts);
  const CalibrationResult r = calibrate(obs, CalibrationMethod::entropy, 99.99, 2);
  EXPECT_DOUBLE_EQ(r.hi, 3 * obs.abs_histogram().bin_width());  // bins of 1 (+1e-9 headroom)
  EXPECT_NEAR(r.hi, 3.0, 1e-8);
  EXPECT_EQ(r.lo, -r.hi);
  EXPECT_NEAR(r.score, kl3, 1e-12);
}

/// Expected squared error of symmetric quantization of N(0, 1) clipped at a with qmax steps per
/// side, in closed form: rounding (a/qmax)^2/12 inside, 2 * int_a^inf (x - a)^2 phi(x) dx outside.
double gaussian_mse(double a, int qmax) {
  const double tail = 0.5 * std::erfc(a / std::sqrt(2.0)), pdf = std::exp(-a * a / 2) / std::sqrt(2 * M_PI);
  const double s = a / qmax;
  return (1 - 2 * tail) * s * s / 12 + 2 * ((1 + a * a) * tail - a * pdf);
}

double gaussian_mse_optimum(int qmax) {
  double best_a = 0, best = INFINITY;
  for (double a = 0.5; a < 8; a += 0.001)
    if (gaussian_mse(a, qmax) < best)
      std::tie(best, best_a) = std::pair{gaussian_mse(a, qmax), a};
  return best_a;
}

TEST(Calibrator, EntropyAndMseOnGaussian) {
  // TensorRT's KL search trades the clipped tail (folded onto the last bin, where Q holds one bin's
  // worth) against flattening the body into 128 levels, which costs ~ (t/sigma)^2 / (24 * 128^2).
  // On a light-tailed Gaussian that balance falls in the far tail: the threshold clips a handful of
  // the 2^20 samples (t ~ 4.8 sigma, max ~ 5.2 sigma), well beyond 2.5 sigma and beyond the MSE
  // optimum. (On heavy-tailed data, e.g. ReLU activations, it lands far inside the max.)
  Rng rng(21);
  const double sigma = 0.7;
  std::vector<float> x(1 << 20);
  for (float& f : x)
    f = static_cast<float>(sigma * rng.normal());
  const auto obs = observe_values(x);
  const CalibrationResult kl = calibrate(obs, CalibrationMethod::entropy);
  const CalibrationResult mse = calibrate(obs, CalibrationMethod::mse);
  const auto clipped = std::count_if(x.begin(), x.end(), [&](float f) { return std::fabs(f) > kl.hi; });
  EXPECT_GT(kl.hi, 2.5 * sigma);
  EXPECT_LT(kl.hi, obs.abs_max());
  EXPECT_GE(clipped, 1);
  EXPECT_LT(clipped, static_cast<int64_t>(x.size() / 10000));
  EXPECT_GT(kl.hi, mse.hi);
  EXPECT_GT(kl.score, 0.0);
  ::testing::Test::RecordProperty("gaussian_kl_threshold_sigmas", std::to_string(kl.hi / sigma));
  // MSE against the closed-form optimum for N(0, sigma): 3.92 sigma at 8 bits (ACIQ's value),
  // 2.47 sigma at 4 bits with 7 steps per side.
  EXPECT_NEAR(mse.hi / sigma, gaussian_mse_optimum(127), 0.1);
  const CalibrationResult mse4 = calibrate(obs, CalibrationMethod::mse, 99.99, 4);
  EXPECT_NEAR(mse4.hi / sigma, gaussian_mse_optimum(7), 0.05);
  EXPECT_NEAR(mse4.mse / (sigma * sigma), gaussian_mse(mse4.hi / sigma, 7), 0.02 * mse4.mse / (sigma * sigma));
}

TEST(Calibrator, EntropyIgnoresExactZeros) {
  // A ReLU-like output (|gaussian| plus as many exact zeros) calibrates like the zero-free data.
  Rng rng(5);
  std::vector<float> x(200000);
  for (float& f : x)
    f = static_cast<float>(std::fabs(rng.normal()));
  HistogramObserver plain, relu;
  plain.observe(x.data(), static_cast<int64_t>(x.size()));
  const std::vector<float> zeros(x.size(), 0.0f);
  relu.observe(zeros.data(), static_cast<int64_t>(zeros.size()));
  relu.observe(x.data(), static_cast<int64_t>(x.size()));
  const CalibrationResult a = calibrate(plain, CalibrationMethod::entropy);
  const CalibrationResult b = calibrate(relu, CalibrationMethod::entropy);
  EXPECT_FALSE(a.is_signed);
  EXPECT_EQ(a.hi, b.hi);
  EXPECT_LT(a.hi, plain.abs_max());
}

/// Brute force over a grid of thresholds t: the raw-sample MSE of [-t, t]; returns {t*, mse*}.
std::pair<double, double> brute_force_symmetric(const std::vector<float>& x, int bits, double from, double to,
                                                double step) {
  std::pair<double, double> best{from, INFINITY};
  for (double t = from; t <= to; t += step) {
    const double e = raw_mse(x, -t, t, bits);
    if (e < best.second)
      best = {t, e};
  }
  return best;
}

TEST(Calibrator, MseClipsFarOutliersLikeBruteForce) {
  Rng rng(9);
  // Uniform [-1, 1] plus outliers at +-D. Keeping an outlier costs ~ (t / qmax)^2 / 12 per sample in
  // rounding, clipping it (D - t)^2 / N. 8 bits, 1 outlier in 100k: the optimum clips it partway
  // (t ~ D (m/N) / (m/N + 1/(12 127^2)) ~ 16). 4 bits, 20 in 100k: it clips them entirely, t ~ 1.
  struct Case {
    int bits, n, outliers;
    double at, step;
  };
  for (const Case c : {Case{8, 100000, 1, 25.0, 0.01}, Case{4, 100000, 20, 8.0, 0.005}}) {
    std::vector<float> x(c.n);
    for (float& f : x)
      f = static_cast<float>(rng.uniform(-1, 1));
    for (int i = 0; i < c.outliers; ++i)
      x[i * 97] = static_cast<float>(i % 2 ? -c.at : c.at);
    const auto obs = observe_values(x);
    const CalibrationResult r = calibrate(obs, CalibrationMethod::mse, 99.99, c.bits);
    const auto [t_star, e_star] = brute_force_symmetric(x, c.bits, 0.3, c.at + 1, c.step);
    ASSERT_LT(t_star, c.at) << "the case must favour clipping";
    EXPECT_LT(r.hi, c.at) << c.bits << " bits: the outliers are clipped";
    EXPECT_GT(r.hi, 0.9) << c.bits << " bits: the body is kept";
    EXPECT_LE(raw_mse(x, r.lo, r.hi, c.bits), e_star * 1.01) << c.bits << " bits, t = " << r.hi << ", t* = " << t_star;
    if (c.bits == 4)
      EXPECT_NEAR(r.hi, t_star, 0.05);
    // The histogram estimate of the error agrees with the raw samples.
    EXPECT_NEAR(r.mse, raw_mse(x, r.lo, r.hi, c.bits), 0.05 * e_star) << c.bits << " bits";
  }
}

TEST(Calibrator, MseAsymmetricMatchesBruteForce) {
  // 4-bit u8 over uniform [-0.5, 1.5] with 1 outlier at 12 in 5000: the optimum clips it.
  Rng rng(13);
  std::vector<float> x(5000);
  for (float& f : x)
    f = static_cast<float>(rng.uniform(-0.5, 1.5));
  x[1234] = 12.0f;
  const auto obs = observe_values(x);
  const CalibrationResult r = calibrate(obs, CalibrationMethod::mse, 99.99, 4, false);
  double e_star = INFINITY, lo_star = 0, hi_star = 0;
  for (double lo = -0.8; lo <= 0.0; lo += 0.02)
    for (double hi = 1.0; hi <= 13.0; hi += 0.02) {
      const double e = raw_mse(x, lo, hi, 4);
      if (e < e_star)
        std::tie(e_star, lo_star, hi_star) = std::tuple{e, lo, hi};
    }
  ASSERT_LT(hi_star, 12.0);
  EXPECT_LT(r.hi, 12.0);
  EXPECT_LE(r.lo, 0.0);
  EXPECT_LE(raw_mse(x, r.lo, r.hi, 4), e_star * 1.03)
      << "[" << r.lo << ", " << r.hi << "] vs [" << lo_star << ", " << hi_star << "]";
  EXPECT_FALSE(r.is_signed);
}

TEST(Calibrator, CalibrateAllSharesOneObserver) {
  Rng rng(17);
  std::vector<float> x(100000);
  for (float& f : x)
    f = static_cast<float>(rng.normal());
  const auto obs = observe_values(x);
  const auto all = calibrate_all(obs, 99.99);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].method, "minmax");
  EXPECT_EQ(all[1].method, "percentile");
  EXPECT_EQ(all[2].method, "entropy");
  EXPECT_EQ(all[3].method, "mse");
  for (const auto& r : all) {
    EXPECT_GT(r.hi, 0.0);
    EXPECT_LE(r.hi, obs.abs_max() * (1 + 1e-8));
    EXPECT_EQ(r.lo, -r.hi);
    // The MSE method's range is the best by its own measure (up to the bin grid).
    EXPECT_LE(all[3].mse, r.mse * 1.01) << r.method;
  }
  EXPECT_EQ(all[0].hi, obs.abs_max());
  EXPECT_LT(all[1].hi, all[0].hi);
  EXPECT_EQ(calibrate(obs, CalibrationMethod::entropy).hi, all[2].hi);
}

TEST(Calibrator, RejectsBadArguments) {
  HistogramObserver empty;
  EXPECT_THROW(calibrate(empty, CalibrationMethod::minmax), Error);
  const auto obs = observe_values({1.0f, -1.0f});
  EXPECT_THROW(calibrate(obs, CalibrationMethod::percentile, 0.0), Error);
  EXPECT_THROW(calibrate(obs, CalibrationMethod::percentile, 100.5), Error);
  EXPECT_THROW(calibrate(obs, CalibrationMethod::minmax, 99.99, 9), Error);
  EXPECT_THROW(calibration_method_from_name("kl"), ConfigError);
  EXPECT_EQ(calibration_method_from_name("entropy"), CalibrationMethod::entropy);
  EXPECT_THROW(tensorrt_kl_divergence({1, 2, 3}, 1, 2), Error);
  // All zeros: every method gives the empty range, nothing divides by zero.
  const auto zeros = observe_values({0.0f, 0.0f});
  for (const auto& r : calibrate_all(zeros)) {
    EXPECT_EQ(r.hi, 0.0) << r.method;
    EXPECT_EQ(r.mse, 0.0) << r.method;
  }
}

}  // namespace
}  // namespace lathe
