// The Jacobi SVD against oracles that do not share its code: U S V^T reconstructs W to 1e-10, U and
// V have orthonormal columns, the singular values match hand-computed 2x2 / 3x3 cases and the
// eigenvalues of W^T W found by power iteration with deflation, and sum sigma^2 = ||W||_F^2.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/compress/lowrank/svd.h"
#include "engine/core/error.h"
#include "engine/core/rng.h"

namespace lathe {
namespace {

std::vector<double> random_matrix(int64_t m, int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> a(static_cast<size_t>(m * n));
  for (double& x : a)
    x = rng.normal();
  return a;
}

/// max |A - U S V^T|, max |U^T U - I|, max |V^T V - I|.
void expect_exact_factorisation(const std::vector<double>& a, const Svd& d) {
  ASSERT_EQ(d.k, std::min(d.m, d.n));
  double rec = 0, ou = 0, ov = 0;
  for (int64_t i = 0; i < d.m; ++i)
    for (int64_t j = 0; j < d.n; ++j) {
      double x = 0;
      for (int64_t r = 0; r < d.k; ++r)
        x += d.u_at(i, r) * d.s[r] * d.v_at(j, r);
      rec = std::max(rec, std::abs(x - a[i * d.n + j]));
    }
  for (int64_t p = 0; p < d.k; ++p)
    for (int64_t q = 0; q < d.k; ++q) {
      double uu = 0, vv = 0;
      for (int64_t i = 0; i < d.m; ++i)
        uu += d.u_at(i, p) * d.u_at(i, q);
      for (int64_t j = 0; j < d.n; ++j)
        vv += d.v_at(j, p) * d.v_at(j, q);
      ou = std::max(ou, std::abs(uu - (p == q)));
      ov = std::max(ov, std::abs(vv - (p == q)));
    }
  EXPECT_LT(rec, 1e-10);
  EXPECT_LT(ou, 1e-10);
  EXPECT_LT(ov, 1e-10);
  for (int64_t r = 0; r + 1 < d.k; ++r)
    EXPECT_GE(d.s[r], d.s[r + 1]);
  EXPECT_GE(d.s.back(), 0);
}

/// The largest `count` eigenvalues of the symmetric n x n matrix `g` by power iteration, deflating
/// each found eigenpair (Hotelling): an oracle that shares nothing with the Jacobi rotations.
std::vector<double> top_eigenvalues(std::vector<double> g, int64_t n, int count) {
  std::vector<double> out;
  Rng rng(99);
  for (int e = 0; e < count; ++e) {
    std::vector<double> v(n), w(n);
    for (double& x : v)
      x = rng.uniform(-1, 1);
    double lambda = 0;
    for (int it = 0; it < 5000; ++it) {
      for (int64_t i = 0; i < n; ++i) {
        w[i] = 0;
        for (int64_t j = 0; j < n; ++j)
          w[i] += g[i * n + j] * v[j];
      }
      double norm = 0;
      for (double x : w)
        norm += x * x;
      norm = std::sqrt(norm);
      for (int64_t i = 0; i < n; ++i)
        v[i] = w[i] / norm;
      lambda = norm;
    }
    out.push_back(lambda);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        g[i * n + j] -= lambda * v[i] * v[j];
  }
  return out;
}

TEST(LowRankSvd, HandComputed2x2) {
  // A^T A = [[25, 20], [20, 25]]: eigenvalues 45 and 5.
  const std::vector<double> a = {3, 0, 4, 5};
  const Svd d = svd_jacobi(a, 2, 2);
  EXPECT_NEAR(d.s[0], std::sqrt(45.0), 1e-14);
  EXPECT_NEAR(d.s[1], std::sqrt(5.0), 1e-14);
  expect_exact_factorisation(a, d);
}

TEST(LowRankSvd, HandComputed3x3) {
  // A = R diag(5, 3, 1) with R a rotation by theta in the (0, 1) plane (and a sign): sigma = 5, 3, 1.
  const double c = std::cos(0.7), s = std::sin(0.7);
  const std::vector<double> a = {5 * c, -3 * s, 0, 5 * s, 3 * c, 0, 0, 0, -1};
  const Svd d = svd_jacobi(a, 3, 3);
  EXPECT_NEAR(d.s[0], 5, 1e-14);
  EXPECT_NEAR(d.s[1], 3, 1e-14);
  EXPECT_NEAR(d.s[2], 1, 1e-14);
  expect_exact_factorisation(a, d);
  // A diagonal matrix out of order, with a negative entry: |entries|, sorted.
  const std::vector<double> diag = {2, 0, 0, 0, -3, 0, 0, 0, 1};
  const Svd dd = svd_jacobi(diag, 3, 3);
  EXPECT_DOUBLE_EQ(dd.s[0], 3);
  EXPECT_DOUBLE_EQ(dd.s[1], 2);
  EXPECT_DOUBLE_EQ(dd.s[2], 1);
  expect_exact_factorisation(diag, dd);
}

TEST(LowRankSvd, TallAndWideRandomMatricesAgainstPowerIteration) {
  for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{{40, 25}, {25, 40}, {64, 64}, {1, 6}, {6, 1}}) {
    SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n));
    const std::vector<double> a = random_matrix(m, n, 7 + m);
    const Svd d = svd_jacobi(a, m, n);
    expect_exact_factorisation(a, d);
    double frob = 0, sum_s2 = 0;
    for (double x : a)
      frob += x * x;
    for (double x : d.s)
      sum_s2 += x * x;
    EXPECT_NEAR(sum_s2, frob, 1e-10 * frob);
    // Eigenvalues of the smaller Gram matrix (A^T A or A A^T) are sigma^2.
    const int64_t g = std::min(m, n);
    std::vector<double> gram(static_cast<size_t>(g * g), 0.0);
    for (int64_t p = 0; p < g; ++p)
      for (int64_t q = 0; q < g; ++q)
        for (int64_t t = 0; t < std::max(m, n); ++t)
          gram[p * g + q] += m >= n ? a[t * n + p] * a[t * n + q] : a[p * n + t] * a[q * n + t];
    const std::vector<double> eig = top_eigenvalues(gram, g, static_cast<int>(std::min<int64_t>(3, g)));
    for (size_t e = 0; e < eig.size(); ++e)
      EXPECT_NEAR(d.s[e] * d.s[e], eig[e], 1e-8 * eig[0]) << "eigenvalue " << e;
  }
}

