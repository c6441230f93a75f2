// Central-difference gradient checks in double precision for every layer, the loss and a whole
// model graph with a residual branch (a node feeding two consumers). Points within a kink (ReLU at
// 0, max-pool ties) are detected by disagreeing one-sided differences and skipped, as in Caffe.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/nn/add.h"
#include "engine/nn/batchnorm2d.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/maxpool2d.h"
#include "engine/nn/model.h"
#include "engine/nn/relu.h"
#include "engine/nn/zoo.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

constexpr double kEps = 1e-6;

struct CheckStats {
  int checked = 0, skipped = 0;
};

/// Checks d(loss)/d(t) for sampled elements of t: `loss` recomputes the scalar, `analytic` holds the gradient.
void check_tensor(Tensor& t, const Tensor& analytic, const std::function<double()>& loss, Rng& rng,
                  const std::string& what, CheckStats& stats, int samples = 40) {
  const int64_t n = t.numel();
  const int64_t count = std::min<int64_t>(n, samples);  // every element of small tensors, else a sample
  for (int64_t s = 0; s < count; ++s) {
    const int64_t i = n <= samples ? s : static_cast<int64_t>(rng.below(n));
    const double x0 = t.at_flat(i);
    t.set_flat(i, x0 + kEps);
    const double fp = loss();
    t.set_flat(i, x0 - kEps);
    const double fm = loss();
    t.set_flat(i, x0);
    const double f0 = loss();
    const double fwd = (fp - f0) / kEps, bwd = (f0 - fm) / kEps;
    if (std::fabs(fwd - bwd) > 1e-3 * (1 + std::fabs(fwd))) {  // a kink within eps: skip
      ++stats.skipped;
      continue;
    }
    const double numeric = (fp - fm) / (2 * kEps);
    const double a = analytic.at_flat(i);
    ASSERT_NEAR(a, numeric, 1e-6 + 1e-5 * std::fabs(numeric)) << what << " element " << i;
    ++stats.checked;
  }
}

/// Gradient check of one layer on the given input shapes.
CheckStats check_layer(Layer& layer, const std::vector<Shape>& in_shapes, bool training = true, uint64_t seed = 7) {
  ReferenceBackend be;
  Rng rng(seed);
  layer.create_params(be, DType::f64, rng);
  std::vector<Tensor> inputs;
  for (const Shape& s : in_shapes)
    inputs.push_back(test::random_tensor(s, rng, DType::f64));
  std::vector<const Tensor*> srcs;
  for (Tensor& t : inputs)
    srcs.push_back(&t);
  const Shape out_shape = layer.output_shape(in_shapes);
  Tensor dst = Tensor::empty(out_shape, DType::f64);
  Tensor r = test::random_tensor(out_shape, rng, DType::f64);  // loss = sum(r * y)
  LayerContext ctx{be, training, 3};

  auto loss = [&]() {
    layer.forward(ctx, srcs, dst);
    double l = 0;
    for (int64_t i = 0; i < dst.numel(); ++i)
      l += r.at_flat(i) * dst.at_flat(i);
    return l;
  };
  loss();
  std::vector<Tensor> diffs;
  std::vector<Tensor*> diff_ptrs;
  for (const Shape& s : in_shapes)
    diffs.push_back(Tensor::zeros(s, DType::f64));
  for (Tensor& d : diffs)
    diff_ptrs.push_back(&d);
  layer.backward(ctx, srcs, dst, r, diff_ptrs);
  // Snapshot the analytic gradients: the numeric passes below rerun forward.
  std::vector<Tensor> param_grads;
  for (Param* p : layer.params())
    param_grads.push_back(p->grad.contiguous_copy());

  CheckStats stats;
  for (size_t k = 0; k < inputs.size(); ++k)
    check_tensor(inputs[k], diffs[k], loss, rng, "input " + std::to_string(k), stats);
  auto ps = layer.params();
  for (size_t k = 0; k < ps.size(); ++k)
    check_tensor(ps[k]->value, param_grads[k], loss, rng, ps[k]->name, stats);
  return stats;
}

TEST(GradientCheck, Linear) {
  Linear l(13, 7);
  const CheckStats s = check_layer(l, {{5, 13}});
  EXPECT_EQ(s.checked, 40 + 40 + 7);
  EXPECT_EQ(s.skipped, 0);
}

TEST(GradientCheck, LinearWithoutBias) {
  Linear l(6, 4, false);
  EXPECT_GT(check_layer(l, {{3, 6}}).checked, 40);
}

