// The accuracy-driven mixed-precision search on a small cnn with a scripted evaluator (each INT8
// layer costs a known number of accuracy points), so the configurations it must try, the order it
// tries them in and the point it must choose are known in advance; then once with the real INT8
// evaluation, where keeping every layer in f32 must give the f32 model's predictions.
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/compress/quant/mixed_precision_search.h"
#include "tests/quant/int8_test_models.h"

namespace lathe {
namespace {

/// Accuracy = 0.90 minus each INT8 layer's cost (layer names of small_cnn: 0, 3, 7, 9).
double scripted_accuracy(const Int8Model& q) {
  const std::map<std::string, double> cost{{"0", 0.002}, {"3", 0.012}, {"7", 0.001}, {"9", 0.006}};
  double acc = 0.90;
  for (const Int8LayerQuantization& l : q.layer_quantization())
    acc -= cost.at(l.node);
  return acc;
}

struct Fixture {
  DnnlBackend be;
  std::unique_ptr<Model> m = test::small_cnn(be, 4);
  ActivationParams acts = test::calibrate_minmax(*m, be, test::random_images(32, 12, 1));
  MixedPrecisionResult run(double f32_accuracy, double max_drop) {
    MixedPrecisionSearch s;
    s.f32_accuracy = f32_accuracy;
    s.max_drop_points = max_drop;
    s.evaluate = scripted_accuracy;
    s.ms_per_batch = [](Int8Model& q) { return 1.0 + q.f32_layers(); };
    return search_mixed_precision(*m, be, acts, s);
  }
};

std::set<std::string> keep(std::initializer_list<const char*> names) { return {names.begin(), names.end()}; }

TEST(MixedPrecisionSearch, StopsAtTheFirstConfigurationMeetingTheGoal) {
  Fixture f;
  EXPECT_EQ(quantizable_layers(*f.m), (std::vector<std::string>{"0", "3", "7", "9"}));
  // All INT8 loses 2.1 pt; layer 3 alone in f32 brings it to 0.9 pt: within 1.0.
  const MixedPrecisionResult r = f.run(0.90, 1.0);
  ASSERT_EQ(r.points.size(), 5u);  // all-INT8, then each layer alone; the greedy's first is layer 3 alone
  EXPECT_TRUE(r.points[0].keep_f32.empty());
  EXPECT_NEAR(r.points[0].accuracy, 0.879, 1e-12);
  EXPECT_FALSE(r.points[0].meets_goal);
  ASSERT_EQ(r.sensitivity.size(), 4u);
  EXPECT_EQ(r.sensitivity[1].first, "3");
  EXPECT_NEAR(r.sensitivity[1].second, 0.891, 1e-12);
  EXPECT_TRUE(r.goal_met);
  EXPECT_EQ(r.points[r.best].keep_f32, keep({"3"}));
  // An f32 layer makes the file larger: the point records the real serialized size.
  EXPECT_GT(r.points[r.best].bytes, r.points[0].bytes);
  EXPECT_EQ(r.points[r.best].ms_per_batch, 2.0);
}

TEST(MixedPrecisionSearch, AddsLayersBySensitivityUntilTheGoalHolds) {
  Fixture f;
  // 0.5 pt: {3} leaves 0.9, {3, 9} leaves 0.3.
  const MixedPrecisionResult r = f.run(0.90, 0.5);
  ASSERT_EQ(r.points.size(), 6u);
  EXPECT_EQ(r.points.back().keep_f32, keep({"3", "9"}));
  EXPECT_TRUE(r.goal_met);
  EXPECT_EQ(r.points[r.best].keep_f32, keep({"3", "9"}));
}

TEST(MixedPrecisionSearch, KeepsTheMostAccuratePointWhenTheGoalIsMissed) {
  Fixture f;
  // Against 0.95 even all-f32 (0.90) misses: every greedy step is tried and the best is all-f32.
  const MixedPrecisionResult r = f.run(0.95, 1.0);
  ASSERT_EQ(r.points.size(), 1u + 4u + 3u);
  EXPECT_FALSE(r.goal_met);
  EXPECT_EQ(r.points[r.best].keep_f32, keep({"0", "3", "7", "9"}));
  for (const MixedPrecisionPoint& p : r.points)
    EXPECT_FALSE(p.meets_goal);
}

TEST(MixedPrecisionSearch, EveryLayerInF32IsTheF32Model) {
  Fixture f;
  Int8ModelOptions o;
  o.keep_f32 = keep({"0", "3", "7", "9"});
  Int8Model q(*f.m, f.be, f.acts, o);
  EXPECT_EQ(q.int8_layers(), 0);
  const Tensor x = test::images_of(test::random_images(16, 12, 2));
  LayerContext ctx{f.be, false, 0};
  const Tensor want = f.m->forward(ctx, x).contiguous_copy();
  const Tensor got = q.forward(x);
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_FLOAT_EQ(got.at_flat(i), want.at_flat(i));
}

TEST(MixedPrecisionSearch, RefusesAModelWithNothingToQuantize) {
  DnnlBackend be;
  Model m(Shape{4});
  m.add("r", std::make_unique<ReLU>());
  MixedPrecisionSearch s;
  s.evaluate = scripted_accuracy;
  s.ms_per_batch = [](Int8Model&) { return 1.0; };
  EXPECT_THROW(search_mixed_precision(m, be, {}, s), ConfigError);
  s.evaluate = nullptr;
  EXPECT_THROW(search_mixed_precision(m, be, {}, s), Error);
}

}  // namespace
}  // namespace lathe
