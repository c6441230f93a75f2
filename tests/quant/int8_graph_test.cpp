// INT8 of BatchNorm and residual graphs: the BatchNorm fold against conv + BatchNorm, and a tiny
// pre-activation residual graph's INT8 plan against a fake-quantized reference written here in
// double (plain loops, the quantization points the plan documents), on the reference backend and
// oneDNN; its closeness to the f32 model; the taps and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/compress/quant/int8_graph.h"
#include "engine/nn/add.h"
#include "engine/nn/batchnorm2d.h"
#include "tests/quant/int8_test_models.h"

namespace lathe {
namespace {

using test::calibrate_minmax;
using test::images_of;
using test::random_images;
using test::randomize_batchnorms;
using test::residual_graph;

TEST(BatchNormFold, FoldedConvEqualsConvThenBatchNorm) {
  for (bool bias : {true, false}) {
    ReferenceBackend be;
    Model m(Shape{3, 9, 9});
    m.add("conv", std::make_unique<Conv2d>(3, 5, 3, 1, 1, bias));
    m.add("bn", std::make_unique<BatchNorm2d>(5));
    Rng rng(3);
    m.create_params(be, DType::f32, rng);
    randomize_batchnorms(m, 4);
    Model folded(Shape{3, 9, 9});
    folded.add("conv", std::make_unique<Conv2d>(3, 5, 3, 1, 1, true));
    folded.create_params(be, DType::f32, rng);
    Conv2d& conv = static_cast<Conv2d&>(m.layer(0));
    BatchNorm2d& bn = static_cast<BatchNorm2d&>(m.layer(1));
    const std::vector<Param*> cp = conv.params(), bp = bn.params();
    const std::vector<Buffer*> bb = bn.buffers();
    const FoldedConv f = fold_batchnorm(cp[0]->value, bias ? &cp[1]->value : nullptr, bp[0]->value, bp[1]->value,
                                        bb[0]->value, bb[1]->value, bn.bn_params().eps);
    f.weight.copy_to(folded.layer(0).params()[0]->value);
    f.bias.copy_to(folded.layer(0).params()[1]->value);
    const Tensor x = test::random_tensor({4, 3, 9, 9}, rng);
    LayerContext ctx{be, false, 0};
    const Tensor want = m.forward(ctx, x);
    const Tensor got = folded.forward(ctx, x);
    double max_rel = 0, scale = 0;
    for (int64_t i = 0; i < want.numel(); ++i)
      scale = std::max(scale, std::fabs(want.at_flat(i)));
    for (int64_t i = 0; i < want.numel(); ++i)
      max_rel = std::max(max_rel, std::fabs(got.at_flat(i) - want.at_flat(i)) / scale);
    EXPECT_LT(max_rel, 1e-5) << "bias " << bias;
    EXPECT_GT(scale, 0.1);
  }
  ReferenceBackend be;
  const Tensor w = Tensor::zeros({4, 2, 3, 3}, DType::f32), v = Tensor::zeros({3}, DType::f32);
  EXPECT_THROW(fold_batchnorm(w, nullptr, v, v, v, v, 1e-5), Error);  // per-channel tensors of the wrong size
}

// ---- the fake-quantized reference, in double, one image [C][H][W] at a time ----
using Vec = std::vector<double>;

double fq(double v, const QuantParams& p) {
  const double q = std::clamp(std::nearbyint(v / p.scale[0]) + p.zero_point[0], double(p.qmin()), double(p.qmax()));
  return (q - p.zero_point[0]) * p.scale[0];
}
Vec fq(Vec v, const QuantParams& p) {
  for (double& x : v)
    x = fq(x, p);
  return v;
}
Vec relu(Vec v) {
  for (double& x : v)
    x = std::max(x, 0.0);
  return v;
}

/// 3x3 conv, padding 1, C -> O, weights s8 x scale[o] (the saved INT8 tensors), f32 bias.
Vec conv3(const Vec& x, int64_t C, int64_t H, const std::map<std::string, Tensor>& t, const std::string& n) {
  const Tensor &w = t.at(n + ".weight"), &ws = t.at(n + ".weight_scale"), &b = t.at(n + ".bias");
  const int64_t O = w.dim(0);
  Vec y(O * H * H);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t q = 0; q < H; ++q) {
        double acc = b.at_flat(o);
        for (int64_t c = 0; c < C; ++c)
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              const int64_t ih = h - 1 + kh, iw = q - 1 + kw;
              if (ih >= 0 && ih < H && iw >= 0 && iw < H)
                acc += x[(c * H + ih) * H + iw] * w.get({o, c, kh, kw}) * ws.at_flat(o);
            }
        y[(o * H + h) * H + q] = acc;
      }
  return y;
}

