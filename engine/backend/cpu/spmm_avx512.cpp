// AVX-512 (F) instantiation of the CSR x dense kernel (spmm_kernel.h): 16-float zmm vectors, tails
// through mask registers, batch 1 through gathers. Compiled for AVX-512F by a target region (GCC pragma or
// clang attribute) around the kernel only; spmm_rows calls it only when cpuid reports AVX-512F.
// GCC 12 warns about its own AVX-512 headers here (a known false positive of -Wmaybe-uninitialized).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <cstdint>

#include "engine/backend/cpu/spmm.h"

#include <immintrin.h>

// GCC's target pragma; clang ignores it (and -march=native lacks the ISA on a machine without
// it), so there the same region is an attribute on every function in it.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif

#include "engine/backend/cpu/spmm_kernel.h"

namespace lathe::detail {

namespace {

struct Avx512 {
  using Reg = __m512;
  static constexpr int kWidth = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float v) { return _mm512_set1_ps(v); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg relu(Reg v) { return _mm512_max_ps(v, _mm512_setzero_ps()); }
  /// Lanes below `count` (all of them when count >= 16).
  static __mmask16 tail(int64_t count) {
    return count >= kWidth ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1u);
  }
  static Reg load_masked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_masked(float* p, __mmask16 m, Reg v) { _mm512_mask_storeu_ps(p, m, v); }
  /// b[cols[i] * ldb] for the 16 entries of cols.
  static Reg gather(const float* b, const int32_t* cols, int64_t ldb) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_loadu_si512(cols), _mm512_set1_epi32(static_cast<int>(ldb)));
    return _mm512_i32gather_ps(idx, b, 4);
  }
  static float sum(Reg v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace

void spmm_rows_avx512(const CsrMatrix& a, const SpmmArgs& x, int64_t r0, int64_t r1) {
  spmm_rows_simd<Avx512>(a, x, r0, r1);
}

}  // namespace lathe::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
