// QuantParams from ranges (hand-computed scales and zero points), round-trip error bounds per bit
// width, per tensor and per channel, round-half-to-even, saturation, and rejected inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/backend/formats/quant_params.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::random_tensor;

struct Mode {
  bool symmetric, is_signed;
};

/// Max over the tensor of |x - deq(q(x))| / scale(channel); the bound is 1/2 inside the range.
double max_error_in_steps(const Tensor& x, const QuantParams& p) {
  const Tensor q = quantize(x, p);
  EXPECT_EQ(q.dtype(), p.storage_dtype());
  const Tensor y = dequantize(q, p);
  double worst = 0;
  const Tensor xc = x.contiguous_copy(), yc = y.contiguous_copy();
  int64_t inner = 1;
  if (p.per_channel())
    for (int d = p.axis + 1; d < x.ndim(); ++d)
      inner *= x.dim(d);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = p.per_channel() ? (i / inner) % x.dim(p.axis) : 0;
    worst = std::max(worst, std::fabs(xc.at_flat(i) - yc.at_flat(i)) / p.scale[c]);
  }
  return worst;
}

TEST(QuantParams, HandComputedScalesAndZeroPoints) {
  QuantParams s = make_quant_params(-2.0, 1.0, 8, true, true);
  EXPECT_FLOAT_EQ(s.scale[0], 2.0f / 127);
  EXPECT_EQ(s.zero_point[0], 0);
  EXPECT_EQ(s.qmin(), -127);
  EXPECT_EQ(s.qmax(), 127);
  QuantParams s4 = make_quant_params(-2.0, 1.0, 4, true, true);
  EXPECT_FLOAT_EQ(s4.scale[0], 2.0f / 7);
  EXPECT_EQ(s4.qmin(), -7);
  QuantParams u = make_quant_params(0.0, 5.0, 8, true, false);
  EXPECT_FLOAT_EQ(u.scale[0], 5.0f / 255);
  EXPECT_EQ(u.storage_dtype(), DType::u8);
  // Asymmetric u8 over [-1, 3]: scale 4/255, zero point round(255/4) = round(63.75) = 64.
  QuantParams a = make_quant_params(-1.0, 3.0, 8, false, false);
  EXPECT_FLOAT_EQ(a.scale[0], 4.0f / 255);
  EXPECT_EQ(a.zero_point[0], 64);
  // Asymmetric s8 over [-1, 3]: zero point -128 + 64 = -64.
  QuantParams as = make_quant_params(-1.0, 3.0, 8, false, true);
  EXPECT_EQ(as.qmin(), -128);
  EXPECT_EQ(as.zero_point[0], -64);
  // A range not containing 0 is widened to include it: [2, 4] -> [0, 4], zero point qmin.
  QuantParams pos = make_quant_params(2.0, 4.0, 8, false, false);
  EXPECT_FLOAT_EQ(pos.scale[0], 4.0f / 255);
  EXPECT_EQ(pos.zero_point[0], 0);
  // Zero-width range: scale 1.
  EXPECT_FLOAT_EQ(make_quant_params(0.0, 0.0).scale[0], 1.0f);
}

TEST(QuantParams, ZeroIsExactAsymmetric) {
  for (int bits : {8, 4, 3}) {
    const QuantParams p = make_quant_params(-0.37, 1.91, bits, false, false);
    Tensor z = Tensor::zeros({1}, DType::f32);
    const Tensor q = quantize(z, p);
    EXPECT_EQ(q.at_flat(0), p.zero_point[0]);
    EXPECT_EQ(dequantize(q, p).at_flat(0), 0.0);
  }
}

TEST(QuantParams, RoundsHalfToEvenAndSaturates) {
  QuantParams p;
  p.scale = {1.0f};
  p.zero_point = {0};
  Tensor x = Tensor::empty({10}, DType::f32);
  const double in[10] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 200, -200, 3.49};
  const double expect[10] = {0, 2, 2, 0, -2, -2, 126, 127, -127, 3};
  for (int i = 0; i < 10; ++i)
    x.set_flat(i, in[i]);
  const Tensor q = quantize(x, p);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(q.at_flat(i), expect[i]) << in[i];
  // u8 asymmetric saturates at 0 and 255.
  const QuantParams u = make_quant_params(-1.0, 1.0, 8, false, false);
  Tensor y = Tensor::empty({2}, DType::f32);
  y.set_flat(0, -5);
  y.set_flat(1, 5);
  const Tensor qu = quantize(y, u);
  EXPECT_EQ(qu.at_flat(0), 0);
  EXPECT_EQ(qu.at_flat(1), 255);
}

