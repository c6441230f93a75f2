// Feature distillation: the MSE against its double reference on both CPU backends and layouts,
// central-difference gradient checks in double of MSE(proj(a), t) w.r.t. the student activation and
// the projection's weights (Linear and 1x1 conv), and the projection shape rules.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/compress/distill/feature_loss.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::flat;

TEST(FeatureMse, MatchesTheReferenceOnBothCpuBackendsAndLayouts) {
  ReferenceBackend ref;
  DnnlBackend dnnl;
  Rng rng(2);
  for (Backend* be : std::vector<Backend*>{&ref, &dnnl}) {
    for (MemoryFormat pf : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
      const DType dt = be == &ref ? DType::f64 : DType::f32;
      const Tensor p = test::random_tensor({3, 4, 5, 2}, rng, dt, pf, -2, 2);
      const Tensor t = test::random_tensor({3, 4, 5, 2}, rng, dt, MemoryFormat::contiguous, -2, 2);
      std::vector<double> ref_grad;
      const double want = feature_mse_reference(flat(p), flat(t), 3, 40, &ref_grad);
      Tensor d, scratch;
      const double got = feature_mse(*be, p, t, 0.3, 0.25, &d, scratch);
      EXPECT_NEAR(got, want, 1e-5 * (1 + want)) << be->name();
      EXPECT_EQ(d.format(), p.format());
      for (int64_t i = 0; i < p.numel(); ++i)
        ASSERT_NEAR(d.at_flat(i), 0.3 * 0.25 * ref_grad[i], 1e-6) << be->name() << " element " << i;
      EXPECT_NEAR(feature_mse(*be, p, t, 1, 1, nullptr, scratch), want, 1e-5 * (1 + want));
    }
  }
}

TEST(FeatureMse, GoldenValue) {
  // Two samples of two features: ((1-0)^2 + (2-4)^2)/2 + ((0-0)^2 + (-1-1)^2)/2 = 2.5 + 2.
  ReferenceBackend be;
  Tensor p = Tensor::empty({2, 2}, DType::f64), t = Tensor::empty({2, 2}, DType::f64);
  const double pv[] = {1, 2, 0, -1}, tv[] = {0, 4, 0, 1};
  for (int i = 0; i < 4; ++i) {
    p.set_flat(i, pv[i]);
    t.set_flat(i, tv[i]);
  }
  Tensor scratch;
  EXPECT_DOUBLE_EQ(feature_mse(be, p, t, 1, 1, nullptr, scratch), 4.5);
}

/// d(w * MSE(proj(a), t))/d(x) by central differences for sampled elements of x.
void check_grad(Tensor& x, const Tensor& analytic, const std::function<double()>& loss, const std::string& what) {
  const double eps = 1e-6;
  Rng rng(9);
  const int64_t n = x.numel(), count = std::min<int64_t>(n, 60);
  for (int64_t s = 0; s < count; ++s) {
    const int64_t i = n <= 60 ? s : static_cast<int64_t>(rng.below(n));
    const double x0 = x.at_flat(i);
    x.set_flat(i, x0 + eps);
    const double fp = loss();
    x.set_flat(i, x0 - eps);
    const double fm = loss();
    x.set_flat(i, x0);
    const double numeric = (fp - fm) / (2 * eps);
    ASSERT_NEAR(analytic.at_flat(i), numeric, 1e-7 + 1e-6 * std::fabs(numeric)) << what << " element " << i;
  }
}

void gradient_check_projection(const Shape& a_shape, const Shape& t_shape, const char* kind) {
  ReferenceBackend be;
  Rng rng(4);
  Shape s1 = a_shape, t1 = t_shape;
  s1[0] = t1[0] = 1;
  FeatureProjection proj(s1, t1, "pair");
  ASSERT_FALSE(proj.is_identity());
  EXPECT_NE(proj.describe().find(kind), std::string::npos) << proj.describe();
  proj.create_params(be, DType::f64, rng);
  Tensor a = test::random_tensor(a_shape, rng, DType::f64);
  const Tensor t = test::random_tensor(t_shape, rng, DType::f64);
  const double w = 0.3, grad_scale = 0.5;
  LayerContext ctx{be, true, 0};
  Tensor scratch, d_proj;
  auto loss = [&]() {
    Tensor s2;
    return w * grad_scale * feature_mse(be, proj.forward(ctx, a), t, 1, 1, nullptr, s2);
  };
  const Tensor& p = proj.forward(ctx, a);
  feature_mse(be, p, t, w, grad_scale, &d_proj, scratch);
  Tensor d_a = be.empty(a.shape(), a.dtype(), a.format());
  proj.backward(ctx, a, d_proj, d_a);
  std::vector<Tensor> grads;  // copies: the loss() calls below rerun forward only
  for (Param* prm : proj.params())
    grads.push_back(prm->grad.contiguous_copy());
  check_grad(a, d_a, loss, "student activation");
  size_t k = 0;
  for (Param* prm : proj.params())
    check_grad(prm->value, grads[k++], loss, "projection " + prm->name);
}

TEST(FeatureProjection, LinearGradientsMatchCentralDifferences) { gradient_check_projection({5, 6}, {5, 9}, "linear"); }

TEST(FeatureProjection, OneByOneConvGradientsMatchCentralDifferences) {
  gradient_check_projection({2, 3, 4, 4}, {2, 5, 4, 4}, "conv2d");
}

TEST(FeatureProjection, IdentityWhenShapesMatchAndRejectsUnmappableShapes) {
  EXPECT_TRUE(FeatureProjection({1, 8}, {1, 8}, "p").is_identity());
  EXPECT_TRUE(FeatureProjection({1, 4, 7, 7}, {1, 4, 7, 7}, "p").is_identity());
  EXPECT_THROW(FeatureProjection({1, 8}, {1, 4, 2, 2}, "p"), ConfigError);
  try {
    FeatureProjection({1, 4, 7, 7}, {1, 8, 14, 14}, "distill.feature_pairs[0] (2:5)");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("distill.feature_pairs[0] (2:5)"), std::string::npos) << e.what();
  }
}

TEST(FeatureMse, RejectsMismatchedShapes) {
  ReferenceBackend be;
  Tensor scratch;
  EXPECT_THROW(
      feature_mse(be, Tensor::zeros({2, 3}, DType::f32), Tensor::zeros({2, 4}, DType::f32), 1, 1, nullptr, scratch),
      Error);
  EXPECT_THROW(
      feature_mse(be, Tensor::zeros({2, 3}, DType::f32), Tensor::zeros({2, 3}, DType::f64), 1, 1, nullptr, scratch),
      Error);
}

}  // namespace
}  // namespace lathe
