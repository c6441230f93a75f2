// Array conversions between f32 and IEEE half (f16) and the f16 sum the 16-bit gradient all-reduce
// applies on every ring hop. They take the F16C instructions when the CPU has them (checked once at
// run time) and are bit-exact with the scalar f32_to_f16 / f16_to_f32 of engine/core/dtype.h,
// NaN included for the conversions (a block of 8 holding a NaN takes the scalar rule). The sum of two
// NaNs is a NaN whose sign IEEE 754 leaves open (the compiler may swap an add's operands).
#pragma once

#include <cstdint>

namespace lathe {

/// dst[i] = f32_to_f16(src[i]).
void f32_to_f16_array(const float* src, uint16_t* dst, int64_t n);
/// dst[i] = f16_to_f32(src[i]).
void f16_to_f32_array(const uint16_t* src, float* dst, int64_t n);
/// out[i] = f32_to_f16(f16_to_f32(a[i]) + f16_to_f32(b[i])). out may equal a or b.
void f16_sum_array(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n);
/// Whether this CPU has F16C (and AVX), i.e. whether the conversions above are vectorised.
bool cpu_has_f16c();

}  // namespace lathe