TEST(QuantParams, RoundTripPerTensorWithinHalfStep) {
  Rng rng(7);
  for (int bits : {8, 4}) {
    for (Mode m : {Mode{true, true}, Mode{false, true}, Mode{false, false}, Mode{true, false}}) {
      const double lo = m.symmetric && !m.is_signed ? 0.0 : -1.3, hi = 2.7;
      const Tensor x = random_tensor({1000}, rng, DType::f32, MemoryFormat::contiguous, lo, hi);
      double mn = 1e9, mx = -1e9;
      for (int64_t i = 0; i < x.numel(); ++i) {
        mn = std::min(mn, x.at_flat(i));
        mx = std::max(mx, x.at_flat(i));
      }
      const QuantParams p = make_quant_params(mn, mx, bits, m.symmetric, m.is_signed);
      const double worst = max_error_in_steps(x, p);
      EXPECT_LE(worst, 0.5 + 1e-4) << bits << " bits, " << p.describe();
      // 1000 uniform samples reach close to the bound: the test would notice a wrong scale.
      EXPECT_GT(worst, 0.4) << bits << " bits, " << p.describe();
    }
  }
}

TEST(QuantParams, RoundTripPerChannelWithinHalfStep) {
  Rng rng(8);
  for (int bits : {8, 4}) {
    for (Mode m : {Mode{true, true}, Mode{false, false}}) {
      // [6, 5, 4, 3] channels-last, per channel along axis 1; channel c spans a different range.
      Tensor x = Tensor::empty({6, 5, 4, 3}, DType::f32, Device::cpu(), MemoryFormat::channels_last);
      std::vector<double> lo(5, 1e9), hi(5, -1e9);
      for (int64_t n = 0; n < 6; ++n)
        for (int64_t c = 0; c < 5; ++c)
          for (int64_t h = 0; h < 4; ++h)
            for (int64_t w = 0; w < 3; ++w) {
              const double v = rng.uniform(-0.2 * (c + 1), 0.5 * (c + 1) * (c + 1));
              x.set({n, c, h, w}, v);
              lo[c] = std::min(lo[c], v);
              hi[c] = std::max(hi[c], v);
            }
      const QuantParams p = make_quant_params_per_channel(lo, hi, 1, bits, m.symmetric, m.is_signed);
      ASSERT_EQ(p.channels(), 5);
      EXPECT_TRUE(quantize(x, p).is_channels_last());
      EXPECT_LE(max_error_in_steps(x, p), 0.5 + 1e-4) << p.describe();
      // Channel 4 spans ~25x channel 0: per-channel scales differ accordingly.
      EXPECT_GT(p.scale[4], 10 * p.scale[0]);
    }
  }
  // Per-output-channel weights [O, K], axis 0.
  const Tensor w = random_tensor({7, 13}, rng);
  std::vector<double> lo(7), hi(7);
  for (int64_t o = 0; o < 7; ++o) {
    lo[o] = 1e9;
    hi[o] = -1e9;
    for (int64_t k = 0; k < 13; ++k) {
      lo[o] = std::min(lo[o], w.get({o, k}));
      hi[o] = std::max(hi[o], w.get({o, k}));
    }
  }
  EXPECT_LE(max_error_in_steps(w, make_quant_params_per_channel(lo, hi, 0, 8)), 0.5 + 1e-4);
  EXPECT_LE(max_error_in_steps(w, make_quant_params_per_channel(lo, hi, 0, 4)), 0.5 + 1e-4);
}

TEST(QuantParams, RejectsBadInputs) {
  EXPECT_THROW(make_quant_params(-1, 1, 1), Error);
  EXPECT_THROW(make_quant_params(-1, 1, 9), Error);
  EXPECT_THROW(make_quant_params(1, -1), Error);
  EXPECT_THROW(make_quant_params(-1, std::nan("")), Error);
  EXPECT_THROW(make_quant_params(-1, INFINITY), Error);
  EXPECT_THROW(make_quant_params(-0.5, 1, 8, true, false), Error);  // unsigned symmetric needs lo >= 0
  EXPECT_THROW(make_quant_params_per_channel({0, 0}, {1}, 0), Error);
  EXPECT_THROW(make_quant_params_per_channel({0}, {1}, -1), Error);
  Tensor x = Tensor::zeros({3, 4}, DType::f32);
  EXPECT_THROW(quantize(x, make_quant_params_per_channel({0, 0}, {1, 1}, 1)), Error);        // 2 scales, 4 channels
  EXPECT_THROW(quantize(x, make_quant_params_per_channel({0, 0, 0}, {1, 1, 1}, 2)), Error);  // no axis 2
  Tensor s32 = Tensor::zeros({3}, DType::s32);
  EXPECT_THROW(quantize(s32, make_quant_params(-1, 1)), Error);
  const QuantParams u8p = make_quant_params(0, 1, 8, true, false);
  EXPECT_THROW(dequantize(quantize(x, make_quant_params(-1, 1)), u8p), Error);  // s8 data, u8 params
  QuantParams bad = make_quant_params(-1, 1);
  bad.zero_point[0] = 3;  // symmetric must have zero point 0
  EXPECT_THROW(quantize(x, bad), Error);
  bad = make_quant_params(-1, 1);
  bad.scale[0] = 0;
  EXPECT_THROW(quantize(x, bad), Error);
}

}  // namespace
}  // namespace lathe
