// Augmentation: strength 0 is the identity, shifts move pixels by exactly (dx, dy) with black
// fill, hflip mirrors, the strength rule gives the documented ranges and probabilities, noise has the
// documented scale, and the same Rng state gives the same image.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/augment.h"

namespace lathe {
namespace {

constexpr int64_t kRows = 5, kCols = 7;  // not square, so a row/column mix-up shows

std::vector<float> numbered_image() {
  std::vector<float> img(kRows * kCols);
  for (int64_t i = 0; i < kRows * kCols; ++i)
    img[i] = 1.0f + static_cast<float>(i);  // all distinct, none black
  return img;
}

const PixelSpace kFashion{0.2860f, 0.3530f};

TEST(Augment, BlackIsTheNormalisedZeroIntensity) {
  EXPECT_NEAR(kFashion.black(), (0.0 - 0.2860) / 0.3530, 1e-6);
  EXPECT_EQ(PixelSpace{}.black(), 0.0f);
}

TEST(Augment, StrengthZeroIsTheIdentity) {
  AugmentOptions o;
  o.shift_px = 3;
  o.hflip = true;
  o.noise_std = 0.5;
  o.strength = 0.0;
  EXPECT_FALSE(augment_enabled(o));
  const auto src = numbered_image();
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Rng rng(seed), untouched(seed);
    std::vector<float> dst(src.size(), -99.0f);
    augment_image(src.data(), dst.data(), kRows, kCols, o, rng, kFashion);
    EXPECT_EQ(dst, src);
    EXPECT_EQ(rng.next_u64(), untouched.next_u64()) << "strength 0 must not draw random numbers";
  }
}

TEST(Augment, ShiftMovesContentByDxDyAndFillsBlack) {
  const auto src = numbered_image();
  Rng rng(1);
  for (const auto [dx, dy] : std::vector<std::pair<int, int>>{{2, 1}, {-1, -2}, {0, 3}, {-3, 0}, {9, 0}, {0, -6}}) {
    AugmentPlan plan;
    plan.dx = dx;
    plan.dy = dy;
    std::vector<float> dst(src.size());
    apply_augment(plan, src.data(), dst.data(), kRows, kCols, kFashion, rng);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t c = 0; c < kCols; ++c) {
        const int64_t sr = r - dy, sc = c - dx;
        const bool inside = sr >= 0 && sr < kRows && sc >= 0 && sc < kCols;
        const float want = inside ? 1.0f + static_cast<float>(sr * kCols + sc) : kFashion.black();
        EXPECT_EQ(dst[r * kCols + c], want) << "dx " << dx << " dy " << dy << " at " << r << "," << c;
      }
  }
}

TEST(Augment, ShiftRightByOneByHand) {
  // 2 x 3 image [[1 2 3] [4 5 6]] moved right by one: [[b 1 2] [b 4 5]].
  const std::vector<float> src = {1, 2, 3, 4, 5, 6};
  AugmentPlan plan;
  plan.dx = 1;
  Rng rng(0);
  std::vector<float> dst(6);
  apply_augment(plan, src.data(), dst.data(), 2, 3, PixelSpace{0.5f, 0.25f}, rng);
  EXPECT_EQ(dst, (std::vector<float>{-2, 1, 2, -2, 4, 5}));  // black = (0 - 0.5) / 0.25 = -2
}

TEST(Augment, HflipMirrorsRows) {
  const std::vector<float> src = {1, 2, 3, 4, 5, 6};
  AugmentPlan plan;
  plan.flip = true;
  Rng rng(0);
  std::vector<float> dst(6);
  apply_augment(plan, src.data(), dst.data(), 2, 3, kFashion, rng);
  EXPECT_EQ(dst, (std::vector<float>{3, 2, 1, 6, 5, 4}));
  // Flip first, then shift down by one: [[b b b] [3 2 1]].
  plan.dy = 1;
  apply_augment(plan, src.data(), dst.data(), 2, 3, PixelSpace{0.5f, 0.25f}, rng);
  EXPECT_EQ(dst, (std::vector<float>{-2, -2, -2, 3, 2, 1}));
}

TEST(Augment, InPlaceMatchesOutOfPlace) {
  AugmentOptions o;
  o.shift_px = 2;
  o.hflip = true;
  o.noise_std = 0.1;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    const auto src = numbered_image();
    std::vector<float> out(src.size()), inplace = src;
    Rng a(seed), b(seed);
    augment_image(src.data(), out.data(), kRows, kCols, o, a, kFashion);
    augment_image(inplace.data(), inplace.data(), kRows, kCols, o, b, kFashion);
    EXPECT_EQ(out, inplace);
  }
}