/// Evaluation-mode BatchNorm from the f32 model's parameters and statistics.
Vec batchnorm(Vec x, Model& m, const std::string& n, int64_t HW) {
  auto& bn = static_cast<BatchNorm2d&>(m.layer(m.find(n)));
  const Tensor &g = bn.params()[0]->value, &b = bn.params()[1]->value;
  const Tensor &mean = bn.buffers()[0]->value, &var = bn.buffers()[1]->value;
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t c = static_cast<int64_t>(i) / HW;
    x[i] = (x[i] - mean.at_flat(c)) / std::sqrt(var.at_flat(c) + bn.bn_params().eps) * g.at_flat(c) + b.at_flat(c);
  }
  return x;
}

Vec simulate(const Vec& img, Model& m, const ActivationParams& a, const std::map<std::string, Tensor>& t) {
  const Vec x = fq(img, a.at("input"));
  const Vec stem = fq(conv3(x, 1, 8, t, "stem"), a.at("stem"));        // INT8 conv, output quantized
  const Vec r1 = fq(relu(batchnorm(stem, m, "bn1", 64)), a.at("r1"));  // f32 BatchNorm, quantized for c1
  const Vec r2 = fq(relu(conv3(r1, 4, 8, t, "c1")), a.at("r2"));       // bn2 folded into c1, ReLU fused
  const Vec c2 = fq(conv3(r2, 4, 8, t, "c2"), a.at("c2"));
  Vec sum(c2.size());
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] = stem[i] + c2[i];
  const Vec r3 = relu(batchnorm(fq(sum, a.at("add")), m, "bn", 64));  // dequantize-add-quantize, f32 bn
  Vec pooled(4 * 16);
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t w = 0; w < 4; ++w) {
        double v = -1e30;
        for (int64_t dh = 0; dh < 2; ++dh)
          for (int64_t dw = 0; dw < 2; ++dw)
            v = std::max(v, r3[(c * 8 + 2 * h + dh) * 8 + 2 * w + dw]);
        pooled[(c * 4 + h) * 4 + w] = v;
      }
  const Vec flat = fq(pooled, a.at("flat"));
  const Tensor &w = t.at("fc.weight"), &ws = t.at("fc.weight_scale"), &b = t.at("fc.bias");
  Vec logits(10);
  for (int64_t o = 0; o < 10; ++o) {
    double acc = b.at_flat(o);
    for (int64_t k = 0; k < 64; ++k)
      acc += flat[k] * w.get({o, k}) * ws.at_flat(o);
    logits[o] = acc;
  }
  return logits;
}

template <typename B>
void check_residual_graph_against_reference() {
  B be;
  auto m = residual_graph(be, 11);
  const Dataset calib = random_images(64, 8, 12), test = random_images(24, 8, 13);
  const ActivationParams acts = calibrate_minmax(*m, be, calib);
  Int8Model q(*m, be, acts);
  EXPECT_EQ(q.int8_layers(), 4) << q.plan();  // stem, c1 (+bn2), c2, fc
  const std::string plan = q.plan();
  EXPECT_NE(plan.find("+bn2 (folded)+relu 'c1'"), std::string::npos) << plan;
  EXPECT_NE(plan.find("int8 add 'add' (dequantize-add-quantize)"), std::string::npos) << plan;
  EXPECT_NE(plan.find("f32 batchnorm2d(4) 'bn1'"), std::string::npos) << plan;
  const Tensor x = images_of(test);
  const Tensor y = q.forward(x);
  ASSERT_EQ(y.shape(), (Shape{24, 10}));
  std::map<std::string, Tensor> t;
  for (const auto& [name, tensor] : q.state_tensors())
    t[name] = tensor;
  EXPECT_EQ(t.at("c1.weight").dtype(), DType::s8);
  double max_diff = 0, max_logit = 0;
  for (int64_t n = 0; n < 24; ++n) {
    Vec img(64);
    for (int64_t i = 0; i < 64; ++i)
      img[i] = x.get({n, 0, i / 8, i % 8});
    const Vec want = simulate(img, *m, acts, t);
    for (int64_t k = 0; k < 10; ++k) {
      max_diff = std::max(max_diff, std::fabs(y.get({n, k}) - want[k]));
      max_logit = std::max(max_logit, std::fabs(want[k]));
    }
  }
  // A rounding tie decided differently in float and double moves one activation by 1 LSB now and
  // then; a wrong fold, scale or zero point moves the logits by far more.
  EXPECT_LT(max_diff, 0.02 * max_logit) << plan;
  EXPECT_GT(max_logit, 0.1);

  // and the INT8 model stays close to the f32 one
  LayerContext ctx{be, false, 0};
  const Tensor f = m->forward(ctx, x);
  double err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    err2 += (y.at_flat(i) - f.at_flat(i)) * (y.at_flat(i) - f.at_flat(i));
    ref2 += f.at_flat(i) * f.at_flat(i);
  }
  EXPECT_LT(std::sqrt(err2 / ref2), 0.1) << plan;
  EXPECT_GT(std::sqrt(err2 / ref2), 0.0);
}

