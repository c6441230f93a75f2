// Fast per-tensor f32 -> s8/u8 quantization of dense arrays: the cpu backend's quantize step (the
// INT8 model's input, the dynamic quantizer). Parallel over chunks and vectorised, and bit-exact with
// quantize_value() of engine/backend/formats/quant_params.h (the reference): the same double-precision
// quotient, the same round-half-to-even, the same clamp.
#pragma once

#include <cstdint>

namespace lathe::cpu {

/// out[i] = quantize_value(in[i], scale, zero_point, qmin, qmax) for i < n; out is int8_t* when
/// is_signed, else uint8_t*.
void quantize_per_tensor(const float* in, void* out, bool is_signed, int64_t n, float scale, int32_t zero_point,
                         int32_t qmin, int32_t qmax);

}  // namespace lathe::cpu
