// The calibration set (random images plus the highest-loss ones, computed independently here) and
// the one statistics pass every calibrator reads.
#include <gtest/gtest.h>

#include <set>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/compress/quant/calibration_set.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/relu.h"

namespace lathe {
namespace {

Dataset random_images(int64_t n, uint64_t seed) {
  Dataset d;
  d.count = n;
  d.rows = d.cols = 6;
  d.num_classes = 4;
  Rng rng(seed);
  d.images.resize(n * 36);
  for (auto& p : d.images)
    p = static_cast<uint8_t>(rng.below(256));
  for (int64_t i = 0; i < n; ++i)
    d.labels.push_back(static_cast<int32_t>(rng.below(4)));
  return d;
}

std::unique_ptr<Model> tiny(Backend& be) {
  auto m = std::make_unique<Model>(Shape{1, 6, 6});
  m->add("0", std::make_unique<Conv2d>(1, 3, 3, 1, 1));
  m->add("1", std::make_unique<ReLU>());
  m->add("2", std::make_unique<Flatten>());
  m->add("3", std::make_unique<Linear>(108, 4));
  Rng rng(2);
  m->create_params(be, DType::f32, rng);
  return m;
}

TEST(CalibrationSet, OutliersAreTheHighestLossImagesAndTheRestIsDistinct) {
  DnnlBackend be;
  auto m = tiny(be);
  const Dataset train = random_images(200, 1);
  CalibrationSetOptions o;
  o.samples = 40;
  o.outlier_fraction = 0.25;
  const CalibrationSet s = select_calibration_set(*m, be, train, o);
  ASSERT_EQ(s.indices.size(), 40u);
  EXPECT_EQ(s.outliers, 10);
  EXPECT_EQ(std::set<int64_t>(s.indices.begin(), s.indices.end()).size(), 40u) << "duplicates";
  const std::vector<double> loss = per_sample_losses(*m, be, train, 7);  // other batch size, same losses
  std::set<int64_t> out(s.indices.begin(), s.indices.begin() + 10);
  double min_out = 1e300, max_rest = -1e300;
  for (int64_t i = 0; i < train.count; ++i)
    (out.count(i) ? min_out : max_rest) = out.count(i) ? std::min(min_out, loss[i]) : std::max(max_rest, loss[i]);
  EXPECT_GE(min_out, max_rest);
  EXPECT_NEAR(s.outlier_min_loss, min_out, 1e-6);
  // Deterministic, and a different seed draws a different random part.
  EXPECT_EQ(select_calibration_set(*m, be, train, o).indices, s.indices);
  o.seed = 9;
  EXPECT_NE(select_calibration_set(*m, be, train, o).indices, s.indices);
  o.outlier_fraction = 0;
  EXPECT_EQ(select_calibration_set(*m, be, train, o).outliers, 0);
  o.outlier_fraction = 2;
  EXPECT_THROW(select_calibration_set(*m, be, train, o), Error);
}

TEST(CalibrationSet, StatisticsCoverEveryTapOnceAndReluRangesStartAtZero) {
  DnnlBackend be;
  auto m = tiny(be);
  const Dataset d = random_images(50, 3);
  const std::vector<std::string> taps = int8_activation_taps(*m);
  // conv "0" is fused with its ReLU "1": only the ReLU output exists; the last node is not a tap.
  EXPECT_EQ(taps, (std::vector<std::string>{kInputTap, "1", "2"}));
  const ActivationStats st = collect_activation_stats(*m, be, d, 16);
  EXPECT_EQ(st.samples, 50);
  EXPECT_EQ(st.taps.at(kInputTap).count(), 50 * 36);
  EXPECT_EQ(st.taps.at("1").count(), 50 * 108);
  // Input minimum: the darkest pixel, normalised.
  uint8_t darkest = 255;
  for (uint8_t p : d.images)
    darkest = std::min(darkest, p);
  EXPECT_NEAR(st.taps.at(kInputTap).min(), (darkest / 255.0 - kFashionMean) / kFashionStd, 1e-5);
  std::map<std::string, CalibrationResult> res;
  const ActivationParams acts = derive_activation_params(st, CalibrationMethod::mse, 99.99, &res);
  EXPECT_EQ(acts.at("1").zero_point[0], 0);
  EXPECT_FALSE(acts.at("1").is_signed);
  EXPECT_GT(acts.at(kInputTap).zero_point[0], 0);  // the input has negative values: asymmetric u8
  EXPECT_EQ(res.at("1").method, "mse");
}

}  // namespace
}  // namespace lathe
