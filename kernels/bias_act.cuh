// Launchers for bias + optional ReLU over activations seen as [outer, channels, inner] (linear
// [N, O]: inner = 1; conv NCHW: outer = N, inner = H*W; conv NHWC: outer = N*H*W, inner = 1), and
// for the bias gradient: per-channel sums over outer and inner, accumulated in double.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lathe::kernels {

/// y[o, c, i] = act(y[o, c, i] + bias[c]) for a dense [outer, channels, inner] tensor; bias may be
/// null (ReLU only). `row_stride` is the distance between consecutive `outer` rows (channels * inner
/// when dense; larger for a padded linear output with inner == 1).
[[nodiscard]] cudaError_t bias_act(cudaStream_t stream, float* y, int64_t outer, int64_t channels, int64_t inner,
                                   int64_t row_stride, const float* bias, bool relu);

/// Bytes of device scratch channel_sums needs for this shape.
size_t channel_sums_scratch_bytes(int64_t outer, int64_t channels, int64_t inner);
/// dst[c] = sum over o, i of src[o * row_stride + c * inner + i]. Deterministic (fixed reduction tree).
[[nodiscard]] cudaError_t channel_sums(cudaStream_t stream, const float* src, int64_t outer, int64_t channels,
                                       int64_t inner, int64_t row_stride, float* dst, void* scratch);

}  // namespace lathe::kernels
