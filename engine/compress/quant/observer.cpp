// HistogramObserver and MinMaxObserver: one pass over calibration batches, exact re-binning.
#include "engine/compress/quant/observer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace lathe {

namespace {

constexpr double kTopHeadroom = 1e-9;

/// The dense f32 memory of a host tensor: the tensor itself, or a contiguous copy.
Tensor dense_f32(const Tensor& t, const char* who) {
  LATHE_CHECK(t.device().is_cpu(), who, " observes host tensors, got ", t.describe());
  LATHE_CHECK(t.dtype() == DType::f32, who, " observes f32 tensors, got ", t.describe());
  return t.is_dense() ? t : t.contiguous_copy();
}

/// Sets the range of an empty histogram to [lo, hi] (hi > lo).
void set_range(Histogram& h, double lo, double hi) {
  h.lo = lo;
  h.hi = hi;
  std::fill(h.counts.begin(), h.counts.end(), 0.0);
}

void add_values(Histogram& h, const float* x, int64_t n, bool absolute) {
  const double lo = h.lo, inv_w = 1.0 / h.bin_width();
  const int last = h.bins() - 1;
  double* c = h.counts.data();
  for (int64_t i = 0; i < n; ++i) {
    const double v = absolute ? std::fabs(static_cast<double>(x[i])) : static_cast<double>(x[i]);
    const double pos = (v - lo) * inv_w;
    // Rounding can put a value at the top edge one past the last bin, or just below 0.
    const int b = pos <= 0 ? 0 : pos >= last ? last : static_cast<int>(pos);
    c[b] += 1;
  }
}

/// Whether every one of the n values is finite: x * 0 is NaN for an infinity or a NaN, 0 otherwise.
bool all_finite(const float* x, int64_t n) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i)
    acc += x[i] * 0.0f;
  return acc == 0.0f;
}

/// lo = std::min(lo, x[i]) and hi = std::max(hi, x[i]) in order over n >= 1 finite values, with the
/// same result: the extremes are found in any order (vectorised), and where one equals the running
/// value or is a zero the sequential rule decides (std::min keeps the earlier of two equal values,
/// which only +0.0 and -0.0 can tell apart).
void min_max_block(const float* x, int64_t n, double& lo, double& hi) {
  // Eight running extremes in one vector (GCC/Clang vector extensions: the compilers kept the plain
  // loop scalar, an OpenMP simd min reduction included).
  typedef float Lanes __attribute__((vector_size(32)));
  Lanes vmin, vmax;
  for (int j = 0; j < 8; ++j)
    vmin[j] = vmax[j] = x[0];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Lanes v;
    std::memcpy(&v, x + i, sizeof v);
    vmin = v < vmin ? v : vmin;
    vmax = v > vmax ? v : vmax;
  }
  float bmin = vmin[0], bmax = vmax[0];
  for (int j = 1; j < 8; ++j) {
    bmin = std::min(bmin, static_cast<float>(vmin[j]));
    bmax = std::max(bmax, static_cast<float>(vmax[j]));
  }
  for (; i < n; ++i) {
    bmin = std::min(bmin, x[i]);
    bmax = std::max(bmax, x[i]);
  }
  const auto first_zero = [x, n] {
    for (int64_t i = 0;; ++i)
      if (x[i] == 0.0f || i + 1 == n)
        return static_cast<double>(x[i]);
  };
  if (static_cast<double>(bmin) < lo)
    lo = bmin == 0.0f ? first_zero() : static_cast<double>(bmin);
  if (static_cast<double>(bmax) > hi)
    hi = bmax == 0.0f ? first_zero() : static_cast<double>(bmax);
}

}  // namespace

int Histogram::bin_of(double x) const {
  if (!has_range())
    return 0;
  const double pos = (x - lo) / bin_width();
  if (pos <= 0)
    return 0;
  return pos >= bins() - 1 ? bins() - 1 : static_cast<int>(pos);
}

double Histogram::total() const { return std::accumulate(counts.begin(), counts.end(), 0.0); }

void grow_histogram(Histogram& h, double lo, double hi) {
  LATHE_CHECK(h.has_range(), "grow_histogram needs a histogram with a range");
  LATHE_CHECK(lo <= h.lo, "grow_histogram only widens: [", h.lo, ", ", h.hi, "] -> [", lo, ", ", hi, "]");
  const int64_t nb = h.bins();
  const double w = h.bin_width();
  // m whole old bins to the left (new lo <= lo), then the smallest integer width factor k that
  // keeps every old bin and puts hi strictly below the top edge (bins are half-open).
  const double m_real = lo < h.lo ? std::ceil((h.lo - lo) / w) : 0.0;
  const double new_lo = h.lo - m_real * w;
  const double k_strict = std::floor((hi - new_lo) / (static_cast<double>(nb) * w)) + 1;
  LATHE_CHECK(m_real < 1e15 && k_strict < 1e15, "histogram range grows by more than 1e15 bins: [", h.lo, ", ", h.hi,
              "] -> [", lo, ", ", hi, "]");
  const int64_t m = static_cast<int64_t>(m_real);
  const int64_t k = std::max({int64_t{1}, static_cast<int64_t>(k_strict), (nb + m + nb - 1) / nb});
  if (m == 0 && k == 1)
    return;
  std::vector<double> grown(nb, 0.0);
  for (int64_t b = 0; b < nb; ++b) {
    if (h.counts[b] == 0)
      continue;
    // Old bin b spans [new_lo + (m + b) w, new_lo + (m + b + 1) w): inside one new bin of width k w.
    grown[static_cast<size_t>((m + b) / k)] += h.counts[b];
  }
  h.counts = std::move(grown);
  h.lo = new_lo;
  h.hi = new_lo + static_cast<double>(nb) * static_cast<double>(k) * w;
}

