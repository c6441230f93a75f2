// Structured pruning, shape fix-up and the exactness oracle: the smaller model must give EXACTLY the
// outputs of the original model with the removed channels zeroed (reference backend, f64, eval mode),
// for conv -> bn -> relu -> conv, conv -> flatten -> linear, residual Adds, and the mlp and cnn zoo
// models; shapes, parameter counts and FLOPs are checked against counts computed here by hand.
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"
#include "tests/prune/structured_test_models.h"

namespace lathe {
namespace {

using test::eval_forward;
using test::in_channels;
using test::init_model;
using test::out_channels;
using test::zero_removed_channels;

struct OracleCase {
  std::string name;
  std::function<std::unique_ptr<Model>()> build;
  StructuredOptions options;
};

/// Builds the model twice from one seed, prunes one, zeroes the removed channels of the other, and
/// compares their eval outputs. With dyadic values (see init_model_dyadic) they must be equal bit for
/// bit; with random values, to f64 rounding (1e-12: the reference kernels' FMA contraction depends on
/// the summation length), while a wrongly kept or dropped channel changes outputs by ~1e-2.
StructuredPlan check_oracle(const OracleCase& c, bool dyadic, int64_t batch = 3) {
  ReferenceBackend be;
  auto original = c.build();
  auto zeroed = c.build();
  if (dyadic) {
    test::init_model_dyadic(*original, be, 7);
    test::init_model_dyadic(*zeroed, be, 7);
  } else {
    init_model(*original, be, DType::f64, 7);
    init_model(*zeroed, be, DType::f64, 7);
  }
  const StructuredPlan plan = plan_structured(*original, be, c.options);
  auto pruned = build_pruned_model(*original, be, plan);
  zero_removed_channels(*zeroed, be, plan);

  Rng rng(11);
  Shape in_shape = original->input_shape();
  in_shape.insert(in_shape.begin(), batch);
  const Tensor x = dyadic ? test::dyadic_input(in_shape, rng) : test::random_tensor(in_shape, rng, DType::f64);
  const Tensor y_dense = eval_forward(*original, be, x);
  const Tensor y_zeroed = eval_forward(*zeroed, be, x);
  const Tensor y_pruned = eval_forward(*pruned, be, x);

  EXPECT_EQ(y_pruned.shape(), y_zeroed.shape()) << c.name;
  int64_t differ_from_dense = 0;
  for (int64_t i = 0; i < y_zeroed.numel(); ++i) {
    const double p = y_pruned.at_flat(i), z = y_zeroed.at_flat(i);
    if (dyadic)
      EXPECT_EQ(p, z) << c.name << " (dyadic) element " << i;
    else
      EXPECT_NEAR(p, z, 1e-13 + 1e-12 * std::fabs(z)) << c.name << " element " << i;
    differ_from_dense += std::fabs(z - y_dense.at_flat(i)) > 1e-9;
  }
  // Something was removed, and it mattered: the oracle differs from the dense model.
  EXPECT_GT(differ_from_dense, 0) << c.name << (dyadic ? " (dyadic)" : "");
  EXPECT_LT(pruned->param_count(), original->param_count()) << c.name;
  return plan;
}

StructuredPlan check_exact(const OracleCase& c, int64_t batch = 3) {
  check_oracle(c, true, batch);
  return check_oracle(c, false, batch);
}

StructuredOptions opts(double ratio, StructuredNorm norm = StructuredNorm::l1,
                       StructuredScope scope = StructuredScope::layer) {
  StructuredOptions o;
  o.ratio = ratio;
  o.norm = norm;
  o.scope = scope;
  return o;
}

TEST(StructuredPrune, ConvBnReluConvFlattenLinearIsExact) {
  for (auto norm : {StructuredNorm::l1, StructuredNorm::l2})
    for (auto scope : {StructuredScope::layer, StructuredScope::global})
      check_exact({"conv_bn", test::conv_bn_model, opts(0.5, norm, scope)});
}

TEST(StructuredPrune, ConvBnShapesFollowTheKeptChannels) {
  ReferenceBackend be;
  auto m = test::conv_bn_model();
  init_model(*m, be, DType::f64, 3);
  StructuredReport report;
  auto p = prune_structured(*m, be, opts(0.5), &report);
  // c0: 6 -> 3 filters; bn0 follows; c1: 8 -> 4 filters reading 3 channels; fc0 reads 4 x (4 x 4)
  // features and keeps 6 of 12 neurons; fc1 keeps its 5 classes.
  EXPECT_EQ(out_channels(*p, "c0"), 3);
  EXPECT_EQ(p->layer(p->find("bn0")).params().at(0)->value.dim(0), 3);
  EXPECT_EQ(p->layer(p->find("bn0")).buffers().at(0)->value.dim(0), 3);
  EXPECT_EQ(in_channels(*p, "c1"), 3);
  EXPECT_EQ(out_channels(*p, "c1"), 4);
  EXPECT_EQ(in_channels(*p, "fc0"), 4 * 16);
  EXPECT_EQ(out_channels(*p, "fc0"), 6);
  EXPECT_EQ(in_channels(*p, "fc1"), 6);
  EXPECT_EQ(out_channels(*p, "fc1"), 5);
  const int64_t params = (3 * 3 * 9 + 3) + (3 + 3) + (4 * 3 * 9 + 4) + (6 * 64 + 6) + (5 * 6 + 5);
  const int64_t flops = 2 * (3 * 9 * 3 * 64) + 2 * (3 * 9 * 4 * 64) + 2 * (64 * 6) + 2 * (6 * 5);
  EXPECT_EQ(p->param_count(), params);
  EXPECT_EQ(report.params_after, params);
  EXPECT_EQ(report.flops_after, flops);
  EXPECT_EQ(report.flops_before, 2 * (3 * 9 * 6 * 64) + 2 * (6 * 9 * 8 * 64) + 2 * (128 * 12) + 2 * (12 * 5));
  EXPECT_DOUBLE_EQ(report.flops_ratio(), static_cast<double>(flops) / report.flops_before);
  ASSERT_EQ(report.layers.size(), 4u);
  EXPECT_EQ(report.layers[3].name, "fc1");
  EXPECT_EQ(report.layers[3].channels_after, 5);
  EXPECT_NE(report.layers[3].not_pruned_because.find("model output"), std::string::npos);
}

TEST(StructuredPrune, ResidualConvBlockSharesOneChannelSet) {
  for (auto norm : {StructuredNorm::l1, StructuredNorm::l2})
    for (auto scope : {StructuredScope::layer, StructuredScope::global}) {
      const StructuredPlan plan = check_exact({"residual_conv", test::residual_conv_model, opts(0.5, norm, scope)});
      ReferenceBackend be;
      auto m = test::residual_conv_model();
      const int g0 = plan.graph.output_group[m->find("c0")];
      EXPECT_EQ(g0, plan.graph.output_group[m->find("c2")]);
      EXPECT_EQ(g0, plan.graph.output_group[m->find("sum")]);
      EXPECT_NE(g0, plan.graph.output_group[m->find("c1")]);
      EXPECT_EQ(plan.graph.groups[g0].producers.size(), 2u);
      EXPECT_EQ(plan.graph.groups[g0].batchnorms.size(), 2u);  // bn0 and bn2
      if (scope == StructuredScope::layer)
        EXPECT_EQ(plan.kept[g0].size(), 4u);
    }
}

TEST(StructuredPrune, ResidualConvShapes) {
  ReferenceBackend be;
  auto m = test::residual_conv_model();
  init_model(*m, be, DType::f64, 5);
  auto p = prune_structured(*m, be, opts(0.25));
  EXPECT_EQ(out_channels(*p, "c0"), 6);
  EXPECT_EQ(out_channels(*p, "c2"), 6);
  EXPECT_EQ(in_channels(*p, "c1"), 6);
  EXPECT_EQ(out_channels(*p, "c1"), 6);
  EXPECT_EQ(in_channels(*p, "c2"), 6);
  EXPECT_EQ(in_channels(*p, "c3"), 6);
  EXPECT_EQ(out_channels(*p, "c3"), 4);  // round(0.25 x 6) = round(1.5) = 2 removed (half away from zero)
  EXPECT_EQ(in_channels(*p, "fc"), 4 * 3 * 3);
  EXPECT_EQ(out_channels(*p, "fc"), 5);
}

TEST(StructuredPrune, ResidualLinearIsExact) {
  for (auto norm : {StructuredNorm::l1, StructuredNorm::l2})
    for (auto scope : {StructuredScope::layer, StructuredScope::global})
      check_exact({"residual_linear", test::residual_linear_model, opts(0.5, norm, scope)});
}

TEST(StructuredPrune, MlpZooModelIsExactAndCountsMatch) {
  check_exact({"mlp", [] { return build_zoo_model("mlp"); }, opts(0.5)});
  check_exact(
      {"mlp-l2-global", [] { return build_zoo_model("mlp"); }, opts(0.3, StructuredNorm::l2, StructuredScope::global)});
  ReferenceBackend be;
  auto m = build_zoo_model("mlp");
  init_model(*m, be, DType::f64, 1);
  StructuredReport r;
  auto p = prune_structured(*m, be, opts(0.5), &r);
  EXPECT_EQ(out_channels(*p, "0"), 256);
  EXPECT_EQ(in_channels(*p, "2"), 256);
  EXPECT_EQ(out_channels(*p, "2"), 128);
  EXPECT_EQ(out_channels(*p, "4"), 10);
  const int64_t params = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10;
  EXPECT_EQ(r.params_after, params);
  EXPECT_EQ(r.flops_after, 2 * (784 * 256 + 256 * 128 + 128 * 10));
  EXPECT_EQ(r.params_before, 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
}

TEST(StructuredPrune, CnnZooModelIsExactAndCountsMatch) {
  check_exact({"cnn", [] { return build_zoo_model("cnn"); }, opts(0.5)}, 2);
  check_exact(
      {"cnn-l2-global", [] { return build_zoo_model("cnn"); }, opts(0.4, StructuredNorm::l2, StructuredScope::global)},
      2);
  ReferenceBackend be;
  auto m = build_zoo_model("cnn");
  init_model(*m, be, DType::f32, 1);
  StructuredReport r;
  auto p = prune_structured(*m, be, opts(0.5), &r);
  EXPECT_EQ(out_channels(*p, "0"), 16);
  EXPECT_EQ(in_channels(*p, "3"), 16);
  EXPECT_EQ(out_channels(*p, "3"), 32);
  EXPECT_EQ(in_channels(*p, "7"), 32 * 7 * 7);
  EXPECT_EQ(out_channels(*p, "7"), 64);
  EXPECT_EQ(out_channels(*p, "9"), 10);
  const int64_t params = (16 * 9 + 16) + (32 * 16 * 9 + 32) + (64 * 1568 + 64) + (10 * 64 + 10);
  const int64_t flops = 2 * (9 * 16 * 784) + 2 * (16 * 9 * 32 * 196) + 2 * (1568 * 64) + 2 * (64 * 10);
  EXPECT_EQ(r.params_after, params);
  EXPECT_EQ(p->param_count(), params);
  EXPECT_EQ(r.flops_after, flops);
  EXPECT_EQ(r.flops_before, 2 * (9 * 32 * 784) + 2 * (32 * 9 * 64 * 196) + 2 * (3136 * 128) + 2 * (128 * 10));
  EXPECT_NE(p->summary().find("conv2d(16 -> 32"), std::string::npos) << p->summary();
}

TEST(StructuredPrune, FastBackendMatchesZeroedModelOnCnn) {
  // The same oracle on the oneDNN backend in f32 (channels-last convolutions, fused ReLU): equal
  // within rounding, since the kernels sum in a different order for other channel counts.
  DnnlBackend be;
  auto original = build_zoo_model("cnn");
  init_model(*original, be, DType::f32, 2);
  auto zeroed = build_zoo_model("cnn");
  init_model(*zeroed, be, DType::f32, 2);
  const StructuredPlan plan = plan_structured(*original, be, opts(0.5));
  auto pruned = build_pruned_model(*original, be, plan);
  zero_removed_channels(*zeroed, be, plan);
  Rng rng(4);
  const Tensor x = test::random_tensor({5, 1, 28, 28}, rng);
  EXPECT_TRUE(test::all_close(eval_forward(*pruned, be, x), eval_forward(*zeroed, be, x), 1e-4, 1e-5));
}

TEST(StructuredPrune, PrunedModelTrains) {
  // The smaller model runs a training step (forward and backward through every fixed-up shape).
  DnnlBackend be;
  auto m = test::residual_conv_model();
  init_model(*m, be, DType::f32, 2);
  auto p = prune_structured(*m, be, opts(0.5));
  LayerContext ctx{be, true, 0};
  Rng rng(9);
  const Tensor x = test::random_tensor({4, 2, 6, 6}, rng);
  const Tensor& y = p->forward(ctx, x);
  EXPECT_EQ(y.shape(), (Shape{4, 5}));
  Tensor dy = be.zeros(y.shape(), y.dtype());
  Tensor ones = Tensor::empty(y.shape(), y.dtype());
  ones.fill(1.0);
  be.copy(ones, dy);
  p->backward(ctx, dy);
  double grad_norm = 0;
  for (const NamedParam& np : p->named_params())
    grad_norm += be.sum_squares(np.param->grad);
  EXPECT_GT(grad_norm, 0);
}

}  // namespace
}  // namespace lathe