TEST(Augment, SameRngStateSameImage) {
  AugmentOptions o;
  o.shift_px = 3;
  o.hflip = true;
  o.noise_std = 0.2;
  const auto src = numbered_image();
  std::vector<float> a(src.size()), b(src.size()), c(src.size());
  Rng ra(42), rb(42), rc(43);
  augment_image(src.data(), a.data(), kRows, kCols, o, ra, kFashion);
  augment_image(src.data(), b.data(), kRows, kCols, o, rb, kFashion);
  augment_image(src.data(), c.data(), kRows, kCols, o, rc, kFashion);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Augment, StrengthRule) {
  AugmentOptions o;
  o.shift_px = 2;
  o.hflip = true;
  o.noise_std = 0.1;
  EXPECT_EQ(effective_shift(o), 2);
  EXPECT_DOUBLE_EQ(flip_probability(o), 0.5);
  EXPECT_DOUBLE_EQ(effective_noise_std(o), 0.1);
  o.strength = 0.5;
  EXPECT_EQ(effective_shift(o), 1);
  EXPECT_DOUBLE_EQ(flip_probability(o), 0.25);
  EXPECT_DOUBLE_EQ(effective_noise_std(o), 0.05);
  o.strength = 0.25;  // 2 * 0.25 = 0.5 rounds half away from zero
  EXPECT_EQ(effective_shift(o), 1);
  o.strength = 0.2;
  EXPECT_EQ(effective_shift(o), 0);
  o.strength = 3.0;  // flip probability saturates at 0.5
  EXPECT_EQ(effective_shift(o), 6);
  EXPECT_DOUBLE_EQ(flip_probability(o), 0.5);
  EXPECT_DOUBLE_EQ(effective_noise_std(o), 0.3);
}

TEST(Augment, DrawnShiftsCoverTheRangeAndFlipsHalfTheTime) {
  AugmentOptions o;
  o.shift_px = 2;
  o.hflip = true;
  Rng rng(7);
  std::set<int> dxs, dys;
  int flips = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    const AugmentPlan p = draw_augment(o, rng);
    ASSERT_LE(std::abs(p.dx), 2);
    ASSERT_LE(std::abs(p.dy), 2);
    dxs.insert(p.dx);
    dys.insert(p.dy);
    flips += p.flip;
  }
  EXPECT_EQ(dxs, (std::set<int>{-2, -1, 0, 1, 2}));
  EXPECT_EQ(dys, (std::set<int>{-2, -1, 0, 1, 2}));
  EXPECT_NEAR(flips / double(n), 0.5, 0.04);  // ~5 standard deviations

  o.strength = 0.5;
  o.shift_px = 0;
  flips = 0;
  for (int i = 0; i < n; ++i) {
    const AugmentPlan p = draw_augment(o, rng);
    EXPECT_EQ(p.dx, 0);
    flips += p.flip;
  }
  EXPECT_NEAR(flips / double(n), 0.25, 0.035);
}

TEST(Augment, NoiseIsInIntensityUnits) {
  // sigma 0.1 of intensity is 0.1 / std in the normalised space.
  AugmentOptions o;
  o.noise_std = 0.1;
  const PixelSpace space{0.5f, 0.25f};
  const int64_t rows = 100, cols = 100;
  std::vector<float> src(rows * cols, 1.0f), dst(rows * cols);
  Rng rng(3);
  augment_image(src.data(), dst.data(), rows, cols, o, rng, space);
  double sum = 0, sum_sq = 0;
  for (float v : dst) {
    sum += v - 1.0;
    sum_sq += (v - 1.0) * (v - 1.0);
  }
  const double n = static_cast<double>(dst.size());
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(sum_sq / n), 0.4, 0.02);
}

TEST(Augment, ValidateRejectsNegativeValues) {
  AugmentOptions o;
  o.shift_px = -1;
  EXPECT_THROW(validate_augment(o), ConfigError);
  o = {};
  o.strength = -0.5;
  EXPECT_THROW(validate_augment(o), ConfigError);
  o = {};
  o.noise_std = std::nan("");
  EXPECT_THROW(validate_augment(o), ConfigError);
  EXPECT_NO_THROW(validate_augment(AugmentOptions{}));
}

}  // namespace
}  // namespace lathe
