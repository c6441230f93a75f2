// f16 gradients on a constructed case: without scaling they underflow to exactly zero; with the
// loss scaler they are recovered within f16 precision of the f64 truth; a scale so large that the
// scaled gradient overflows f16 is detected (inf), the step skipped and the scale backed off until
// the gradients are finite again: the exact GradScaler sequence, through the real layer.
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/compress/precision/loss_scaler.h"
#include "engine/nn/linear.h"

namespace lathe {
namespace {

class F16LossScaling : public ::testing::TestWithParam<int> {
 protected:
  std::unique_ptr<Backend> be;
  Rng rng{11};
  Linear lin{4, 2};
  std::vector<NamedParam> params;
  Tensor x = Tensor::empty({2, 4}, DType::f32);
  void SetUp() override {
    if (GetParam() == 0)
      be = std::make_unique<ReferenceBackend>();
    else
      be = std::make_unique<DnnlBackend>();
    lin.create_params(*be, DType::f32, rng);
    lin.set_compute_precision(DType::f16);
    for (Param* p : lin.params())
      params.push_back({p->name, p});
    for (int64_t i = 0; i < 8; ++i)
      x.set_flat(i, 0.03125 * (i + 1));  // 1/32 .. 1/4, exact in f16
  }
  /// Forward, then backward of diff_dst = scale * dy (the scaled loss gradient).
  void run(const Tensor& dy, double scale) {
    Tensor y = Tensor::empty({2, 2}, DType::f32), scaled = Tensor::empty({2, 2}, DType::f32);
    for (int64_t i = 0; i < 4; ++i)
      scaled.set_flat(i, dy.at_flat(i) * scale);
    LayerContext ctx{*be, true, 0};
    lin.forward(ctx, {&x}, y);
    lin.backward(ctx, {&x}, y, scaled, {nullptr});
  }
  /// f64 truth of the weight gradient dy^T x.
  double truth(const Tensor& dy, int64_t o, int64_t k) const {
    return dy.get({0, o}) * x.get({0, k}) + dy.get({1, o}) * x.get({1, k});
  }
};

TEST_P(F16LossScaling, TinyGradientsUnderflowWithoutScalingAndAreRecoveredWithIt) {
  Tensor dy = Tensor::empty({2, 2}, DType::f32);
  const double tiny[4] = {2.0e-8, -1.5e-8, 2.5e-8, -2.2e-8};  // below half the smallest f16 subnormal (2.98e-8)
  for (int64_t i = 0; i < 4; ++i)
    dy.set_flat(i, tiny[i]);

  run(dy, 1.0);
  const Tensor& gw = lin.params()[0]->grad;
  for (int64_t i = 0; i < gw.numel(); ++i)
    EXPECT_EQ(gw.at_flat(i), 0.0) << "element " << i << " did not underflow";
  EXPECT_NE(truth(dy, 0, 0), 0.0);

  LossScaler scaler;  // 65536
  run(dy, scaler.scale());
  EXPECT_TRUE(scaler.unscale_and_update(*be, params));
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t k = 0; k < 4; ++k) {
      const double t = truth(dy, o, k), g = gw.get({o, k});
      // dy*scale is normal in f16 (relative error 2^-11), x is exact, one output rounding (2^-11).
      EXPECT_NEAR(g, t, 3 * 0x1p-11 * std::fabs(t) + 1e-20) << o << "," << k;
      EXPECT_NE(g, 0.0);
    }
  EXPECT_EQ(scaler.scale(), 65536.0);
}

TEST_P(F16LossScaling, OverflowIsSkippedAndBackedOffExactly) {
  Tensor dy = Tensor::empty({2, 2}, DType::f32);
  const double vals[4] = {1.0, -0.5, 0.25, 0.75};
  for (int64_t i = 0; i < 4; ++i)
    dy.set_flat(i, vals[i]);
  LossScaler scaler({131072.0, 2.0, 0.5, 2000});
  // 1.0 * 131072 and 1.0 * 65536 exceed the f16 maximum 65504 (inf); at 32768 every gradient is
  // finite (|dy^T x| <= 2 * 0.25 * 32768).
  const std::vector<double> scale_used = {131072.0, 65536.0, 32768.0};
  const std::vector<bool> stepped = {false, false, true};
  for (size_t i = 0; i < scale_used.size(); ++i) {
    ASSERT_EQ(scaler.scale(), scale_used[i]) << "attempt " << i;
    run(dy, scaler.scale());
    EXPECT_EQ(scaler.unscale_and_update(*be, params), stepped[i]) << "attempt " << i;
  }
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(scaler.steps_skipped(), 2);
  const Tensor& gw = lin.params()[0]->grad;
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t k = 0; k < 4; ++k)
      EXPECT_NEAR(gw.get({o, k}), truth(dy, o, k), 3 * 0x1p-11 * std::fabs(truth(dy, o, k))) << o << "," << k;
}

INSTANTIATE_TEST_SUITE_P(Backends, F16LossScaling, ::testing::Values(0, 1),
                         [](const auto& info) { return info.param == 0 ? "reference" : "cpu"; });

}  // namespace
}  // namespace lathe
