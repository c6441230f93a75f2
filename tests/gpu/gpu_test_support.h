// Shared fixture and helpers for the CUDA parity tests: skip with the runtime's reason when no
// device is present, random host inputs (fresh per trial, seed in the failure trace), uploads in any
// layout, NaN-poisoned outputs (so an unwritten element fails), f64 copies for the reference
// oracle, and a relative-norm comparison that rejects NaN.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/core/rng.h"

/// First statement of every GPU test (here: the fixture's SetUp).
#define LATHE_SKIP_WITHOUT_CUDA()        \
  if (::lathe::cuda_device_count() == 0) \
  GTEST_SKIP() << "no CUDA device: " << ::lathe::cuda::device_unavailable_reason()

namespace lathe::gputest {

/// Base seed: LATHE_TEST_SEED from the environment, else fixed (reproducible by default).
inline uint64_t base_seed() {
  const char* s = std::getenv("LATHE_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 20240611ull;
}

inline Tensor host_random(const Shape& shape, Rng& rng, MemoryFormat format = MemoryFormat::contiguous,
                          double scale = 1.0) {
  Tensor t = Tensor::empty(shape, DType::f32, Device::cpu(), format);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_flat(i, scale * rng.normal());
  return t;
}

/// An f64 host copy (row-major) for the reference backend: the oracle computes in double.
inline Tensor to_f64(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i)
    out.set_flat(i, t.at_flat(i));
  return out;
}

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    m = std::max(m, std::abs(t.at_flat(i)));
  return m;
}

/// ||got - want|| / ||want|| <= rel and every element within rel * max|want| (+ tiny absolute), no NaN.
inline ::testing::AssertionResult close(const Tensor& got, const Tensor& want, double rel = 1e-4) {
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape()) << " vs " << shape_str(want.shape());
  double diff2 = 0, ref2 = 0;
  const double scale = max_abs(want);
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.at_flat(i), w = want.at_flat(i);
    if (std::isnan(g) || std::isnan(w))
      return ::testing::AssertionFailure() << "NaN at flat " << i << " (got " << g << ", want " << w << ")";
    if (std::abs(g - w) > rel * 10 * scale + 1e-30)
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g << ", want " << w << " (max |want| " << scale << ")";
    diff2 += (g - w) * (g - w);
    ref2 += w * w;
  }
  const double err = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (err > rel)
    return ::testing::AssertionFailure() << "relative error " << err << " > " << rel;
  return ::testing::AssertionSuccess();
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LATHE_SKIP_WITHOUT_CUDA();
    m_cuda = std::make_unique<cuda::CudaBackend>(0);
  }

  cuda::CudaBackend& gpu() { return *m_cuda; }

  /// A device copy of a host tensor, in `format` (the host tensor's own layout may differ).
  Tensor up(const Tensor& host, MemoryFormat format = MemoryFormat::contiguous) {
    Tensor d = m_cuda->empty(host.shape(), host.dtype(), format);
    m_cuda->copy(host, d);
    return d;
  }
  /// A row-major host copy of a device tensor.
  Tensor down(const Tensor& dev) {
    Tensor h = Tensor::empty(dev.shape(), dev.dtype());
    m_cuda->copy(dev, h);
    return h;
  }
  /// A device tensor whose every element is NaN (f32), so unwritten outputs fail comparisons.
  Tensor poisoned(const Shape& shape, MemoryFormat format = MemoryFormat::contiguous) {
    Tensor h = Tensor::empty(shape, DType::f32, Device::cpu(), format);
    h.fill(std::numeric_limits<double>::quiet_NaN());
    return up(h, format);
  }

  ReferenceBackend m_ref;
  std::unique_ptr<cuda::CudaBackend> m_cuda;
};

inline const char* format_name(MemoryFormat f) { return f == MemoryFormat::channels_last ? "nhwc" : "nchw"; }

}  // namespace lathe::gputest
