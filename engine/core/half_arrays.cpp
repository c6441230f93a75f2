// F16C and scalar array conversions between f32 and f16 (see half_arrays.h).
#include "engine/core/half_arrays.h"

#include <cpuid.h>
#include <immintrin.h>

#include "engine/core/dtype.h"

namespace lathe {

bool cpu_has_f16c() {
  // CPUID leaf 1, ECX bit 29: clang's __builtin_cpu_supports does not know "f16c" (gcc's does).
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && __builtin_cpu_supports("avx");
  }();
  return has;
}

namespace {

void to_f16_scalar(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = f32_to_f16(src[i]);
}
void to_f32_scalar(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = f16_to_f32(src[i]);
}
void sum_scalar(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = f32_to_f16(f16_to_f32(a[i]) + f16_to_f32(b[i]));
}

// The hardware quiets NaNs and keeps their payload where the scalar rule writes one canonical NaN:
// a block whose f32 side holds a NaN is redone by the scalar rule (gradients hardly ever have one).
__attribute__((target("avx,f16c"))) inline bool has_nan(__m256 x) {
  return _mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0;
}

__attribute__((target("avx,f16c"))) void to_f16_f16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    if (has_nan(x))
      to_f16_scalar(src + i, dst + i, 8);
    else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  to_f16_scalar(src + i, dst + i, n - i);
}

__attribute__((target("avx,f16c"))) void to_f32_f16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    if (has_nan(x))
      to_f32_scalar(src + i, dst + i, 8);
    else
      _mm256_storeu_ps(dst + i, x);
  }
  to_f32_scalar(src + i, dst + i, n - i);
}

__attribute__((target("avx,f16c"))) void sum_f16c(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    const __m256 s = _mm256_add_ps(x, y);  // a NaN operand (or inf - inf) makes s NaN
    if (has_nan(s))
      sum_scalar(a + i, b + i, out + i, 8);
    else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                       _mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  sum_scalar(a + i, b + i, out + i, n - i);
}

}  // namespace

void f32_to_f16_array(const float* src, uint16_t* dst, int64_t n) {
  if (cpu_has_f16c())
    return to_f16_f16c(src, dst, n);
  to_f16_scalar(src, dst, n);
}

void f16_to_f32_array(const uint16_t* src, float* dst, int64_t n) {
  if (cpu_has_f16c())
    return to_f32_f16c(src, dst, n);
  to_f32_scalar(src, dst, n);
}

void f16_sum_array(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n) {
  if (cpu_has_f16c())
    return sum_f16c(a, b, out, n);
  sum_scalar(a, b, out, n);
}

}  // namespace lathe
