// Sparse x dense matrix products for pruned layers on the CPU: C = post(bias + A * B) with A a CSR
// weight [rows, cols] and B dense [cols, n] row-major, so the batch (Linear) or the output pixels
// (Conv2d via im2col) run along the vectorised dimension n. Kernels: scalar, AVX2 + FMA and
// AVX-512, chosen at run time by cpuid (spmm_best_isa); spmm_reference (double accumulation) is
// the oracle the parity tests hold the fast ones to.
#pragma once

#include <cstdint>

#include "engine/compress/prune/csr_matrix.h"

namespace lathe {

enum class SpmmIsa { scalar, avx2, avx512 };

/// "scalar", "avx2+fma", "avx512f".
const char* spmm_isa_name(SpmmIsa isa);
/// Whether this CPU can run `isa` (cpuid; scalar always).
bool spmm_isa_supported(SpmmIsa isa);
/// The widest supported ISA (AVX-512 > AVX2 + FMA > scalar).
SpmmIsa spmm_best_isa();

/// C[r, j] = post(bias[r] + sum_k A[r, k] * B[k, j]) for r < a.rows, j < n.
struct SpmmArgs {
  const float* b = nullptr;
  int64_t ldb = 0;  ///< row stride of B (>= n)
  float* c = nullptr;
  int64_t ldc = 0;  ///< row stride of C (>= n)
  int64_t n = 0;
  const float* bias = nullptr;  ///< a.rows entries, or null
  bool relu = false;
};

/// Rows [row_begin, row_end) on the calling thread with `isa` (which must be supported).
void spmm_rows(const CsrMatrix& a, const SpmmArgs& args, int64_t row_begin, int64_t row_end, SpmmIsa isa);
/// All rows, split over OpenMP threads unless called inside a parallel region.
void spmm(const CsrMatrix& a, const SpmmArgs& args, SpmmIsa isa = spmm_best_isa());
/// The oracle: plain loops, double accumulation, one thread.
void spmm_reference(const CsrMatrix& a, const SpmmArgs& args);

namespace detail {
void spmm_rows_avx2(const CsrMatrix& a, const SpmmArgs& args, int64_t row_begin, int64_t row_end);
void spmm_rows_avx512(const CsrMatrix& a, const SpmmArgs& args, int64_t row_begin, int64_t row_end);
}  // namespace detail

}  // namespace lathe
