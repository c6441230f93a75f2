// Dynamic INT8 (quant.mode ptq-dynamic): each layer's input range comes from the batch. Checked
// against a double-precision simulation written here from the formulas, for scale invariance that
// a calibrated (static) model cannot have, and against the f32 cnn.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/compress/quant/int8_layer.h"
#include "tests/quant/int8_test_models.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

std::unique_ptr<Model> small_mlp(Backend& be, bool bias, uint64_t seed) {
  auto m = std::make_unique<Model>(Shape{16});
  m->add("0", std::make_unique<Linear>(16, 12, bias));
  m->add("1", std::make_unique<ReLU>());
  m->add("2", std::make_unique<Linear>(12, 5, bias));
  Rng rng(seed);
  m->create_params(be, DType::f32, rng);
  return m;
}

Int8ModelOptions dynamic_options() {
  Int8ModelOptions o;
  o.dynamic_activations = true;
  return o;
}

/// One dynamic layer in double: s = max|x| / qmax over the batch, q = round(x / s) clamped,
/// y = s s_w[o] sum q q_w + b, then ReLU.
std::vector<double> sim_layer(const std::vector<double>& x, int64_t N, int64_t K, const Tensor& W, const Tensor* b,
                              bool relu, bool is_signed) {
  const int64_t O = W.dim(0);
  const int bits = effective_weight_bits(8);
  const QuantParams wp = int8_weight_params(W, bits, true);
  const Tensor wq = quantize(W, wp);
  double mx = 0;
  for (double v : x)
    mx = std::max(mx, std::fabs(v));
  const double qmax = is_signed ? 127 : 255, s = mx > 0 ? mx / qmax : 1;
  std::vector<double> y(N * O);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double q = std::clamp(std::nearbyint(x[n * K + k] / s), is_signed ? -127.0 : 0.0, qmax);
        acc += q * wq.at_flat(o * K + k);
      }
      double v = s * wp.scale[o] * acc + (b ? b->at_flat(o) : 0.0);
      y[n * O + o] = relu ? std::max(v, 0.0) : v;
    }
  return y;
}

TEST(Int8Dynamic, MatchesADoubleSimulationOfPerBatchRanges) {
  DnnlBackend be;
  auto m = small_mlp(be, true, 3);
  Int8Model q(*m, be, {}, dynamic_options());
  EXPECT_EQ(q.int8_layers(), 2);
  EXPECT_NE(q.plan().find("quantize per batch f32 -> s8"), std::string::npos) << q.plan();
  EXPECT_NE(q.plan().find("quantize per batch f32 -> u8"), std::string::npos) << q.plan();  // after the ReLU
  Rng rng(9);
  const int64_t N = 6;
  const Tensor x = test::random_tensor({N, 16}, rng, DType::f32, MemoryFormat::contiguous, -2, 3);
  const Tensor y = q.forward(x);
  std::vector<double> xs(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i)
    xs[i] = x.at_flat(i);
  auto p0 = m->layer(0).params(), p2 = m->layer(2).params();
  const std::vector<double> h = sim_layer(xs, N, 16, p0[0]->value, &p0[1]->value, true, true);
  const std::vector<double> want = sim_layer(h, N, 12, p2[0]->value, &p2[1]->value, false, false);
  double max_abs = 0;
  for (double v : want)
    max_abs = std::max(max_abs, std::fabs(v));
  for (int64_t i = 0; i < y.numel(); ++i)
    EXPECT_NEAR(y.at_flat(i), want[i], 1e-4 * max_abs) << "element " << i;
}

TEST(Int8Dynamic, FollowsTheBatchScaleWhereCalibratedRangesSaturate) {
  // Without biases the mlp is positively homogeneous: f(4x) = 4 f(x). Dynamic ranges scale with the
  // batch by exactly 4 (a power of two), so the integers and the result are the same up to that
  // factor; ranges calibrated on x clip 4x.
  DnnlBackend be;
  auto m = small_mlp(be, false, 5);
  Rng rng(2);
  const Tensor x = test::random_tensor({8, 16}, rng, DType::f32, MemoryFormat::contiguous, -1, 1);
  Tensor x4 = x.contiguous_copy();
  for (int64_t i = 0; i < x4.numel(); ++i)
    x4.set_flat(i, 4 * x.at_flat(i));
  Int8Model dyn(*m, be, {}, dynamic_options());
  const Tensor y = dyn.forward(x), y4 = dyn.forward(x4);
  for (int64_t i = 0; i < y.numel(); ++i)
    EXPECT_FLOAT_EQ(y4.at_flat(i), 4 * y.at_flat(i)) << "element " << i;

  ActivationParams acts;
  acts[kInputTap] = make_quant_params(-1, 1, 8, false, false);
  LayerContext ctx{be, false, 0};
  m->forward(ctx, x);
  double hmax = 0;
  const Tensor& h = m->activation("1");
  for (int64_t i = 0; i < h.numel(); ++i)
    hmax = std::max(hmax, h.at_flat(i));
  acts["1"] = make_quant_params(0, hmax, 8, false, false);
  Int8Model stat(*m, be, acts);
  const Tensor s1 = stat.forward(x), s4 = stat.forward(x4);
  double worst = 0;
  for (int64_t i = 0; i < s1.numel(); ++i)
    worst = std::max(worst, std::fabs(s4.at_flat(i) - 4 * s1.at_flat(i)));
  EXPECT_GT(worst, 0.1) << "the static model should clip 4x its calibration range";
}

TEST(Int8Dynamic, CnnStaysCloseToF32AndSavesNoInputScales) {
  DnnlBackend be;
  auto m = test::small_cnn(be, 11);
  Int8Model q(*m, be, {}, dynamic_options());
  EXPECT_EQ(q.int8_layers(), 4);
  const Tensor x = test::images_of(test::random_images(32, 12, 6));
  const Tensor y = q.forward(x);
  LayerContext ctx{be, false, 0};
  const Tensor f = m->forward(ctx, x).contiguous_copy();
  double err = 0, mag = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    err = std::max(err, std::fabs(y.at_flat(i) - f.at_flat(i)));
    mag = std::max(mag, std::fabs(f.at_flat(i)));
  }
  EXPECT_LT(err, 0.05 * mag) << q.plan();
  EXPECT_GT(err, 0.0);  // it really ran on integers
  for (const auto& [name, t] : q.state_tensors())
    EXPECT_EQ(name.find("input_scale"), std::string::npos) << name;
}

}  // namespace
}  // namespace lathe
