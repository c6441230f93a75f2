// Test helpers: seeded random tensors, elementwise comparison with a relative tolerance, and an
// exact mismatch count.
#pragma once

#include <gtest/gtest.h>

#include <cmath>

#include "engine/core/rng.h"
#include "engine/core/tensor.h"

namespace lathe::test {

inline Tensor random_tensor(const Shape& shape, Rng& rng, DType dt = DType::f32,
                            MemoryFormat fmt = MemoryFormat::contiguous, double lo = -1, double hi = 1) {
  Tensor t = Tensor::empty(shape, dt, Device::cpu(), fmt);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_flat(i, rng.uniform(lo, hi));
  return t;
}

/// Max of |a - b| / (atol + rtol * |b|) over all elements, as a gtest assertion.
inline ::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol = 1e-4, double atol = 1e-5) {
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << a.describe() << " vs " << b.describe();
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.at_flat(i), y = b.at_flat(i);
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y)))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << x << " vs " << y << " (" << a.describe() << ")";
  }
  return ::testing::AssertionSuccess();
}

/// How many elements differ (logical order, so layouts may differ).
inline int64_t mismatches(const Tensor& a, const Tensor& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    n += a.at_flat(i) != b.at_flat(i);
  return n;
}

}  // namespace lathe::test