TEST(GradientCheck, Conv2dPaddedStrided) {
  Conv2d c(3, 4, 3, 2, 1);
  const CheckStats s = check_layer(c, {{2, 3, 7, 6}});
  EXPECT_EQ(s.checked, 40 + 40 + 4);
  Conv2d c1(2, 3, 1);
  EXPECT_EQ(check_layer(c1, {{2, 2, 4, 5}}).checked, 40 + 6 + 3);
}

TEST(GradientCheck, ReLU) {
  ReLU r;
  const CheckStats s = check_layer(r, {{4, 3, 5, 5}});
  EXPECT_GT(s.checked, 30);
}

TEST(GradientCheck, MaxPool) {
  MaxPool2d p(2);
  EXPECT_GT(check_layer(p, {{2, 3, 6, 6}}).checked, 30);
  MaxPool2d q(3, 2, 1);
  EXPECT_GT(check_layer(q, {{2, 2, 7, 7}}).checked, 30);
}

TEST(GradientCheck, Flatten) {
  Flatten f;
  EXPECT_GT(check_layer(f, {{2, 3, 4, 5}}).checked, 30);
}

TEST(GradientCheck, Add) {
  Add a;
  EXPECT_GT(check_layer(a, {{3, 4}, {3, 4}}).checked, 20);
}

TEST(GradientCheck, BatchNormTraining) {
  BatchNorm2d bn(3);
  EXPECT_EQ(check_layer(bn, {{4, 3, 3, 3}}, true).checked, 40 + 3 + 3);
}

TEST(GradientCheck, BatchNormBackwardInEvalModeIsRejected) {
  BatchNorm2d bn(3);
  EXPECT_THROW(check_layer(bn, {{4, 3, 3, 3}}, false), Error);
}

TEST(GradientCheck, Dropout) {
  Dropout d(0.3, 11);
  EXPECT_GT(check_layer(d, {{6, 10}}).checked, 30);
}

TEST(GradientCheck, SoftmaxCrossEntropy) {
  ReferenceBackend be;
  Rng rng(5);
  Tensor logits = test::random_tensor({6, 5}, rng, DType::f64, MemoryFormat::contiguous, -3, 3);
  Tensor labels = Tensor::empty({6}, DType::s32);
  for (int i = 0; i < 6; ++i)
    labels.set({i}, static_cast<double>(rng.below(5)));
  Tensor grad = Tensor::empty({6, 5}, DType::f64);
  be.softmax_cross_entropy(logits, labels, &grad, 1.0 / 6);
  auto loss = [&]() { return be.softmax_cross_entropy(logits, labels, nullptr, 1).loss_sum / 6; };
  CheckStats s;
  check_tensor(logits, grad, loss, rng, "logits", s, 30);
  EXPECT_EQ(s.checked, 30);
}

TEST(GradientCheck, WholeModelWithResidualAndBatchNorm) {
  // conv -> bn -> relu -> (conv -> relu) + skip -> flatten -> linear: node "2" feeds two consumers.
  const nlohmann::json layers = nlohmann::json::parse(R"([
    {"type": "conv2d", "out": 3, "kernel": 3, "padding": 1},
    {"type": "batchnorm2d"},
    {"type": "relu"},
    {"type": "conv2d", "out": 3, "kernel": 3, "padding": 1},
    {"type": "relu"},
    {"type": "add", "inputs": ["2", "4"]},
    {"type": "flatten"},
    {"type": "linear", "out": 4}
  ])");
  auto model = build_model_from_layers(layers, {2, 5, 5});
  ReferenceBackend be;
  Rng rng(3);
  model->create_params(be, DType::f64, rng);
  Tensor x = test::random_tensor({3, 2, 5, 5}, rng, DType::f64);
  Tensor labels = Tensor::empty({3}, DType::s32);
  for (int i = 0; i < 3; ++i)
    labels.set({i}, i);
  LayerContext ctx{be, true, 0};
  auto loss = [&]() { return be.softmax_cross_entropy(model->forward(ctx, x), labels, nullptr, 1).loss_sum; };
  loss();
  Tensor diff = Tensor::empty({3, 4}, DType::f64);
  be.softmax_cross_entropy(model->output(), labels, &diff, 1.0);
  model->backward(ctx, diff);
  std::vector<Tensor> grads;
  auto params = model->named_params();
  for (auto& np : params)
    grads.push_back(np.param->grad.contiguous_copy());
  CheckStats s;
  for (size_t k = 0; k < params.size(); ++k)
    check_tensor(params[k].param->value, grads[k], loss, rng, params[k].name, s, 15);
  EXPECT_GT(s.checked, 60);
}

}  // namespace
}  // namespace lathe
