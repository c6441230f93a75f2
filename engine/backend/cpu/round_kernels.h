// Fast loops that round dense f32 arrays to the values bf16 or f16 can hold (kept in f32): the
// emulation of low-precision compute on CPUs without bf16/f16 arithmetic. Bit-exact with the scalar
// conversions in engine/core/dtype.h (round to nearest even, f16 subnormals, overflow to inf).
#pragma once

#include <cstdint>

namespace lathe::cpu {

/// dst[i] = bf16 value nearest src[i] (NaN stays NaN). src may equal dst.
void round_to_bf16(const float* src, float* dst, int64_t n);
/// dst[i] = f16 value nearest src[i]. Uses the F16C instructions when the CPU has them (checked at
/// run time), else the portable scalar conversion. src may equal dst.
void round_to_f16(const float* src, float* dst, int64_t n);
/// Portable scalar path of round_to_f16, exposed so tests can compare the two.
void round_to_f16_scalar(const float* src, float* dst, int64_t n);
// Whether round_to_f16 takes the F16C path: lathe::cpu_has_f16c() (engine/core/half_arrays.h).

}  // namespace lathe::cpu
