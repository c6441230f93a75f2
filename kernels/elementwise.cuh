// Launchers for dense f32 elementwise ops over n elements (the caller makes operands share one
// dense layout first). In-place use (dst == src) is allowed everywhere.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lathe::kernels {

/// dst = max(src, 0)
[[nodiscard]] cudaError_t relu_forward(cudaStream_t stream, const float* src, float* dst, int64_t n);
/// diff_src = dst > 0 ? diff_dst : 0   (dst is the forward output)
[[nodiscard]] cudaError_t relu_backward(cudaStream_t stream, const float* dst, const float* diff_dst, float* diff_src,
                                        int64_t n);
/// dst = a + b
[[nodiscard]] cudaError_t add(cudaStream_t stream, const float* a, const float* b, float* dst, int64_t n);
/// dst += alpha * src
[[nodiscard]] cudaError_t axpy(cudaStream_t stream, float alpha, const float* src, float* dst, int64_t n);
/// t *= alpha
[[nodiscard]] cudaError_t scale(cudaStream_t stream, float* t, float alpha, int64_t n);
/// t = value
[[nodiscard]] cudaError_t fill(cudaStream_t stream, float* t, float value, int64_t n);

}  // namespace lathe::kernels