TEST(Int8Graph, ResidualBatchNormGraphMatchesFakeQuantReferenceOnReferenceBackend) {
  check_residual_graph_against_reference<ReferenceBackend>();
}
TEST(Int8Graph, ResidualBatchNormGraphMatchesFakeQuantReferenceOnOneDnn) {
  check_residual_graph_against_reference<DnnlBackend>();
}

TEST(Int8Graph, TapsAndRefusals) {
  ReferenceBackend be;
  auto m = residual_graph(be, 21);
  const std::vector<std::string> taps = int8_activation_taps(*m);
  for (const char* want : {"input", "stem", "bn1", "r1", "bn2", "r2", "c2", "add", "bn", "r3", "pool", "flat"})
    EXPECT_NE(std::find(taps.begin(), taps.end(), want), taps.end()) << want;
  EXPECT_EQ(std::find(taps.begin(), taps.end(), "fc"), taps.end()) << "the logits are never quantized";
  Int8ModelOptions dynamic;
  dynamic.dynamic_activations = true;
  EXPECT_THROW(Int8Model(*m, be, {}, dynamic), ConfigError);
  EXPECT_THROW(Int8Model(*m, be, {}), Error);  // no calibrated ranges
  // keep_f32 on a folded conv: it runs in f32 with its BatchNorm after it, the rest stays INT8
  const Dataset calib = random_images(32, 8, 22), test = random_images(8, 8, 23);
  Int8ModelOptions keep;
  keep.keep_f32 = {"c1"};
  Int8Model q(*m, be, calibrate_minmax(*m, be, calib), keep);
  EXPECT_EQ(q.int8_layers(), 3) << q.plan();
  EXPECT_EQ(q.f32_layers(), 1) << q.plan();
  EXPECT_NE(q.plan().find("f32 batchnorm2d(4) 'bn2'"), std::string::npos) << q.plan();
  EXPECT_EQ(q.forward(images_of(test)).shape(), (Shape{8, 10}));
}

// A ReLU on a value a dropout passes through while the dropout's input also feeds an Add: the ReLU
// must not clamp the shared integers in place (the Add would read them clamped). Dropout is the
// identity at inference, so the graph without it gives the same INT8 logits.
TEST(Int8Graph, ReluAfterDropoutLeavesTheSharedValueAlone) {
  auto build = [](Backend& be, bool dropout) {
    auto m = std::make_unique<Model>(Shape{1, 6, 6});
    m->add("c", std::make_unique<Conv2d>(1, 3, 3, 1, 1));
    if (dropout)
      m->add("d", std::make_unique<Dropout>(0.5, 1));
    m->add("r", std::make_unique<ReLU>());
    m->add("a", std::make_unique<Add>(), {"c", "r"});
    m->add("f", std::make_unique<Flatten>());
    m->add("fc", std::make_unique<Linear>(3 * 6 * 6, 10));
    Rng rng(51);
    m->create_params(be, DType::f32, rng);
    return m;
  };
  ReferenceBackend be;
  auto with = build(be, true), without = build(be, false);
  const Dataset calib = random_images(32, 6, 52);
  const Tensor x = images_of(random_images(8, 6, 53));
  Int8Model qa(*with, be, calibrate_minmax(*with, be, calib)), qb(*without, be, calibrate_minmax(*without, be, calib));
  EXPECT_EQ(test::mismatches(qa.forward(x), qb.forward(x)), 0) << qa.plan() << "\nvs\n" << qb.plan();
}

}  // namespace
}  // namespace lathe
