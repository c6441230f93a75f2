// ISA dispatch, threading, the scalar kernel and the reference for the CSR x dense products.
#include "engine/backend/cpu/spmm.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "engine/core/error.h"

namespace lathe {

const char* spmm_isa_name(SpmmIsa isa) {
  switch (isa) {
    case SpmmIsa::scalar:
      return "scalar";
    case SpmmIsa::avx2:
      return "avx2+fma";
    case SpmmIsa::avx512:
      return "avx512f";
  }
  return "?";
}

bool spmm_isa_supported(SpmmIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
    case SpmmIsa::scalar:
      return true;
    case SpmmIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case SpmmIsa::avx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
#else
  return isa == SpmmIsa::scalar;
#endif
}

SpmmIsa spmm_best_isa() {
  static const SpmmIsa best = spmm_isa_supported(SpmmIsa::avx512) ? SpmmIsa::avx512
                              : spmm_isa_supported(SpmmIsa::avx2) ? SpmmIsa::avx2
                                                                  : SpmmIsa::scalar;
  return best;
}

namespace {

void check_args(const CsrMatrix& a, const SpmmArgs& x) {
  LATHE_CHECK(x.n >= 0 && x.ldb >= x.n && x.ldc >= x.n, "spmm: n ", x.n, ", ldb ", x.ldb, ", ldc ", x.ldc,
              " (need ldb, ldc >= n >= 0)");
  LATHE_CHECK((x.b || a.cols == 0 || x.n == 0) && (x.c || a.rows == 0 || x.n == 0), "spmm: null B or C");
  LATHE_CHECK(static_cast<int64_t>(a.row_ptr.size()) == a.rows + 1, "spmm: CSR matrix has ", a.row_ptr.size(),
              " row pointers for ", a.rows, " rows");
}

void spmm_rows_scalar(const CsrMatrix& a, const SpmmArgs& x, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    float* c = x.c + r * x.ldc;
    const float init = x.bias ? x.bias[r] : 0.0f;
    std::fill(c, c + x.n, init);
    for (int32_t k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
      const float w = a.values[k];
      const float* b = x.b + static_cast<int64_t>(a.col_idx[k]) * x.ldb;
      for (int64_t j = 0; j < x.n; ++j)
        c[j] += w * b[j];
    }
    if (x.relu)
      for (int64_t j = 0; j < x.n; ++j)
        c[j] = std::max(c[j], 0.0f);
  }
}

}  // namespace

void spmm_rows(const CsrMatrix& a, const SpmmArgs& args, int64_t row_begin, int64_t row_end, SpmmIsa isa) {
  LATHE_CHECK(spmm_isa_supported(isa), "spmm: this CPU does not support ", spmm_isa_name(isa));
  LATHE_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= a.rows, "spmm: rows [", row_begin, ", ", row_end,
              ") outside [0, ", a.rows, ")");
  switch (isa) {
    case SpmmIsa::scalar:
      return spmm_rows_scalar(a, args, row_begin, row_end);
    case SpmmIsa::avx2:
      return detail::spmm_rows_avx2(a, args, row_begin, row_end);
    case SpmmIsa::avx512:
      return detail::spmm_rows_avx512(a, args, row_begin, row_end);
  }
}

void spmm(const CsrMatrix& a, const SpmmArgs& args, SpmmIsa isa) {
  check_args(a, args);
  const int64_t work = a.nnz() * std::max<int64_t>(args.n, 1);
  const int threads = omp_in_parallel() || work < 32768 ? 1 : std::min<int64_t>(omp_get_max_threads(), a.rows);
  if (threads <= 1)
    return spmm_rows(a, args, 0, a.rows, isa);
  // Split rows so each thread gets about the same number of nonzeros (pruned rows vary a lot).
  std::vector<int64_t> bounds(threads + 1, a.rows);
  bounds[0] = 0;
  for (int t = 1, r = 0; t < threads; ++t) {
    const int64_t target = a.nnz() * t / threads;
    while (r < a.rows && a.row_ptr[r] < target)
      ++r;
    bounds[t] = r;
  }
  for (int t = 1; t <= threads; ++t)
    bounds[t] = std::max(bounds[t], bounds[t - 1]);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int t = 0; t < threads; ++t)
    spmm_rows(a, args, bounds[t], bounds[t + 1], isa);
}

void spmm_reference(const CsrMatrix& a, const SpmmArgs& x) {
  check_args(a, x);
  std::vector<double> acc(x.n);
  for (int64_t r = 0; r < a.rows; ++r) {
    std::fill(acc.begin(), acc.end(), x.bias ? static_cast<double>(x.bias[r]) : 0.0);
    for (int32_t k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k)
      for (int64_t j = 0; j < x.n; ++j)
        acc[j] += static_cast<double>(a.values[k]) * x.b[a.col_idx[k] * x.ldb + j];
    for (int64_t j = 0; j < x.n; ++j)
      x.c[r * x.ldc + j] = static_cast<float>(x.relu ? std::max(acc[j], 0.0) : acc[j]);
  }
}

}  // namespace lathe
