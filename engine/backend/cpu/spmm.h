// The CPU kernels of Backend::make_sparse_matmul (SpmmArgs and SpmmIsa: compressed_ops.h).
// Sparse x dense matrix products for pruned layers on the CPU: C = post(bias + A * B) with A a CSR
// weight [rows, cols] and B dense [cols, n] row-major, so the batch (Linear) or the output pixels
// (Conv2d via im2col) run along the vectorised dimension n. Kernels: scalar, AVX2 + FMA and
// AVX-512, chosen at run time by cpuid (spmm_best_isa); spmm_reference (double accumulation) is
// the oracle the parity tests hold the fast ones to.
#pragma once

#include <cstdint>

#include "engine/backend/compressed_ops.h"
#include "engine/backend/formats/csr_matrix.h"

namespace lathe {

/// "scalar", "avx2+fma", "avx512f".
const char* spmm_isa_name(SpmmIsa isa);
/// Whether this CPU can run `isa` (cpuid; scalar always).
bool spmm_isa_supported(SpmmIsa isa);
/// The widest supported ISA (AVX-512 > AVX2 + FMA > scalar).
SpmmIsa spmm_best_isa();

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
