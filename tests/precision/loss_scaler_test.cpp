// The loss scaler's state machine (GradScaler semantics): exact scale sequences through skips,
// back-offs and growth, option checks, and unscaling with inf/nan detection on real gradients.
#include <gtest/gtest.h>

#include <limits>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/compress/precision/loss_scaler.h"
#include "engine/nn/linear.h"

namespace lathe {
namespace {

TEST(LossScaler, DefaultsAreGradScalers) {
  LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.options().growth_interval, 2000);
  for (int i = 0; i < 1999; ++i)
    ASSERT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 65536.0);  // 1999 good steps: not yet
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 131072.0);  // the 2000th grows it
  EXPECT_EQ(s.good_steps_in_a_row(), 0);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.steps_skipped(), 1);
}

TEST(LossScaler, ExactSequence) {
  // interval 3: grow after every 3rd good step in a row; an inf resets the count.
  LossScaler s({8.0, 2.0, 0.5, 3});
  const std::vector<bool> found_inf = {false, false, false, true, false, false, true, true, false, false, false, false};
  const std::vector<double> scale_after = {8, 8, 16, 8, 8, 8, 4, 2, 2, 2, 4, 4};
  const std::vector<bool> stepped = {true, true, true, false, true, true, false, false, true, true, true, true};
  for (size_t i = 0; i < found_inf.size(); ++i) {
    EXPECT_EQ(s.update(found_inf[i]), stepped[i]) << "step " << i;
    EXPECT_EQ(s.scale(), scale_after[i]) << "step " << i;
  }
  EXPECT_EQ(s.steps_skipped(), 3);
  EXPECT_EQ(s.good_steps_in_a_row(), 1);
}

TEST(LossScaler, OtherFactors) {
  LossScaler s({1000.0, 3.0, 0.25, 1});
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 3000.0);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 750.0);
}

TEST(LossScaler, GrowthStopsBeforeOverflow) {
  LossScaler s({std::numeric_limits<double>::max() / 1.5, 2.0, 0.5, 1});
  const double before = s.scale();
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), before);
}

TEST(LossScaler, BadOptionsNameTheField) {
  auto message = [](LossScaleOptions o) {
    try {
      LossScaler s(o);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({0.0, 2.0, 0.5, 10}).find("train.loss_scale.init"), std::string::npos);
  EXPECT_NE(message({1.0, 0.5, 0.5, 10}).find("train.loss_scale.growth_factor"), std::string::npos);
  EXPECT_NE(message({1.0, 2.0, 1.0, 10}).find("train.loss_scale.backoff_factor"), std::string::npos);
  EXPECT_NE(message({1.0, 2.0, 0.5, 0}).find("train.loss_scale.growth_interval"), std::string::npos);
  EXPECT_EQ(message({1.0, 2.0, 0.5, 1}), "accepted");
}

class UnscaleTest : public ::testing::Test {
 protected:
  DnnlBackend be;
  Rng rng{5};
  Linear lin{3, 2};
  std::vector<NamedParam> params;
  void SetUp() override {
    params.clear();
    lin.create_params(be, DType::f32, rng);
    for (Param* p : lin.params())
      params.push_back({p->name, p});
    Tensor& gw = lin.params()[0]->grad;  // [2, 3]
    for (int64_t i = 0; i < 6; ++i)
      gw.set_flat(i, 4.0 * (i + 1));
    Tensor& gb = lin.params()[1]->grad;
    gb.set_flat(0, -8.0);
    gb.set_flat(1, 2.0);
  }
};

TEST_F(UnscaleTest, DividesByTheScale) {
  LossScaler s({4.0, 2.0, 0.5, 100});
  EXPECT_TRUE(s.unscale_and_update(be, params));
  const Tensor& gw = lin.params()[0]->grad;
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(gw.at_flat(i), static_cast<double>(i + 1));
  EXPECT_EQ(lin.params()[1]->grad.at_flat(0), -2.0);
  EXPECT_EQ(lin.params()[1]->grad.at_flat(1), 0.5);
  EXPECT_EQ(s.scale(), 4.0);
}

TEST_F(UnscaleTest, InfOrNanAnywhereSkipsTheStep) {
  for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    SetUp();
    lin.params()[1]->grad.set_flat(1, bad);  // the last tensor checked
    LossScaler s({4.0, 2.0, 0.5, 100});
    EXPECT_TRUE(s.unscale_and_check(be, params)) << bad;
    EXPECT_FALSE(s.unscale_and_update(be, params)) << bad;
    EXPECT_EQ(s.scale(), 2.0);
    EXPECT_EQ(s.steps_skipped(), 1);
  }
}

}  // namespace
}  // namespace lathe
