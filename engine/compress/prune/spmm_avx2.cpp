// AVX2 + FMA kernel for CSR x dense: each row of C is built in registers, 64 columns (8 ymm
// accumulators) at a time, one broadcast weight per nonzero times the matching row of B; a single
// column (batch 1) uses gathers along the row instead. Compiled with a target attribute so the
// file builds on any x86-64 compiler setting; spmm_rows only calls it when cpuid reports AVX2 + FMA.
#include <immintrin.h>

#include <algorithm>

#include "engine/compress/prune/spmm.h"

namespace lathe::detail {

namespace {

#define LATHE_AVX2 __attribute__((target("avx2,fma")))

LATHE_AVX2 inline __m256 post(__m256 v, bool relu) { return relu ? _mm256_max_ps(v, _mm256_setzero_ps()) : v; }

LATHE_AVX2 inline __m256i tail_mask(int64_t count) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes);
}

LATHE_AVX2 inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// One column of B: c[r] = bias + dot(row r of A, gathered B entries).
LATHE_AVX2 void single_column(const CsrMatrix& a, const SpmmArgs& x, int64_t r0, int64_t r1) {
  const __m256i ldb = _mm256_set1_epi32(static_cast<int>(x.ldb));
  for (int64_t r = r0; r < r1; ++r) {
    const int32_t end = a.row_ptr[r + 1];
    int32_t k = a.row_ptr[r];
    __m256 acc = _mm256_setzero_ps();
    for (; k + 8 <= end; k += 8) {
      const __m256i idx = _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(&a.col_idx[k])), ldb);
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(&a.values[k]), _mm256_i32gather_ps(x.b, idx, 4), acc);
    }
    float sum = horizontal_sum(acc) + (x.bias ? x.bias[r] : 0.0f);
    for (; k < end; ++k)
      sum += a.values[k] * x.b[static_cast<int64_t>(a.col_idx[k]) * x.ldb];
    x.c[r * x.ldc] = x.relu ? std::max(sum, 0.0f) : sum;
  }
}

}  // namespace

LATHE_AVX2 void spmm_rows_avx2(const CsrMatrix& a, const SpmmArgs& x, int64_t r0, int64_t r1) {
  if (x.n == 1)
    return single_column(a, x, r0, r1);
  const int32_t* cols = a.col_idx.data();
  const float* vals = a.values.data();
  for (int64_t r = r0; r < r1; ++r) {
    const int32_t k0 = a.row_ptr[r], k1 = a.row_ptr[r + 1];
    const __m256 init = _mm256_set1_ps(x.bias ? x.bias[r] : 0.0f);
    float* c = x.c + r * x.ldc;
    int64_t j = 0;
    for (; j + 64 <= x.n; j += 64) {
      __m256 c0 = init, c1 = init, c2 = init, c3 = init, c4 = init, c5 = init, c6 = init, c7 = init;
      for (int32_t k = k0; k < k1; ++k) {
        const __m256 w = _mm256_set1_ps(vals[k]);
        const float* b = x.b + static_cast<int64_t>(cols[k]) * x.ldb + j;
        c0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(b), c0);
        c1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(b + 8), c1);
        c2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(b + 16), c2);
        c3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(b + 24), c3);
        c4 = _mm256_fmadd_ps(w, _mm256_loadu_ps(b + 32), c4);
        c5 = _mm256_fmadd_ps(w, _mm256_loadu_ps(b + 40), c5);
        c6 = _mm256_fmadd_ps(w, _mm256_loadu_ps(b + 48), c6);
        c7 = _mm256_fmadd_ps(w, _mm256_loadu_ps(b + 56), c7);
      }
      _mm256_storeu_ps(c + j, post(c0, x.relu));
      _mm256_storeu_ps(c + j + 8, post(c1, x.relu));
      _mm256_storeu_ps(c + j + 16, post(c2, x.relu));
      _mm256_storeu_ps(c + j + 24, post(c3, x.relu));
      _mm256_storeu_ps(c + j + 32, post(c4, x.relu));
      _mm256_storeu_ps(c + j + 40, post(c5, x.relu));
      _mm256_storeu_ps(c + j + 48, post(c6, x.relu));
      _mm256_storeu_ps(c + j + 56, post(c7, x.relu));
    }
    for (; j + 16 <= x.n; j += 16) {
      __m256 c0 = init, c1 = init;
      for (int32_t k = k0; k < k1; ++k) {
        const __m256 w = _mm256_set1_ps(vals[k]);
        const float* b = x.b + static_cast<int64_t>(cols[k]) * x.ldb + j;
        c0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(b), c0);
        c1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(b + 8), c1);
      }
      _mm256_storeu_ps(c + j, post(c0, x.relu));
      _mm256_storeu_ps(c + j + 8, post(c1, x.relu));
    }
    for (; j < x.n; j += 8) {
      const __m256i m = tail_mask(x.n - j);  // all lanes when 8 or more remain
      __m256 c0 = init;
      for (int32_t k = k0; k < k1; ++k) {
        const float* b = x.b + static_cast<int64_t>(cols[k]) * x.ldb + j;
        c0 = _mm256_fmadd_ps(_mm256_set1_ps(vals[k]), _mm256_maskload_ps(b, m), c0);
      }
      _mm256_maskstore_ps(c + j, m, post(c0, x.relu));
    }
  }
}

}  // namespace lathe::detail