HistogramObserver::HistogramObserver(int bins) : m_bins(bins) {
  LATHE_CHECK(bins >= 2, "HistogramObserver needs at least 2 bins, got ", bins);
  m_abs.counts.assign(bins, 0.0);
  m_signed.counts.assign(bins, 0.0);
}

void HistogramObserver::reset() { *this = HistogramObserver(m_bins); }

double HistogramObserver::abs_max() const { return std::max(std::fabs(m_min), std::fabs(m_max)); }

void HistogramObserver::observe(const Tensor& t) {
  const Tensor x = dense_f32(t, "HistogramObserver");
  observe(static_cast<const float*>(x.raw()), x.numel());
}

void HistogramObserver::observe(const float* x, int64_t n) {
  if (n <= 0)
    return;
  double bmin = std::numeric_limits<double>::infinity(), bmax = -bmin;
  int64_t zeros = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    LATHE_CHECK(std::isfinite(v), "HistogramObserver: non-finite value ", v, " at element ", i, " of the batch");
    bmin = std::min(bmin, v);
    bmax = std::max(bmax, v);
    zeros += v == 0;
  }
  const bool first = m_count == 0;
  m_min = first ? bmin : std::min(m_min, bmin);
  m_max = first ? bmax : std::max(m_max, bmax);
  const int64_t zeros_before = m_zeros;
  m_count += n;
  m_zeros += zeros;

  const double amax = abs_max(), lo = std::min(m_min, 0.0), hi = std::max(m_max, 0.0);
  if (amax == 0)
    return;  // only zeros so far: they wait in m_zeros until a range exists
  // The top edge sits a hair (1e-9 of the width) above the data, so no value lies on it and every
  // bin is half-open: a value on the top edge would change bins when the range grows (recomputed
  // edges differ from the old ones by rounding, so one ulp is not enough).
  if (!m_abs.has_range()) {
    set_range(m_abs, 0.0, amax * (1 + kTopHeadroom));
    set_range(m_signed, lo, hi + (hi - lo) * kTopHeadroom);
    // Zeros from earlier all-zero batches go where 0 falls now.
    m_abs.counts[0] += static_cast<double>(zeros_before);
    m_signed.counts[m_signed.bin_of(0.0)] += static_cast<double>(zeros_before);
  } else {
    if (amax >= m_abs.hi)
      grow_histogram(m_abs, 0.0, amax);
    if (lo < m_signed.lo || hi >= m_signed.hi)
      grow_histogram(m_signed, std::min(lo, m_signed.lo), hi);
  }
  add_values(m_abs, x, n, true);
  add_values(m_signed, x, n, false);
}

void MinMaxObserver::observe(const Tensor& t) {
  const Tensor x = dense_f32(t, "MinMaxObserver");
  LATHE_CHECK(m_axis >= -1 && m_axis < x.ndim(), "MinMaxObserver: axis ", m_axis, " out of range for ", x.describe());
  const int64_t channels = m_axis < 0 ? 1 : x.dim(m_axis);
  if (m_min.empty()) {
    m_min.assign(channels, std::numeric_limits<double>::infinity());
    m_max.assign(channels, -std::numeric_limits<double>::infinity());
  }
  LATHE_CHECK(static_cast<int64_t>(m_min.size()) == channels, "MinMaxObserver: ", m_min.size(),
              " channels observed before, now ", x.describe(), " along axis ", m_axis);
  const float* v = static_cast<const float*>(x.raw());
  const int64_t n = x.numel();
  // Channel of a memory offset in a dense layout: (offset / stride) % size along the axis.
  const int64_t stride = m_axis < 0 ? 1 : x.stride(m_axis);
  // QAT observes every fake-quantized weight at every forward: the memory is a run of blocks of
  // `stride` values (block k in channel k % channels; per tensor: one block) and each block takes a
  // vectorised pass. A non-finite value goes to the element-wise loop, which names it.
  const int64_t block = m_axis < 0 ? n : stride;
  if (block >= 16 && all_finite(v, n)) {
    for (int64_t k = 0; k * block < n; ++k) {
      const int64_t c = m_axis < 0 ? 0 : k % channels;
      min_max_block(v + k * block, std::min(block, n - k * block), m_min[c], m_max[c]);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    LATHE_CHECK(std::isfinite(v[i]), "MinMaxObserver: non-finite value ", v[i], " in ", x.describe());
    const int64_t c = m_axis < 0 ? 0 : (i / stride) % channels;
    m_min[c] = std::min(m_min[c], static_cast<double>(v[i]));
    m_max[c] = std::max(m_max[c], static_cast<double>(v[i]));
  }
}

QuantParams MinMaxObserver::params(int bits, bool symmetric, bool is_signed) const {
  LATHE_CHECK(!empty(), "MinMaxObserver::params before any observe()");
  if (m_axis < 0)
    return make_quant_params(m_min[0], m_max[0], bits, symmetric, is_signed);
  return make_quant_params_per_channel(m_min, m_max, m_axis, bits, symmetric, is_signed);
}

}  // namespace lathe
