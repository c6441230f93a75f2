// Quantization-aware training: fake quantization against quantize-then-dequantize, the
// straight-through estimator against hand-computed masks, Linear/Conv2d with fake-quantized operands
// against a double-precision reference of the STE gradients, and a fake-quantized model against the
// real INT8 executor it simulates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/compress/quant/fake_quant.h"
#include "engine/compress/quant/int8_layer.h"
#include "engine/compress/quant/qat.h"
#include "tests/quant/int8_test_models.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::all_close;
using test::random_tensor;

/// x' of one value in double, written from the formula (not through quantize_value).
double fq_double(double x, double s, int z, int qmin, int qmax) {
  double q = std::nearbyint(x / s) + z;
  q = std::min<double>(std::max<double>(q, qmin), qmax);
  return (q - z) * s;
}

TEST(FakeQuantize, EqualsQuantizeThenDequantizeInEveryLayout) {
  Rng rng(3);
  const QuantParams act = make_quant_params(-0.7, 1.9, 8, /*symmetric=*/false, /*is_signed=*/false);
  for (MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
    const Tensor x = random_tensor({2, 3, 4, 5}, rng, DType::f32, fmt, -1.5, 2.5);  // some values clip
    const Tensor y = fake_quantize(x, act);
    EXPECT_EQ(y.strides(), x.strides());
    const Tensor want = dequantize(quantize(x, act), act);
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_EQ(y.at_flat(i), want.at_flat(i)) << "element " << i;
  }
  // Per output channel (weights), 4 bits: every value on its channel's grid.
  const Tensor w = random_tensor({6, 3, 3, 3}, rng);
  const QuantParams wp = int8_weight_params(w, 4, true);
  ASSERT_EQ(wp.channels(), 6);
  const Tensor wq = fake_quantize(w, wp);
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = i / 27;
    ASSERT_FLOAT_EQ(wq.at_flat(i), fq_double(w.at_flat(i), wp.scale[c], 0, -7, 7)) << "element " << i;
  }
}

/// Bit for bit: element i of `got` is dequantize_value(quantize_value(x[i], s, z), s, z) (the
/// scalar definitions of quant_params.h) with channel c = i / inner's parameters.
void expect_fake_quant_bits(const Tensor& x, const Tensor& got, const QuantParams& p, int64_t inner) {
  const float* xv = x.data<float>();
  const float* gv = got.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const size_t c = p.per_channel() ? static_cast<size_t>(i / inner) : 0;
    const float want =
        dequantize_value(quantize_value(xv[i], p.scale[c], p.zero_point[c], p.qmin(), p.qmax()), p.scale[c],
                         p.zero_point[c]);
    ASSERT_EQ(std::memcmp(&gv[i], &want, sizeof(float)), 0)
        << "element " << i << ": x = " << xv[i] << " gives " << gv[i] << ", the definition " << want;
  }
}

TEST(FakeQuantize, ParallelKernelEqualsTheScalarDefinitionBitForBit) {
  // Large enough for several 16 Ki chunks (per tensor) and chunks inside a channel (per channel),
  // with the values where another rounding or clamp would differ: exact ties (k + 0.5) * s (round
  // half to even; scales of a few bits such as 3/128 make the ties representable in f32), values
  // outside the grid, NaN (-> qmin), infinities, signed zeros.
  Rng rng(9);
  QuantParams act;
  act.scale = {3.0f / 128};
  act.zero_point = {100};
  act.symmetric = false;
  act.is_signed = false;
  Tensor x = random_tensor({3, 20000}, rng, DType::f32, MemoryFormat::contiguous, -4.0, 5.0);
  float* xv = x.data<float>();
  const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e30f, -1e30f};
  for (int64_t i = 0; i < 7; ++i)
    xv[i * 9001] = special[i];
  for (int64_t k = 0; k < 400; ++k)  // ties of the grid, inside and outside [qmin, qmax]
    xv[100 + k * 97] = static_cast<float>((static_cast<double>(k) - 200 + 0.5) * act.scale[0]);
  const Tensor y = fake_quantize(x, act);
  expect_fake_quant_bits(x, y, act, x.numel());

  // Per output channel, 4 and 8 bits, channels of 20,000 values (two chunks each).
  for (int bits : {4, 8}) {
    QuantParams wp;
    wp.scale = {3.0f / 128, 5.0f / 64, 7.0f / 256};
    wp.zero_point = {0, 0, 0};
    wp.axis = 0;
    wp.bits = bits;
    Tensor w = random_tensor({3, 20000}, rng, DType::f32, MemoryFormat::contiguous, -1.5, 1.5);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t k = 0; k < 100; ++k)  // ties of each channel's grid
        w.data<float>()[c * 20000 + k * 197] = static_cast<float>((static_cast<double>(k) - 50 + 0.5) * wp.scale[c]);
    w.data<float>()[20001] = -0.0f;
    const Tensor wq = fake_quantize(w, wp);
    expect_fake_quant_bits(w, wq, wp, 20000);
    // In place (dst = src) as well.
    Tensor inplace = w.contiguous_copy();
    fake_quantize(inplace, wp, inplace);
    expect_fake_quant_bits(w, inplace, wp, 20000);
  }
}

