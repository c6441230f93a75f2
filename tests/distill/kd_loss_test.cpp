// KD loss: parity of the host kernel (f32/f64, strided) with the double reference, central-difference
// gradient checks in double w.r.t. the student logits, hand-computed golden values, and rejected inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/compress/distill/kd_loss.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::flat;
using test::labels_of;

TEST(KdLoss, GoldenTwoClassValuesComputedByHand) {
  // s = [0, 0], t = [ln 3, 0], y = 0. p_t(T=1) = [3/4, 1/4], p_s = [1/2, 1/2].
  Tensor s = Tensor::zeros({1, 2}, DType::f64), t = Tensor::zeros({1, 2}, DType::f64);
  t.set({0, 0}, std::log(3.0));
  const Tensor y = labels_of({0});
  KdLossOptions o{1.0, 1.0};
  const double kl1 = 0.75 * std::log(1.5) + 0.25 * std::log(0.5);
  EXPECT_NEAR(kd_loss(s, t, y, o, nullptr, 1).soft_sum, kl1, 1e-12);
  // T = 2: p_t = [sqrt3, 1] / (sqrt3 + 1); the soft term is T^2 KL.
  o.temperature = 2;
  const double a = std::sqrt(3.0) / (std::sqrt(3.0) + 1), b = 1 - a;
  const double kl2 = a * std::log(2 * a) + b * std::log(2 * b);
  const KdLossResult r = kd_loss(s, t, y, {2.0, 0.7}, nullptr, 1);
  EXPECT_NEAR(r.soft_sum, 4 * kl2, 1e-12);
  EXPECT_NEAR(r.hard_sum, std::log(2.0), 1e-12);  // CE of a uniform 2-way prediction
  EXPECT_NEAR(r.total_sum, 0.7 * 4 * kl2 + 0.3 * std::log(2.0), 1e-12);
  EXPECT_EQ(r.teacher_correct, 1);
  // Gradient: alpha T (p_s/T - p_t/T) + (1 - alpha)(p_s - onehot) = 0.7*2*(0.5 - a) + 0.3*(0.5 - 1).
  Tensor d = Tensor::zeros({1, 2}, DType::f64);
  kd_loss(s, t, y, {2.0, 0.7}, &d, 1);
  EXPECT_NEAR(d.get({0, 0}), 0.7 * 2 * (0.5 - a) + 0.3 * (0.5 - 1), 1e-12);
  EXPECT_NEAR(d.get({0, 1}), 0.7 * 2 * (0.5 - b) + 0.3 * 0.5, 1e-12);
}

TEST(KdLoss, IdenticalLogitsHaveNoSoftLossAndAlphaZeroIsCrossEntropy) {
  Rng rng(3);
  const Tensor s = test::random_tensor({6, 10}, rng, DType::f64, MemoryFormat::contiguous, -4, 4);
  const Tensor y = labels_of({0, 1, 2, 3, 4, 9});
  EXPECT_NEAR(kd_loss(s, s, y, {4.0, 0.7}, nullptr, 1).soft_sum, 0.0, 1e-12);
  const Tensor t = test::random_tensor({6, 10}, rng, DType::f64, MemoryFormat::contiguous, -4, 4);
  const KdLossResult r = kd_loss(s, t, y, {4.0, 0.0}, nullptr, 1);
  double ce = 0;
  for (int i = 0; i < 6; ++i) {
    double z = 0;
    for (int j = 0; j < 10; ++j)
      z += std::exp(s.get({i, j}));
    ce += std::log(z) - s.get({i, y.data<int32_t>()[i]});
  }
  EXPECT_NEAR(r.total_sum, ce, 1e-10);
}

TEST(KdLoss, MatchesTheReferenceInF32AndF64WithStrides) {
  Rng rng(11);
  const int64_t n = 9, c = 7;
  std::vector<int> y;
  for (int64_t i = 0; i < n; ++i)
    y.push_back(static_cast<int>(rng.below(c)));
  const Tensor labels = labels_of(y);
  for (DType dt : {DType::f64, DType::f32}) {
    // Transposed views: element (i, j) lives at j * n + i.
    Tensor s_store = test::random_tensor({c, n}, rng, dt, MemoryFormat::contiguous, -6, 6);
    Tensor t_store = test::random_tensor({c, n}, rng, dt, MemoryFormat::contiguous, -6, 6);
    Tensor s = Tensor::empty({n, c}, dt), t = Tensor::empty({n, c}, dt);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < c; ++j) {
        s.set({i, j}, s_store.get({j, i}));
        t.set({i, j}, t_store.get({j, i}));
      }
    for (double T : {1.0, 4.0, 20.0})
      for (double alpha : {0.0, 0.7, 1.0}) {
        std::vector<double> ref_grad;
        const KdLossResult ref = kd_loss_reference(flat(s), flat(t), y, n, c, {T, alpha}, &ref_grad);
        Tensor d = Tensor::zeros({n, c}, dt);
        const KdLossResult got = kd_loss(s, t, labels, {T, alpha}, &d, 0.5);
        const double tol = dt == DType::f64 ? 1e-10 : 1e-4;
        EXPECT_NEAR(got.total_sum, ref.total_sum, tol * (1 + std::fabs(ref.total_sum))) << T << " " << alpha;
        EXPECT_NEAR(got.soft_sum, ref.soft_sum, tol * (1 + std::fabs(ref.soft_sum)));
        EXPECT_NEAR(got.hard_sum, ref.hard_sum, tol * (1 + std::fabs(ref.hard_sum)));
        EXPECT_EQ(got.correct, ref.correct);
        EXPECT_EQ(got.teacher_correct, ref.teacher_correct);
        for (int64_t k = 0; k < n * c; ++k)
          ASSERT_NEAR(d.at_flat(k), 0.5 * ref_grad[k], dt == DType::f64 ? 1e-12 : 1e-6) << k;
      }
  }
}