TEST(LowRankSvd, RankDeficientMatrixStillHasOrthonormalFactors) {
  // Rank 2: rows are combinations of two random rows; two singular values are zero.
  const std::vector<double> basis = random_matrix(2, 6, 3);
  const std::vector<double> coef = random_matrix(5, 2, 4);
  std::vector<double> a(5 * 6, 0.0);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 6; ++j)
      a[i * 6 + j] = coef[i * 2] * basis[j] + coef[i * 2 + 1] * basis[6 + j];
  const Svd d = svd_jacobi(a, 5, 6);
  expect_exact_factorisation(a, d);
  EXPECT_GT(d.s[1], 1e-3);
  EXPECT_LT(d.s[2], 1e-12);
  EXPECT_LT(d.s[4], 1e-12);
  // The zero matrix: all sigma 0, factors orthonormal, reconstruction exact.
  const std::vector<double> zero(12, 0.0);
  const Svd z = svd_jacobi(zero, 3, 4);
  expect_exact_factorisation(zero, z);
  EXPECT_EQ(z.s[0], 0);
}

TEST(LowRankSvd, DiscardedEnergyIsTheTailOfSigmaSquared) {
  EXPECT_DOUBLE_EQ(discarded_energy({4, 3, 2, 1}, 2), 4 + 1);
  EXPECT_DOUBLE_EQ(discarded_energy({4, 3, 2, 1}, 0), 30);
  EXPECT_DOUBLE_EQ(discarded_energy({4, 3, 2, 1}, 4), 0);
}

TEST(LowRankSvd, RejectsBadInput) {
  EXPECT_THROW(svd_jacobi({1, 2, 3}, 2, 2), Error);
  EXPECT_THROW(svd_jacobi({1, NAN, 3, 4}, 2, 2), Error);
}

}  // namespace
}  // namespace lathe
