// Sparse kernels: every ISA this CPU supports against the double-precision reference, and the
// reference against a plain dense product computed independently from the dense matrix, at
// densities 0..1, odd shapes (tails of every vector width), strided B/C, bias and ReLU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/backend/formats/csr_matrix.h"
#include "engine/backend/cpu/spmm.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

struct Case {
  int64_t rows, cols, n;
  double density;
};

/// A [rows, cols] tensor with about `density` of its entries nonzero.
Tensor sparse_random(int64_t rows, int64_t cols, double density, Rng& rng) {
  Tensor t = Tensor::zeros({rows, cols}, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i)
    if (rng.uniform(0, 1) < density)
      t.set_flat(i, rng.uniform(-1, 1));
  return t;
}

struct Problem {
  Tensor a_dense;
  CsrMatrix a;
  std::vector<float> b, bias;
  int64_t ldb, ldc;
};

Problem make_problem(const Case& c, Rng& rng) {
  Problem p;
  p.a_dense = sparse_random(c.rows, c.cols, c.density, rng);
  p.a = CsrMatrix::from_dense(p.a_dense);
  p.ldb = c.n + 3;
  p.ldc = c.n + 5;
  p.b.resize(c.cols * p.ldb);
  for (float& v : p.b)
    v = static_cast<float>(rng.uniform(-1, 1));
  p.bias.resize(c.rows);
  for (float& v : p.bias)
    v = static_cast<float>(rng.uniform(-1, 1));
  return p;
}

SpmmArgs args_for(const Problem& p, const Case& c, std::vector<float>& out, bool bias, bool relu) {
  out.assign(c.rows * p.ldc, -777.0f);  // the padding between rows must stay untouched
  SpmmArgs a;
  a.b = p.b.data(), a.ldb = p.ldb, a.c = out.data(), a.ldc = p.ldc, a.n = c.n;
  a.bias = bias ? p.bias.data() : nullptr;
  a.relu = relu;
  return a;
}

const std::vector<Case> kCases = {{1, 1, 1, 1.0},      {7, 13, 1, 0.5},   {9, 40, 1, 0.3},    {33, 17, 3, 0.7},
                                  {64, 100, 65, 0.05}, {5, 9, 130, 0.95}, {17, 31, 200, 0.2}, {12, 50, 16, 0.0},
                                  {20, 64, 257, 1.0},  {3, 288, 196, 0.2}};

TEST(Spmm, ReferenceMatchesIndependentDenseProduct) {
  Rng rng(1);
  for (const Case& c : kCases)
    for (bool relu : {false, true}) {
      Problem p = make_problem(c, rng);
      std::vector<float> out;
      spmm_reference(p.a, args_for(p, c, out, true, relu));
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t j = 0; j < c.n; ++j) {
          double want = p.bias[r];
          for (int64_t k = 0; k < c.cols; ++k)
            want += p.a_dense.at_flat(r * c.cols + k) * static_cast<double>(p.b[k * p.ldb + j]);
          if (relu)
            want = std::max(want, 0.0);
          ASSERT_NEAR(out[r * p.ldc + j], want, 1e-5 * (1 + std::fabs(want))) << r << "," << j;
        }
    }
}

void check_isa(SpmmIsa isa) {
  Rng rng(2);
  for (const Case& c : kCases)
    for (bool bias : {false, true})
      for (bool relu : {false, true}) {
        SCOPED_TRACE(testing::Message() << spmm_isa_name(isa) << " " << c.rows << "x" << c.cols << " n=" << c.n
                                        << " density " << c.density << " bias " << bias << " relu " << relu);
        Problem p = make_problem(c, rng);
        std::vector<float> want, got;
        spmm_reference(p.a, args_for(p, c, want, bias, relu));
        spmm(p.a, args_for(p, c, got, bias, relu), isa);
        for (int64_t r = 0; r < c.rows; ++r)
          for (int64_t j = 0; j < p.ldc; ++j) {
            const float w = want[r * p.ldc + j], g = got[r * p.ldc + j];
            if (j >= c.n)
              ASSERT_EQ(g, -777.0f) << "wrote past n at " << r << "," << j;
            else
              ASSERT_NEAR(g, w, 1e-5 * (1 + std::fabs(w))) << r << "," << j;
          }
      }
}

TEST(Spmm, ScalarMatchesReference) { check_isa(SpmmIsa::scalar); }

TEST(Spmm, Avx2MatchesReference) {
  if (!spmm_isa_supported(SpmmIsa::avx2))
    GTEST_SKIP() << "this CPU has no AVX2 + FMA";
  check_isa(SpmmIsa::avx2);
}

TEST(Spmm, Avx512MatchesReference) {
  if (!spmm_isa_supported(SpmmIsa::avx512))
    GTEST_SKIP() << "this CPU has no AVX-512F (the kernel is compiled in and runs where cpuid reports it)";
  check_isa(SpmmIsa::avx512);
}

TEST(Spmm, BestIsaIsSupportedAndUnsupportedIsRefused) {
  EXPECT_TRUE(spmm_isa_supported(spmm_best_isa()));
  if (!spmm_isa_supported(SpmmIsa::avx512)) {
    Rng rng(3);
    Problem p = make_problem({4, 4, 4, 0.5}, rng);
    std::vector<float> out;
    EXPECT_THROW(spmm(p.a, args_for(p, {4, 4, 4, 0.5}, out, false, false), SpmmIsa::avx512), Error);
  }
}

TEST(CsrMatrix, RoundTripsAndCountsDensity) {
  Rng rng(4);
  Tensor w = Tensor::zeros({6, 2, 3, 3}, DType::f32);
  for (int64_t i = 0; i < w.numel(); i += 3)
    w.set_flat(i, rng.uniform(0.1, 1));
  const CsrMatrix m = CsrMatrix::from_dense(w);
  EXPECT_EQ(m.rows, 6);
  EXPECT_EQ(m.cols, 18);
  EXPECT_EQ(m.nnz(), 36);
  EXPECT_DOUBLE_EQ(m.density(), 36.0 / 108.0);
  EXPECT_NO_THROW(m.validate());
  EXPECT_TRUE(test::all_close(m.to_dense(w.shape()), w, 0, 0));
}

TEST(CsrMatrix, ValidateRejectsMalformed) {
  CsrMatrix m = CsrMatrix::from_dense(Tensor::zeros({2, 3}, DType::f32));
  m.row_ptr = {0, 1, 2};
  m.col_idx = {1, 3};  // 3 is out of range
  m.values = {1, 2};
  EXPECT_THROW(m.validate(), DataError);
  m.col_idx = {1, 0};
  EXPECT_NO_THROW(m.validate());
  m.row_ptr = {0, 2, 1};
  EXPECT_THROW(m.validate(), DataError);
  m.row_ptr = {0, 1};
  EXPECT_THROW(m.validate(), DataError);
}

}  // namespace
}  // namespace lathe
