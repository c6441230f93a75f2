// EMA, Pareto front, ETA and sweeps against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/core/error.h"
#include "widgets/ui/series_math.h"
#include "widgets/ui/sweep.h"

namespace lathe::ui {

TEST(GuiMath, EmaIsDebiasedExponentialAverage) {
  // alpha 0.5: s1 = 0.5*1 = 0.5, w1 = 0.5 -> 1; s2 = 0.25 + 1.5 = 1.75, w2 = 0.75 -> 2.3333;
  // s3 = 0.875 + 2.5 = 3.375, w3 = 0.875 -> 3.857142...
  const auto out = ema({1, 3, 5}, 0.5);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_DOUBLE_EQ(out[0], 1.0);
  EXPECT_NEAR(out[1], 1.75 / 0.75, 1e-12);
  EXPECT_NEAR(out[2], 3.375 / 0.875, 1e-12);
  EXPECT_EQ(ema({2, 7}, 0.0), (std::vector<double>{2, 7}));
  const auto with_nan = ema({std::nan(""), 4, std::nan("")}, 0.9);
  EXPECT_TRUE(std::isnan(with_nan[0]));
  EXPECT_DOUBLE_EQ(with_nan[1], 4.0);
  EXPECT_DOUBLE_EQ(with_nan[2], 4.0);
}

TEST(GuiMath, ParetoFrontSmallerBytesHigherAccuracy) {
  // (bytes, accuracy): 0 and 1 trade off; 2 is dominated by 1 (more bytes, less accuracy);
  // 3 equals 0 on bytes but is less accurate -> dominated; 4 is NaN.
  const std::vector<XY> pts = {{100, 0.80}, {200, 0.90}, {300, 0.85}, {100, 0.70}, {std::nan(""), 0.99}};
  EXPECT_EQ(pareto_front(pts, /*maximize_x=*/false, /*maximize_y=*/true), (std::vector<int>{0, 1}));
  // Both maximized: only (200, 0.90) and (300, 0.85) survive.
  EXPECT_EQ(pareto_front(pts, true, true), (std::vector<int>{1, 2}));
  EXPECT_TRUE(pareto_front({}, true, true).empty());
}

TEST(GuiMath, EtaFromAverageRate) {
  EXPECT_DOUBLE_EQ(*eta_seconds(25, 100, 10.0), 30.0);
  EXPECT_DOUBLE_EQ(*eta_seconds(100, 100, 10.0), 0.0);
  EXPECT_FALSE(eta_seconds(0, 100, 10.0).has_value());
  EXPECT_FALSE(eta_seconds(5, 0, 10.0).has_value());
  EXPECT_EQ(format_duration(42), "42 s");
  EXPECT_EQ(format_duration(185), "3 min 05 s");
  EXPECT_EQ(format_duration(3720), "1 h 02 min");
}

TEST(GuiSweep, CartesianProductOfTwoKnobs) {
  const auto runs = expand_sweep({{"prune.ratio", {"0.3", "0.5", "0.7", "0.9"}}, {"quant.calibration", {"minmax", "entropy"}}});
  ASSERT_EQ(runs.size(), 8u);
  EXPECT_EQ(runs[0], (std::vector<std::string>{"prune.ratio=0.3", "quant.calibration=minmax"}));
  EXPECT_EQ(runs[1], (std::vector<std::string>{"prune.ratio=0.3", "quant.calibration=entropy"}));
  EXPECT_EQ(runs[7], (std::vector<std::string>{"prune.ratio=0.9", "quant.calibration=entropy"}));
  EXPECT_EQ(expand_sweep({{"seed", {"1", "2"}}, {"", {}}}).size(), 2u);
  EXPECT_TRUE(expand_sweep({}).empty());
  EXPECT_THROW(expand_sweep({{"prune.no_such_knob", {"1"}}}), ConfigError);
  EXPECT_THROW(expand_sweep({{"seed", {}}}), ConfigError);
  EXPECT_EQ(split_values(" 0.3, 0.5 ,0.7  0.9"), (std::vector<std::string>{"0.3", "0.5", "0.7", "0.9"}));
}

TEST(GuiSweep, ValidatorLinesSplitByPath) {
  const auto lines = split_config_errors(
      "train.epochs: -1 is out of range; allowed: an integer from 1 to 10000\n"
      "--set data.bogus: no such config field\nsomething without a path");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].path, "train.epochs");
  EXPECT_EQ(lines[1].path, "data.bogus");
  EXPECT_EQ(lines[2].path, "");
}

}  // namespace lathe::ui
