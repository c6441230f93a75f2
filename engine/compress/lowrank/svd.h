// Truncated-SVD building block of the low-rank stage: a one-sided (Hestenes) Jacobi SVD in double.
// Accurate to working precision for every singular value (not only the large ones) and small
// enough to read; the sizes here (a few hundred rows and columns) take well under a second.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe {

/// A = U diag(s) V^T with k = min(m, n): U is m x k and V is n x k, both with orthonormal columns,
/// s descending and >= 0. Matrices are row-major.
struct Svd {
  int64_t m = 0, n = 0, k = 0;
  std::vector<double> u;  ///< m x k
  std::vector<double> s;  ///< k
  std::vector<double> v;  ///< n x k

  double u_at(int64_t i, int64_t j) const { return u[i * k + j]; }
  double v_at(int64_t i, int64_t j) const { return v[i * k + j]; }
};

/// The thin SVD of the row-major m x n matrix `a` (m, n >= 1). Columns of U for zero singular
/// values are completed to an orthonormal set. Throws lathe::Error for a size mismatch or a value
/// that is not finite.
Svd svd_jacobi(const std::vector<double>& a, int64_t m, int64_t n);

/// Sum of s[i]^2 for i >= r: the squared Frobenius error of the best rank-r approximation
/// (Eckart-Young).
double discarded_energy(const std::vector<double>& s, int64_t r);

}  // namespace lathe
