// Linear layers on cuBLAS: forward and both backward passes as single SGEMMs (row-major tensors
// mapped onto column-major cuBLAS without copies), bias + ReLU and the bias gradient on our kernels.
#pragma once

#include "engine/backend/backend.h"

namespace lathe::cuda {

class CudaContext;

/// dst [N, O] = act(src [N, K] * weights [O, K]^T + bias [O]).
void linear_forward(CudaContext& ctx, const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                    PostOp post);
/// diff_src [N, K] = diff_dst [N, O] * weights [O, K].
void linear_backward_data(CudaContext& ctx, const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src);
/// diff_weights [O, K] = diff_dst^T * src; diff_bias [O] = column sums of diff_dst (when given).
void linear_backward_weights(CudaContext& ctx, const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                             Tensor* diff_bias);

/// C [M, N] = op(A) * op(B) on row-major-or-column-major 2-D device tensors (any leading dimension);
/// C must be row-major with unit column stride. Exposed for benchmarks.
void sgemm(CudaContext& ctx, const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
           float alpha = 1.0f, float beta = 0.0f);

}  // namespace lathe::cuda
