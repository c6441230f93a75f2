// AVX-512 (F) kernel for CSR x dense: the AVX2 kernel's scheme at twice the width, 128 columns (8
// zmm accumulators) at a time and masked loads/stores for the tail; a single column uses gathers.
// Compiled with a target attribute; spmm_rows only calls it when cpuid reports AVX-512F.
// GCC 12 warns about its own AVX-512 headers here (a known false positive of -Wmaybe-uninitialized).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "engine/compress/prune/spmm.h"

namespace lathe::detail {

namespace {

#define LATHE_AVX512 __attribute__((target("avx512f")))

LATHE_AVX512 inline __m512 post(__m512 v, bool relu) { return relu ? _mm512_max_ps(v, _mm512_setzero_ps()) : v; }

LATHE_AVX512 void single_column(const CsrMatrix& a, const SpmmArgs& x, int64_t r0, int64_t r1) {
  const __m512i ldb = _mm512_set1_epi32(static_cast<int>(x.ldb));
  for (int64_t r = r0; r < r1; ++r) {
    const int32_t end = a.row_ptr[r + 1];
    int32_t k = a.row_ptr[r];
    __m512 acc = _mm512_setzero_ps();
    for (; k + 16 <= end; k += 16) {
      const __m512i idx = _mm512_mullo_epi32(_mm512_loadu_si512(&a.col_idx[k]), ldb);
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(&a.values[k]), _mm512_i32gather_ps(idx, x.b, 4), acc);
    }
    float sum = _mm512_reduce_add_ps(acc) + (x.bias ? x.bias[r] : 0.0f);
    for (; k < end; ++k)
      sum += a.values[k] * x.b[static_cast<int64_t>(a.col_idx[k]) * x.ldb];
    x.c[r * x.ldc] = x.relu ? std::max(sum, 0.0f) : sum;
  }
}

}  // namespace

LATHE_AVX512 void spmm_rows_avx512(const CsrMatrix& a, const SpmmArgs& x, int64_t r0, int64_t r1) {
  if (x.n == 1)
    return single_column(a, x, r0, r1);
  const int32_t* cols = a.col_idx.data();
  const float* vals = a.values.data();
  for (int64_t r = r0; r < r1; ++r) {
    const int32_t k0 = a.row_ptr[r], k1 = a.row_ptr[r + 1];
    const __m512 init = _mm512_set1_ps(x.bias ? x.bias[r] : 0.0f);
    float* c = x.c + r * x.ldc;
    int64_t j = 0;
    for (; j + 128 <= x.n; j += 128) {
      __m512 c0 = init, c1 = init, c2 = init, c3 = init, c4 = init, c5 = init, c6 = init, c7 = init;
      for (int32_t k = k0; k < k1; ++k) {
        const __m512 w = _mm512_set1_ps(vals[k]);
        const float* b = x.b + static_cast<int64_t>(cols[k]) * x.ldb + j;
        c0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(b), c0);
        c1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(b + 16), c1);
        c2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(b + 32), c2);
        c3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(b + 48), c3);
        c4 = _mm512_fmadd_ps(w, _mm512_loadu_ps(b + 64), c4);
        c5 = _mm512_fmadd_ps(w, _mm512_loadu_ps(b + 80), c5);
        c6 = _mm512_fmadd_ps(w, _mm512_loadu_ps(b + 96), c6);
        c7 = _mm512_fmadd_ps(w, _mm512_loadu_ps(b + 112), c7);
      }
      _mm512_storeu_ps(c + j, post(c0, x.relu));
      _mm512_storeu_ps(c + j + 16, post(c1, x.relu));
      _mm512_storeu_ps(c + j + 32, post(c2, x.relu));
      _mm512_storeu_ps(c + j + 48, post(c3, x.relu));
      _mm512_storeu_ps(c + j + 64, post(c4, x.relu));
      _mm512_storeu_ps(c + j + 80, post(c5, x.relu));
      _mm512_storeu_ps(c + j + 96, post(c6, x.relu));
      _mm512_storeu_ps(c + j + 112, post(c7, x.relu));
    }
    for (; j + 32 <= x.n; j += 32) {
      __m512 c0 = init, c1 = init;
      for (int32_t k = k0; k < k1; ++k) {
        const __m512 w = _mm512_set1_ps(vals[k]);
        const float* b = x.b + static_cast<int64_t>(cols[k]) * x.ldb + j;
        c0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(b), c0);
        c1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(b + 16), c1);
      }
      _mm512_storeu_ps(c + j, post(c0, x.relu));
      _mm512_storeu_ps(c + j + 16, post(c1, x.relu));
    }
    for (; j < x.n; j += 16) {
      const int64_t left = std::min<int64_t>(x.n - j, 16);
      const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
      __m512 c0 = init;
      for (int32_t k = k0; k < k1; ++k) {
        const float* b = x.b + static_cast<int64_t>(cols[k]) * x.ldb + j;
        c0 = _mm512_fmadd_ps(_mm512_set1_ps(vals[k]), _mm512_maskz_loadu_ps(m, b), c0);
      }
      _mm512_mask_storeu_ps(c + j, m, post(c0, x.relu));
    }
  }
}

}  // namespace lathe::detail