TEST(FakeQuantize, SteMaskZeroesExactlyTheClippedValues) {
  // u8, scale 0.1, zero point 10: integers 0..255 cover [-1.0, 24.5]. Rounding decides the edges:
  // -1.04 -> round(-10.4) + 10 = 0 (kept), -1.06 -> -1 (clipped), 24.54 -> 255 (kept), 24.56 -> 256.
  QuantParams p;
  p.scale = {0.1f};
  p.zero_point = {10};
  p.symmetric = false;
  p.is_signed = false;
  Tensor x = Tensor::empty({6}, DType::f32);
  const float xs[6] = {-1.04f, -1.06f, 24.54f, 24.56f, 0.0f, -50.0f};
  const float keep[6] = {1, 0, 1, 0, 1, 0};
  for (int i = 0; i < 6; ++i)
    x.data<float>()[i] = xs[i];
  Tensor g = Tensor::empty({6}, DType::f32);
  g.fill(2.5);
  fake_quantize_ste_mask(x, p, g);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(g.data<float>()[i], 2.5f * keep[i]) << "x = " << xs[i];
  // Malformed: per-channel activation parameters, mismatched gradient.
  Tensor g2 = Tensor::empty({5}, DType::f32);
  EXPECT_THROW(fake_quantize_ste_mask(x, p, g2), Error);
  Rng rng(1);
  const QuantParams per_channel = int8_weight_params(random_tensor({3, 2}, rng), 8, true);
  EXPECT_THROW(FakeQuantOperands(per_channel, 8, true), Error);
}

/// Linear with fake-quantized operands: y = fq(x) fq(W)^T + b; dW = dy^T fq(x); db = sum dy;
/// dx = (dy fq(W)) * [x not clipped]. Computed here in double from the formulas.
template <class BackendT>
void check_linear_ste() {
  BackendT be;
  Rng rng(11);
  const int64_t N = 5, K = 7, O = 4;
  Linear lin(K, O);
  lin.create_params(be, DType::f32, rng);
  const QuantParams act = make_quant_params(-0.5, 0.8, 8, false, false);
  lin.set_operand_transform(std::make_shared<FakeQuantOperands>(act, 8, true));
  Tensor x = random_tensor({N, K}, rng, DType::f32, MemoryFormat::contiguous, -0.9, 1.2);  // ~30% clipped
  Tensor y = Tensor::empty({N, O}, DType::f32);
  LayerContext ctx{be, true, 0};
  lin.forward(ctx, {&x}, y);
  const Tensor dy = random_tensor({N, O}, rng);
  Tensor dx = Tensor::empty({N, K}, DType::f32);
  lin.backward(ctx, {&x}, y, dy, {&dx});

  const std::vector<Param*> ps = lin.params();
  const Tensor& W = ps[0]->value;
  const QuantParams wp = int8_weight_params(W, 8, true);
  auto fqx = [&](int64_t n, int64_t k) { return fq_double(x.get({n, k}), act.scale[0], act.zero_point[0], 0, 255); };
  auto fqw = [&](int64_t o, int64_t k) { return fq_double(W.get({o, k}), wp.scale[o], 0, -127, 127); };
  int clipped = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double acc = ps[1]->value.get({o});
      for (int64_t k = 0; k < K; ++k)
        acc += fqx(n, k) * fqw(o, k);
      EXPECT_NEAR(y.get({n, o}), acc, 1e-5) << "y " << n << "," << o;
    }
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < K; ++k) {
      double g = 0;
      for (int64_t n = 0; n < N; ++n)
        g += dy.get({n, o}) * fqx(n, k);
      EXPECT_NEAR(ps[0]->grad.get({o, k}), g, 1e-5) << "dW " << o << "," << k;
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const double q = std::nearbyint(x.get({n, k}) / act.scale[0]) + act.zero_point[0];
      const bool inside = q >= 0 && q <= 255;
      clipped += !inside;
      double g = 0;
      for (int64_t o = 0; o < O; ++o)
        g += dy.get({n, o}) * fqw(o, k);
      EXPECT_NEAR(dx.get({n, k}), inside ? g : 0.0, 1e-5) << "dx " << n << "," << k;
    }
  EXPECT_GT(clipped, 0) << "the case must clip some inputs";
  EXPECT_LT(clipped, N * K);
}

