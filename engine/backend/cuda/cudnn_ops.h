// Convolutions on cuDNN (legacy API, still in cuDNN 9): forward, backward data, backward filter,
// with the algorithm chosen once per problem shape (cudnnGet_v7 heuristics, or cudnnFind when the
// context asks to benchmark) and cached in the CudaContext; workspace from the context. NCHW and
// NHWC tensors are described by their strides; the filter is given in the activations' format.
// Bias + ReLU and the bias gradient run on our kernels.
#pragma once

#include "engine/backend/backend.h"

namespace lathe::cuda {

class CudaContext;

void conv2d_forward(CudaContext& ctx, const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                    Tensor& dst, PostOp post);
void conv2d_backward_data(CudaContext& ctx, const ConvParams& p, const Tensor& diff_dst, const Tensor& weights,
                          Tensor& diff_src);
void conv2d_backward_weights(CudaContext& ctx, const ConvParams& p, const Tensor& src, const Tensor& diff_dst,
                             Tensor& diff_weights, Tensor* diff_bias);

}  // namespace lathe::cuda
