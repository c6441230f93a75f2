// One-sided Jacobi SVD: rotate pairs of columns of A (or A^T, whichever has fewer columns) until
// all are orthogonal; the column norms are then the singular values, the normalised columns U and
// the accumulated rotations V. Converges quadratically; each sweep visits every pair once.
#include "engine/compress/lowrank/svd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/core/error.h"

namespace lathe {

namespace {

constexpr int kMaxSweeps = 60;

/// Four partial sums, so the compiler can vectorise without reassociating a single sum.
double dot(const double* x, const double* y, int64_t len) {
  double acc[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= len; i += 4)
    for (int k = 0; k < 4; ++k)
      acc[k] += x[i + k] * y[i + k];
  for (; i < len; ++i)
    acc[0] += x[i] * y[i];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/// Rotates columns x, y by (c, s): x' = c x - s y, y' = s x + c y.
void rotate(double* x, double* y, int64_t len, double c, double s) {
  for (int64_t i = 0; i < len; ++i) {
    const double xi = x[i], yi = y[i];
    x[i] = c * xi - s * yi;
    y[i] = s * xi + c * yi;
  }
}

/// Completes column j of the column-major p x q matrix `cols` (unit columns where `ok`) with a unit
/// vector orthogonal to every other accepted column: the first standard basis vector that survives
/// two rounds of Gram-Schmidt.
void complete_column(std::vector<double>& cols, int64_t p, int64_t q, std::vector<char>& ok, int64_t j) {
  double* x = cols.data() + j * p;
  for (int64_t e = 0; e < p; ++e) {
    std::fill(x, x + p, 0.0);
    x[e] = 1;
    for (int round = 0; round < 2; ++round)
      for (int64_t o = 0; o < q; ++o)
        if (ok[o] && o != j) {
          const double* y = cols.data() + o * p;
          const double d = dot(x, y, p);
          for (int64_t i = 0; i < p; ++i)
            x[i] -= d * y[i];
        }
    const double norm = std::sqrt(dot(x, x, p));
    if (norm > 0.5) {
      for (int64_t i = 0; i < p; ++i)
        x[i] /= norm;
      ok[j] = 1;
      return;
    }
  }
  LATHE_CHECK(false, "svd: could not complete an orthonormal basis");
}

}  // namespace

Svd svd_jacobi(const std::vector<double>& a, int64_t m, int64_t n) {
  LATHE_CHECK(m >= 1 && n >= 1 && static_cast<int64_t>(a.size()) == m * n, "svd: ", a.size(), " values for a ", m,
              " x ", n, " matrix");
  for (double x : a)
    LATHE_CHECK(std::isfinite(x), "svd: the matrix holds a value that is not finite");
  // Work on W (p x q, p >= q) stored as q contiguous columns: W = A when m >= n, else A^T.
  const bool transposed = m < n;
  const int64_t p = transposed ? n : m, q = transposed ? m : n;
  std::vector<double> w(p * q), vw(q * q, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if (transposed)
        w[i * p + j] = a[i * n + j];  // column i of A^T is row i of A
      else
        w[j * p + i] = a[i * n + j];
    }
  for (int64_t j = 0; j < q; ++j)
    vw[j * q + j] = 1;

  // Squared column norms are carried through each rotation (alpha' = alpha - t gamma, beta' = beta
  // + t gamma) and recomputed at every sweep's start, so a pair costs one dot product, not three.
  const double eps = std::numeric_limits<double>::epsilon();
  std::vector<double> sq(q);
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    for (int64_t j = 0; j < q; ++j)
      sq[j] = dot(w.data() + j * p, w.data() + j * p, p);
    bool rotated = false;
    for (int64_t i = 0; i + 1 < q; ++i)
      for (int64_t j = i + 1; j < q; ++j) {
        double* x = w.data() + i * p;
        double* y = w.data() + j * p;
        const double alpha = sq[i], beta = sq[j], gamma = dot(x, y, p);
        if (gamma == 0 || std::abs(gamma) <= eps * std::sqrt(alpha * beta))
          continue;
        rotated = true;
        // The rotation that zeroes the (i, j) entry of W^T W (Golub & Van Loan 8.6.2).
        const double zeta = (beta - alpha) / (2 * gamma);
        const double t = std::copysign(1.0, zeta) / (std::abs(zeta) + std::sqrt(1 + zeta * zeta));
        const double c = 1 / std::sqrt(1 + t * t), s = c * t;
        rotate(x, y, p, c, s);
        rotate(vw.data() + i * q, vw.data() + j * q, q, c, s);
        sq[i] = std::max(alpha - t * gamma, 0.0);
        sq[j] = beta + t * gamma;
      }
    if (!rotated)
      break;
    LATHE_CHECK(sweep + 1 < kMaxSweeps, "svd: Jacobi sweeps did not converge for a ", m, " x ", n, " matrix");
  }

  // Singular values are the column norms; order them descending.
  std::vector<double> norms(q);
  for (int64_t j = 0; j < q; ++j)
    norms[j] = std::sqrt(dot(w.data() + j * p, w.data() + j * p, p));
  std::vector<int64_t> order(q);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return norms[x] > norms[y]; });

  const double tiny = std::max(norms[order[0]], 1e-300) * static_cast<double>(std::max(p, q)) * eps;
  std::vector<double> uw(p * q, 0.0);  // column-major, sorted
  std::vector<char> ok(q, 0);
  Svd out;
  out.m = m;
  out.n = n;
  out.k = q;
  out.s.resize(q);
  for (int64_t r = 0; r < q; ++r) {
    const int64_t j = order[r];
    const double sigma = norms[j];
    if (sigma > tiny) {
      out.s[r] = sigma;
      for (int64_t i = 0; i < p; ++i)
        uw[r * p + i] = w[j * p + i] / sigma;
      ok[r] = 1;
    } else {
      out.s[r] = 0;  // numerically zero: its column is completed below
    }
  }
  for (int64_t r = 0; r < q; ++r)
    if (!ok[r])
      complete_column(uw, p, q, ok, r);

  // W = Uw S Vw^T; A = W (U = Uw, V = Vw) or A = W^T (U = Vw, V = Uw).
  std::vector<double> u_rows(p * q), v_rows(q * q);
  for (int64_t r = 0; r < q; ++r) {
    for (int64_t i = 0; i < p; ++i)
      u_rows[i * q + r] = uw[r * p + i];
    for (int64_t i = 0; i < q; ++i)
      v_rows[i * q + r] = vw[order[r] * q + i];
  }
  if (transposed) {
    out.u = std::move(v_rows);  // m x k (m = q)
    out.v = std::move(u_rows);  // n x k (n = p)
  } else {
    out.u = std::move(u_rows);
    out.v = std::move(v_rows);
  }
  return out;
}

double discarded_energy(const std::vector<double>& s, int64_t r) {
  double acc = 0;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(r, 0)); i < s.size(); ++i)
    acc += s[i] * s[i];
  return acc;
}

}  // namespace lathe
