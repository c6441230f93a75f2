// Dropout on the cpu backends against its definition, bit for bit: element i (logical order) keeps
// when the i-th Rng(seed).uniform() draw is >= p and is then x * (1 / (1 - p)) computed in double and
// stored as f32, else +0.0; the backward pass applies the same mask and scale. The f32 contiguous
// pointer path (the one training takes) and the element-wise path (channels-last) must both agree.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/core/rng.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

void expect_bits(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = static_cast<float>(got.at_flat(i));
    ASSERT_EQ(std::memcmp(&g, &want[static_cast<size_t>(i)], sizeof(float)), 0)
        << what << " element " << i << ": " << g << " vs " << want[static_cast<size_t>(i)];
  }
}

TEST(DropoutDefinition, ForwardAndBackwardEqualTheDefinitionInEveryLayout) {
  DnnlBackend cpu;
  ReferenceBackend reference;
  const double p = 0.3;
  const uint64_t seed = 42;
  const double keep_scale = 1.0 / (1.0 - p);
  for (Backend* be : {static_cast<Backend*>(&cpu), static_cast<Backend*>(&reference)})
    for (const MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
      Rng data_rng(7);
      Tensor x = test::random_tensor({3, 5, 4, 6}, data_rng, DType::f32, fmt, -2, 2);
      x.set_flat(0, -0.0);  // dropped or kept, a signed zero
      x.set_flat(1, std::numeric_limits<double>::quiet_NaN());
      x.set_flat(2, std::numeric_limits<double>::infinity());
      x.set_flat(3, 0.1);  // a product that rounds
      Tensor y = Tensor::empty(x.shape(), DType::f32, Device::cpu(), fmt);
      Tensor mask;
      be->dropout_forward(p, seed, x, y, mask);
      Rng draws(seed);
      std::vector<float> want_y(static_cast<size_t>(x.numel())), want_dx(want_y.size());
      Tensor dy = test::random_tensor(x.shape(), data_rng, DType::f32, fmt, -1, 1);
      int kept = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const bool keep = draws.uniform() >= p;
        kept += keep;
        ASSERT_EQ(mask.data<uint8_t>()[i], keep ? 1 : 0) << "mask element " << i;
        want_y[static_cast<size_t>(i)] = keep ? static_cast<float>(x.at_flat(i) * keep_scale) : 0.0f;
        want_dx[static_cast<size_t>(i)] = keep ? static_cast<float>(dy.at_flat(i) * keep_scale) : 0.0f;
      }
      const std::string what = be->name() + (fmt == MemoryFormat::contiguous ? " contiguous" : " channels-last");
      ASSERT_GT(kept, 0);
      ASSERT_LT(kept, x.numel());
      expect_bits(y, want_y, what + " forward");
      Tensor dx = Tensor::empty(x.shape(), DType::f32, Device::cpu(), fmt);
      be->dropout_backward(p, dy, mask, dx);
      expect_bits(dx, want_dx, what + " backward");
    }
}

}  // namespace
}  // namespace lathe
