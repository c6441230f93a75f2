// Rounding loops for the emulated bf16/f16 compute path (see round_kernels.h).
#include "engine/backend/cpu/round_kernels.h"

#include <immintrin.h>

#include <cstring>

#include "engine/core/dtype.h"
#include "engine/core/half_arrays.h"

namespace lathe::cpu {

void round_to_bf16(const float* src, float* dst, int64_t n) {
  // The same bit arithmetic as f32_to_bf16, without branches so that it vectorises.
#pragma omp parallel for simd schedule(static) if (n > (1 << 18))
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], 4);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    const uint32_t quiet_nan = (u & 0xffff0000u) | 0x00400000u;
    const uint32_t out = nan ? quiet_nan : rounded;
    std::memcpy(&dst[i], &out, 4);
  }
}

void round_to_f16_scalar(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = f16_to_f32(f32_to_f16(src[i]));
}

namespace {
__attribute__((target("avx,f16c"))) void round_to_f16_f16c(const float* src, float* dst, int64_t n) {
  const int64_t vec_end = n - n % 8;
#pragma omp parallel for schedule(static) if (n > (1 << 18))
  for (int64_t i = 0; i < vec_end; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  round_to_f16_scalar(src + vec_end, dst + vec_end, n - vec_end);
}
}  // namespace

void round_to_f16(const float* src, float* dst, int64_t n) {
  if (cpu_has_f16c())
    return round_to_f16_f16c(src, dst, n);
  round_to_f16_scalar(src, dst, n);
}

}  // namespace lathe::cpu