TEST(KdLoss, GradientMatchesCentralDifferencesInDouble) {
  Rng rng(5);
  const int64_t n = 4, c = 10;
  Tensor s = test::random_tensor({n, c}, rng, DType::f64, MemoryFormat::contiguous, -3, 3);
  const Tensor t = test::random_tensor({n, c}, rng, DType::f64, MemoryFormat::contiguous, -3, 3);
  const std::vector<int> yv{1, 4, 9, 0};
  const Tensor y = labels_of(yv);
  for (double T : {1.0, 4.0}) {
    const KdLossOptions o{T, 0.7};
    Tensor d = Tensor::zeros({n, c}, DType::f64);
    kd_loss(s, t, y, o, &d, 1.0);
    std::vector<double> ref_grad;
    kd_loss_reference(flat(s), flat(t), yv, n, c, o, &ref_grad);
    const double eps = 1e-6;
    for (int64_t k = 0; k < n * c; ++k) {
      const double x0 = s.at_flat(k);
      s.set_flat(k, x0 + eps);
      const double fp = kd_loss(s, t, y, o, nullptr, 1).total_sum;
      std::vector<double> sp = flat(s);
      const double rp = kd_loss_reference(sp, flat(t), yv, n, c, o, nullptr).total_sum;
      s.set_flat(k, x0 - eps);
      const double fm = kd_loss(s, t, y, o, nullptr, 1).total_sum;
      const double rm = kd_loss_reference(flat(s), flat(t), yv, n, c, o, nullptr).total_sum;
      s.set_flat(k, x0);
      EXPECT_NEAR(d.at_flat(k), (fp - fm) / (2 * eps), 1e-7) << "kernel, element " << k << " T=" << T;
      EXPECT_NEAR(ref_grad[k], (rp - rm) / (2 * eps), 1e-7) << "reference, element " << k << " T=" << T;
    }
  }
}

TEST(KdLoss, StableForLargeLogits) {
  Tensor s = Tensor::zeros({1, 3}, DType::f32), t = Tensor::zeros({1, 3}, DType::f32);
  s.set({0, 0}, 900);
  t.set({0, 1}, 1000);
  const KdLossResult r = kd_loss(s, t, labels_of({1}), {1.0, 0.5}, nullptr, 1);
  EXPECT_TRUE(std::isfinite(r.total_sum));
  EXPECT_NEAR(r.hard_sum, 900, 1e-3);
  EXPECT_NEAR(r.soft_sum, 900, 1e-3);  // p_t ~ onehot(1): KL ~ -log p_s(1) = 900
}

TEST(KdLoss, RejectsBadInputs) {
  Tensor s = Tensor::zeros({2, 3}, DType::f32), t = Tensor::zeros({2, 3}, DType::f32);
  const Tensor y = labels_of({0, 2});
  EXPECT_THROW(kd_loss(s, t, y, {0.0, 0.5}, nullptr, 1), ConfigError);
  EXPECT_THROW(kd_loss(s, t, y, {-1.0, 0.5}, nullptr, 1), ConfigError);
  EXPECT_THROW(kd_loss(s, t, y, {4.0, 1.5}, nullptr, 1), ConfigError);
  try {
    kd_loss(s, t, y, {4.0, -0.1}, nullptr, 1);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("distill.alpha"), std::string::npos) << e.what();
  }
  Tensor t2 = Tensor::zeros({2, 4}, DType::f32);
  EXPECT_THROW(kd_loss(s, t2, y, {4.0, 0.5}, nullptr, 1), Error);
  EXPECT_THROW(kd_loss(s, t, labels_of({0, 3}), {4.0, 0.5}, nullptr, 1), Error);  // label out of range
  EXPECT_THROW(kd_loss(s, Tensor::zeros({2, 3}, DType::f64), y, {4.0, 0.5}, nullptr, 1), Error);
  Tensor wrong = Tensor::zeros({3, 2}, DType::f32);
  EXPECT_THROW(kd_loss(s, t, y, {4.0, 0.5}, &wrong, 1), Error);
}

}  // namespace
}  // namespace lathe
