// Factored models: at full rank the factored model's forward equals the original's (f64 and f32 on
// the reference and oneDNN backends, Linear and Conv2d with BatchNorm, stride, padding and a
// residual Add); at lower rank the product of the two factors differs from W by exactly the
// discarded sigma^2 (Eckart-Young); the factored layers' shapes, names and parameter counts; and
// layers left dense when excluded or when the rank would not save bytes.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/compress/lowrank/factorize.h"
#include "tests/prune/structured_test_models.h"

namespace lathe {
namespace {

using test::eval_forward;
using test::init_model;

std::vector<double> values_of(Backend& be, const Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  be.copy(t, host);
  std::vector<double> v(static_cast<size_t>(host.numel()));
  for (int64_t i = 0; i < host.numel(); ++i)
    v[static_cast<size_t>(i)] = host.at_flat(i);
  return v;
}

const Tensor& weight(Model& m, const std::string& node) {
  for (Param* p : m.layer(static_cast<size_t>(m.find(node))).params())
    if (p->name == "weight")
      return p->value;
  throw std::runtime_error("no weight in " + node);
}

/// A plan that factors every Linear/Conv2d at its full rank min(out, in*kh*kw), which never saves
/// bytes, so plan_lowrank itself would leave them dense: the oracle case for build_lowrank_model.
LowRankPlan full_rank_plan(Model& m, Backend& be) {
  LowRankOptions o;
  o.rank = 1;
  LowRankPlan plan = plan_lowrank(m, be, o);
  for (size_t k = 0; k < plan.node.size(); ++k) {
    LowRankLayer& l = plan.report.layers[k];
    l.rank = std::min(l.rows, l.cols);
    l.dense_because.clear();
    plan.svd[k] = svd_jacobi(values_of(be, weight(m, l.name)), l.rows, l.cols);
  }
  return plan;
}

std::unique_ptr<Model> strided_conv_model() {
  return build_model_from_layers(nlohmann::json::parse(R"([
    {"type": "conv2d", "name": "c0", "out": 7, "kernel": 3, "stride": 2, "padding": 1},
    {"type": "relu", "name": "r0"},
    {"type": "conv2d", "name": "c1", "out": 5, "kernel": 1, "bias": false},
    {"type": "flatten", "name": "f"},
    {"type": "linear", "name": "fc", "out": 4}])"),
                                 {3, 9, 9});
}

struct Case {
  std::string name;
  std::function<std::unique_ptr<Model>()> build;
};

std::vector<Case> cases() {
  return {{"conv_bn", test::conv_bn_model},
          {"residual_conv", test::residual_conv_model},
          {"residual_linear", test::residual_linear_model},
          {"strided_conv", strided_conv_model}};
}

TEST(LowRankFactorize, FullRankForwardEqualsTheOriginal) {
  ReferenceBackend ref;
  DnnlBackend dnnl;
  for (const Case& c : cases())
    for (auto [be, dt, tol] :
         std::vector<std::tuple<Backend*, DType, double>>{{&ref, DType::f64, 1e-10}, {&dnnl, DType::f32, 1e-5}}) {
      SCOPED_TRACE(c.name + " on " + be->name());
      auto original = c.build();
      init_model(*original, *be, dt, 5);
      const LowRankPlan plan = full_rank_plan(*original, *be);
      auto factored = build_lowrank_model(*original, *be, plan);
      EXPECT_EQ(factored->size(), original->size() + plan.node.size());
      Rng rng(2);
      Shape in_shape = original->input_shape();
      in_shape.insert(in_shape.begin(), 3);
      const Tensor x = test::random_tensor(in_shape, rng, dt);
      const Tensor y0 = eval_forward(*original, *be, x);
      const Tensor y1 = eval_forward(*factored, *be, x);
      EXPECT_TRUE(test::all_close(y1, y0, tol, tol));
    }
}

TEST(LowRankFactorize, LowerRankErrorIsTheDiscardedEnergy) {
  ReferenceBackend be;
  auto m = test::conv_bn_model();  // c0: 6 x 27, c1: 8 x 54, fc0: 12 x 128, fc1: 5 x 12
  init_model(*m, be, DType::f64, 9);
  LowRankOptions o;
  o.rank = 3;
  const LowRankPlan plan = plan_lowrank(*m, be, o);
  auto f = build_lowrank_model(*m, be, plan);
  int factored = 0;
  for (size_t k = 0; k < plan.node.size(); ++k) {
    const LowRankLayer& l = plan.report.layers[k];
    SCOPED_TRACE(l.name);
    if (l.rank == 0)
      continue;
    ++factored;
    EXPECT_EQ(l.rank, 3);
    const std::vector<double> w = values_of(be, weight(*m, l.name));
    const std::vector<double> b = values_of(be, weight(*f, l.name + ".0"));  // r x cols
    const std::vector<double> a = values_of(be, weight(*f, l.name + ".1"));  // rows x r
    ASSERT_EQ(static_cast<int64_t>(b.size()), 3 * l.cols);
    ASSERT_EQ(static_cast<int64_t>(a.size()), l.rows * 3);
    double err = 0, total = 0;
    for (int64_t i = 0; i < l.rows; ++i)
      for (int64_t j = 0; j < l.cols; ++j) {
        double x = 0;
        for (int64_t r = 0; r < 3; ++r)
          x += a[i * 3 + r] * b[r * l.cols + j];
        const double d = x - w[i * l.cols + j];
        err += d * d;
        total += w[i * l.cols + j] * w[i * l.cols + j];
      }
    const Svd svd = svd_jacobi(w, l.rows, l.cols);
    const double discarded = discarded_energy(svd.s, 3);
    EXPECT_NEAR(err, discarded, 1e-10 * total);
    EXPECT_NEAR(l.kept_energy, 1 - discarded / total, 1e-12);
    EXPECT_GT(discarded, 0);
  }
  EXPECT_EQ(factored, 4);  // rank 3 saves bytes in all four (fc1 5 x 12: 51 < 60 values)
}

TEST(LowRankFactorize, ShapesNamesAndCounts) {
  ReferenceBackend be;
  auto m = test::conv_bn_model();
  init_model(*m, be, DType::f32, 1);
  LowRankOptions o;
  o.rank = 2;
  o.exclude = {"fc1"};
  LowRankReport rep;
  auto f = factorize_model(*m, be, o, &rep);
  ASSERT_EQ(rep.layers.size(), 4u);
  // c0: conv 3 -> 2 (3x3, padding 1, no bias), then 1x1 2 -> 6 with the bias.
  Layer& c00 = f->layer(static_cast<size_t>(f->find("c0.0")));
  ASSERT_EQ(c00.params().size(), 1u);
  EXPECT_EQ(c00.params()[0]->value.shape(), (Shape{2, 3, 3, 3}));
  Layer& c01 = f->layer(static_cast<size_t>(f->find("c0.1")));
  ASSERT_EQ(c01.params().size(), 2u);
  EXPECT_EQ(c01.params()[0]->value.shape(), (Shape{6, 2, 1, 1}));
  EXPECT_EQ(weight(*f, "fc0.0").shape(), (Shape{2, 128}));
  EXPECT_EQ(weight(*f, "fc0.1").shape(), (Shape{12, 2}));
  EXPECT_LT(f->find("fc1.0"), 0);  // excluded: kept dense under its own name
  EXPECT_EQ(weight(*f, "fc1").shape(), (Shape{5, 12}));
  EXPECT_EQ(rep.layers[3].dense_because, "excluded (lowrank.exclude)");
  // The BatchNorm reads the output factor; its statistics were copied.
  EXPECT_EQ(f->node_inputs(static_cast<size_t>(f->find("bn0")))[0], f->find("c0.1"));
  const int64_t before = 6 * 27 + 8 * 54 + 12 * 128 + 5 * 12;
  const int64_t after = 2 * (6 + 27) + 2 * (8 + 54) + 2 * (12 + 128) + 5 * 12;
  EXPECT_EQ(rep.weight_values_before, before);
  EXPECT_EQ(rep.weight_values_after, after);
  EXPECT_EQ(rep.params_before, m->param_count());
  EXPECT_EQ(rep.params_after, f->param_count());
  EXPECT_EQ(rep.params_after, m->param_count() - before + after);
}

TEST(LowRankFactorize, LeavesLayersDenseWhenTheRankSavesNothing) {
  ReferenceBackend be;
  auto m = test::conv_bn_model();
  init_model(*m, be, DType::f32, 1);
  LowRankOptions o;
  o.rank = 5;  // c0 6 x 27: 165 < 162? no -> dense; fc1 5 x 12: full rank 5 -> dense
  LowRankReport rep;
  auto f = factorize_model(*m, be, o, &rep);
  EXPECT_EQ(rep.layers[0].rank, 0);
  EXPECT_EQ(rep.layers[0].dense_because, "rank 5 takes 165 values, not fewer than the dense 162");
  EXPECT_EQ(rep.layers[1].rank, 5);  // c1 8 x 54: 310 < 432
  EXPECT_EQ(rep.layers[3].rank, 0);
  EXPECT_LT(f->find("c0.0"), 0);
  EXPECT_GE(f->find("c1.0"), 0);
  EXPECT_EQ(rep.params_after, f->param_count());
}

TEST(LowRankFactorize, BadOptionsNameTheField) {
  ReferenceBackend be;
  auto m = test::conv_bn_model();
  init_model(*m, be, DType::f32, 1);
  auto message = [&](const LowRankOptions& o) {
    try {
      plan_lowrank(*m, be, o);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  LowRankOptions o;
  o.exclude = {"bn0"};
  EXPECT_NE(message(o).find("lowrank.exclude: 'bn0' is not a linear or conv2d layer"), std::string::npos);
  o = {};
  o.target_bytes_ratio = 1;
  EXPECT_NE(message(o).find("lowrank.target_bytes_ratio"), std::string::npos);
  o = {};
  o.energy = 1.5;
  EXPECT_NE(message(o).find("lowrank.energy"), std::string::npos);
  o = {};
  o.rank = -1;
  EXPECT_NE(message(o).find("lowrank.rank"), std::string::npos);
}

}  // namespace
}  // namespace lathe
