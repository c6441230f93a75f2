// Test helpers: seeded random tensors, elementwise comparison with a relative tolerance, an exact
// mismatch count, a tensor's values as doubles and a label tensor from a list.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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

/// The elements in logical order, as doubles.
inline std::vector<double> flat(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.at_flat(i);
  return v;
}

/// Class labels as the s32 vector the losses take.
inline Tensor labels_of(const std::vector<int>& y) {
  Tensor t = Tensor::empty({static_cast<int64_t>(y.size())}, DType::s32);
  for (size_t i = 0; i < y.size(); ++i)
    t.data<int32_t>()[i] = y[i];
  return t;
}

}  // namespace lathe::test
