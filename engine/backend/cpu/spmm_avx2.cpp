// AVX2 + FMA instantiation of the CSR x dense kernel (spmm_kernel.h): 8-float ymm vectors, tails
// through maskload/maskstore, batch 1 through gathers. Compiled for AVX2 + FMA by a target region (GCC
// pragma or clang attribute) around the kernel only; spmm_rows calls it only when cpuid reports both.
#include <cstdint>

#include "engine/backend/cpu/spmm.h"

#include <immintrin.h>

// GCC's target pragma; clang ignores it (and -march=native lacks the ISA on a machine without
// it), so there the same region is an attribute on every function in it.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

#include "engine/backend/cpu/spmm_kernel.h"

namespace lathe::detail {

namespace {

struct Avx2 {
  using Reg = __m256;
  static constexpr int kWidth = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float v) { return _mm256_set1_ps(v); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg relu(Reg v) { return _mm256_max_ps(v, _mm256_setzero_ps()); }
  /// Lanes below `count` (all of them when count >= 8).
  static __m256i tail(int64_t count) {
    const int n = count > kWidth ? kWidth : static_cast<int>(count);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Reg load_masked(const float* p, __m256i m) { return _mm256_maskload_ps(p, m); }
  static void store_masked(float* p, __m256i m, Reg v) { _mm256_maskstore_ps(p, m, v); }
  /// b[cols[i] * ldb] for the 8 entries of cols.
  static Reg gather(const float* b, const int32_t* cols, int64_t ldb) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cols)),
                                           _mm256_set1_epi32(static_cast<int>(ldb)));
    return _mm256_i32gather_ps(b, idx, 4);
  }
  static float sum(Reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

}  // namespace

void spmm_rows_avx2(const CsrMatrix& a, const SpmmArgs& x, int64_t r0, int64_t r1) {
  spmm_rows_simd<Avx2>(a, x, r0, r1);
}

}  // namespace lathe::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
