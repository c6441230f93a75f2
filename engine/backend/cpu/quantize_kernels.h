// Fast f32 -> s8/u8 quantization of dense arrays: the cpu backend's quantize step (the INT8 model's
// input, the dynamic quantizer), and fake quantization (quantize then dequantize, QAT's operands at
// every training step). Parallel over chunks and vectorised, and bit-exact with quantize_value() /
// dequantize_value() of engine/backend/formats/quant_params.h (the reference): the same
// double-precision quotient, the same round-half-to-even, the same clamp, the same f32 product.
#pragma once

#include <cstdint>

namespace lathe::cpu {

/// out[i] = quantize_value(in[i], scale, zero_point, qmin, qmax) for i < n; out is int8_t* when
/// is_signed, else uint8_t*.
void quantize_per_tensor(const float* in, void* out, bool is_signed, int64_t n, float scale, int32_t zero_point,
                         int32_t qmin, int32_t qmax);

/// out[i] = dequantize_value(quantize_value(in[i], scale[c], zero_point[c], qmin, qmax), scale[c],
/// zero_point[c]) with c = i / inner, for i < channels * inner: `channels` consecutive blocks of
/// `inner` values, each with its own parameters (channels = 1: per tensor). in and out may alias.
void fake_quantize_blocks(const float* in, float* out, int64_t channels, int64_t inner, const float* scale,
                          const int32_t* zero_point, int32_t qmin, int32_t qmax);

}  // namespace lathe::cpu
