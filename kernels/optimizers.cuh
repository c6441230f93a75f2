// Launchers for the in-place optimizer updates over dense f32 parameters, with the semantics of
// ReferenceBackend::sgd_update / adamw_update (PyTorch's SGD with momentum and L2 weight decay, and
// AdamW with decoupled decay and bias correction).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lathe::kernels {

/// d = g + wd*w; if momentum_buf: buf = mu*buf + d, d = nesterov ? d + mu*buf : buf; w -= lr*d.
/// Computed in f32 like the reference. momentum_buf is null when momentum == 0.
[[nodiscard]] cudaError_t sgd_update(cudaStream_t stream, float* param, const float* grad, float* momentum_buf,
                                     int64_t n, float lr, float momentum, float weight_decay, bool nesterov);

/// w *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; w -= lr * (m/bc1) / (sqrt(v/bc2) + eps),
/// with bc1 = 1 - b1^step, bc2 = 1 - b2^step; arithmetic in double, stored as f32, like the reference.
[[nodiscard]] cudaError_t adamw_update(cudaStream_t stream, float* param, const float* grad, float* m, float* v,
                                       int64_t n, double lr, double beta1, double beta2, double eps,
                                       double weight_decay, double bias_correction1, double bias_correction2);

}  // namespace lathe::kernels
