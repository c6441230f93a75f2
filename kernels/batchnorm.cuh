// Launchers for 2-D batch normalisation over [N, C, H, W] f32 tensors of any strides (NCHW or
// channels-last), with ReferenceBackend's semantics: batch statistics in double (two-pass mean and
// biased variance), running stats updated with the unbiased variance and PyTorch's momentum.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lathe::kernels {

struct Dims4 {
  int64_t n, c, h, w;
};
/// Element strides of a 4-D tensor, by logical dimension.
struct Strides4 {
  int64_t n, c, h, w;
};

/// Per-channel vectors (gamma, beta, mean, invstd, running stats) are dense f32 [C].
[[nodiscard]] cudaError_t batchnorm_forward_training(cudaStream_t stream, Dims4 dims, const float* src,
                                                     Strides4 src_strides, float* dst, Strides4 dst_strides,
                                                     const float* gamma, const float* beta, float* save_mean,
                                                     float* save_invstd, float* running_mean, float* running_var,
                                                     double eps, double momentum);

[[nodiscard]] cudaError_t batchnorm_forward_inference(cudaStream_t stream, Dims4 dims, const float* src,
                                                      Strides4 src_strides, float* dst, Strides4 dst_strides,
                                                      const float* gamma, const float* beta, const float* running_mean,
                                                      const float* running_var, double eps);

/// diff_gamma = sum dy*xhat, diff_beta = sum dy, dx = g*invstd*(dy - mean(dy) - xhat*mean(dy*xhat)).
[[nodiscard]] cudaError_t batchnorm_backward(cudaStream_t stream, Dims4 dims, const float* src, Strides4 src_strides,
                                             const float* diff_dst, Strides4 diff_dst_strides, const float* gamma,
                                             const float* save_mean, const float* save_invstd, float* diff_src,
                                             Strides4 diff_src_strides, float* diff_gamma, float* diff_beta);

}  // namespace lathe::kernels
