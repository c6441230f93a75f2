// Launchers for max pooling and ReLU directly on quantized 8-bit activations (the GPU side of
// engine/backend/cpu/int8_pool.h): both commute with an affine quantizer of positive scale, so
// they run on the integers and keep the input's quantization parameters, exactly as on the CPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lathe::kernels {

/// Max pooling of a dense channels-last [N, C, H, W] s8/u8 batch (memory N, H, W, C) into dense
/// channels-last [N, C, OH, OW]; padding positions are ignored (as -inf would be). A window that
/// holds no input element gives the dtype's lowest value, as the CPU loop does.
[[nodiscard]] cudaError_t int8_maxpool_nhwc(cudaStream_t stream, const void* src, bool is_signed, int64_t n, int64_t c,
                                            int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                                            int64_t ph, int64_t pw, int64_t oh, int64_t ow, void* dst);

/// x = max(x, zero_point clamped to the dtype) over `count` dense s8/u8 elements, in place: ReLU on quantized values.
[[nodiscard]] cudaError_t int8_relu(cudaStream_t stream, void* x, bool is_signed, int64_t count, int32_t zero_point);

}  // namespace lathe::kernels