TEST(FakeQuantLinear, StraightThroughGradientsOnTheReferenceBackend) { check_linear_ste<ReferenceBackend>(); }
TEST(FakeQuantLinear, StraightThroughGradientsOnOneDnn) { check_linear_ste<DnnlBackend>(); }

TEST(FakeQuantConv, EqualsThePlainConvOnFakeQuantizedOperands) {
  DnnlBackend be;
  Rng rng(5);
  Conv2d fq_conv(3, 4, 3, 1, 1), plain(3, 4, 3, 1, 1);
  fq_conv.create_params(be, DType::f32, rng);
  plain.create_params(be, DType::f32, rng);
  const QuantParams act = make_quant_params(0.0, 0.9, 8, false, false);
  fq_conv.set_operand_transform(std::make_shared<FakeQuantOperands>(act, 8, true));
  // The plain conv gets fq(W) as its weights and fq(x) as its input.
  Param* wq = fq_conv.params()[0];
  const Tensor fw = fake_quantize(wq->value, int8_weight_params(wq->value, 8, true));
  fw.copy_to(plain.params()[0]->value);
  fq_conv.params()[1]->value.copy_to(plain.params()[1]->value);
  const Tensor x = random_tensor({2, 3, 6, 6}, rng, DType::f32, be.preferred_conv_format(), -0.3, 1.1);
  const Tensor fx = fake_quantize(x, act);
  const Shape out{2, 4, 6, 6};
  Tensor y1 = Tensor::empty(out, DType::f32, Device::cpu(), be.preferred_conv_format());
  Tensor y2 = Tensor::empty(out, DType::f32, Device::cpu(), be.preferred_conv_format());
  LayerContext ctx{be, true, 0};
  fq_conv.forward(ctx, {&x}, y1);
  plain.forward(ctx, {&fx}, y2);
  EXPECT_TRUE(all_close(y1, y2, 0, 0));
  const Tensor dy = random_tensor(out, rng, DType::f32, be.preferred_conv_format());
  Tensor dx1 = Tensor::empty(x.shape(), DType::f32, Device::cpu(), x.format());
  Tensor dx2 = Tensor::empty(x.shape(), DType::f32, Device::cpu(), x.format());
  fq_conv.backward(ctx, {&x}, y1, dy, {&dx1});
  plain.backward(ctx, {&fx}, y2, dy, {&dx2});
  EXPECT_TRUE(all_close(fq_conv.params()[0]->grad, plain.params()[0]->grad, 0, 0));  // STE: grad at fq(W)
  fake_quantize_ste_mask(x, act, dx2);
  EXPECT_TRUE(all_close(dx1, dx2, 0, 0));
  // Taking the transform off gives the plain f32 layer back.
  EXPECT_TRUE(fq_conv.set_operand_transform(nullptr));
  Tensor y3 = Tensor::empty(out, DType::f32, Device::cpu(), be.preferred_conv_format());
  fq_conv.forward(ctx, {&x}, y3);
  EXPECT_FALSE(all_close(y3, y1, 0, 0));
}

TEST(Qat, FakeQuantizedModelSimulatesTheInt8Executor) {
  DnnlBackend be;
  auto m = test::small_cnn(be, 21);
  const Dataset calib = test::random_images(96, 12, 8), data = test::random_images(48, 12, 9);
  Int8Model plan(*m, be, test::calibrate_minmax(*m, be, calib));
  const Tensor x = test::images_of(data);
  const Tensor q = plan.forward(x);
  LayerContext ctx{be, false, 0};
  const Tensor f32 = m->forward(ctx, x).contiguous_copy();

  ASSERT_EQ(attach_fake_quant(*m, plan), 4);
  const Tensor fq = m->forward(ctx, x).contiguous_copy();
  double d_fq = 0, d_f32 = 0;
  for (int64_t i = 0; i < q.numel(); ++i) {
    d_fq = std::max(d_fq, std::fabs(fq.at_flat(i) - q.at_flat(i)));
    d_f32 = std::max(d_f32, std::fabs(f32.at_flat(i) - q.at_flat(i)));
  }
  // The simulation differs from the executor only where float accumulation order flips a rounding;
  // the f32 model differs by the whole quantization error.
  EXPECT_LT(d_fq, 0.2 * d_f32) << "fake-quant vs int8 " << d_fq << ", f32 vs int8 " << d_f32;

  detach_fake_quant(*m);
  EXPECT_TRUE(all_close(m->forward(ctx, x).contiguous_copy(), f32, 0, 0));
}

}  // namespace
}  // namespace lathe
