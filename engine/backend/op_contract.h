// The op contract (shapes, dtypes, devices) of every backend op, checked once before any backend's
// implementation runs: Backend's non-virtual entry points (linear / conv2d and their backward
// passes, pooling, elementwise, batch norm, dropout, loss, optimizers, sums, copy / reorder) and the
// prepared kernels' forward / run call these, so a
// backend never repeats them and every backend refuses a bad call with the same message, which
// names the op and the shapes ("linear_forward: src [2, 3] f32 ... ").
#pragma once

#include <initializer_list>

#include "engine/backend/compressed_ops.h"
#include "engine/backend/op_params.h"
#include "engine/core/tensor.h"

namespace lathe::contract {

/// src [N, K], weights [O, K], bias [O] or null, dst [N, O]; float dtypes; one device.
void linear_forward(const Tensor& src, const Tensor& weights, const Tensor* bias, const Tensor& dst);
/// diff_dst [N, O], weights [O, K], diff_src [N, K].
void linear_backward_data(const Tensor& diff_dst, const Tensor& weights, const Tensor& diff_src);
/// src [N, K], diff_dst [N, O], diff_weights [O, K], diff_bias [O] or null.
void linear_backward_weights(const Tensor& src, const Tensor& diff_dst, const Tensor& diff_weights,
                             const Tensor* diff_bias);
/// src [N, C, H, W], weights [O, C, KH, KW], bias [O] or null, dst [N, O, OH, OW] with OH, OW from p.
/// The backward passes check the same geometry on their tensors (diff_src in src's place, diff_dst
/// in dst's, diff_weights / diff_bias in the weights' / bias's), named by `op`.
void conv2d_forward(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                    const Tensor& dst, const char* op = "conv2d_forward");

/// A layer a backend can prepare: s8 host weights [O, K] (linear) or [O, C, KH, KW] (conv), O output
/// scales and bias entries, 8-bit per-tensor src / dst parameters, positive strides.
void int8_layer(const Int8LayerData& layer, const ConvParams* conv);
/// The src of a prepared INT8 kernel (see Int8Kernel::forward) on `device`.
void int8_forward(const Int8Kernel& kernel, const Tensor& src, Device device);

/// A valid CSR matrix (CsrMatrix::validate) with s32-addressable sizes.
void sparse_matrix(const CsrMatrix& a);
/// b [cols, n], c [rows, n] f32 with dense rows, bias [rows] f32 or null, all on `device`.
void sparse_matmul(const CsrMatrix& a, const Tensor& b, const Tensor* bias, const Tensor& c, Device device);
/// Raw-row operands: ldb, ldc >= n >= 0, B and C present when there is work.
void sparse_matmul_rows(const CsrMatrix& a, const SpmmArgs& args);

/// quantize: f32 src and s8/u8 dst (params.storage_dtype()) of one shape, dense, on one device;
/// per-tensor parameters. dequantize: the reverse.
void quantize(const Tensor& src, const QuantParams& params, const Tensor& dst);
void dequantize(const Tensor& src, const QuantParams& params, const Tensor& dst);
/// s8/u8 channels-last dense src [N, C, H, W], dst [N, C, OH, OW] of the same dtype and layout.
void int8_maxpool2d(const PoolParams& p, const Tensor& src, const Tensor& dst);
/// A dense s8/u8 tensor.
void int8_relu(const Tensor& t);

// ---- the lighter ops (op_contract_ops.cpp): float operands, shapes as Backend documents them ----
/// src [N, C, H, W], dst [N, C, OH, OW] with OH, OW from p (positive kernel and stride).
void maxpool2d_forward(const PoolParams& p, const Tensor& src, const Tensor& dst);
/// diff_dst [N, C, OH, OW] of diff_src [N, C, H, W] under p; a workspace from maxpool2d_forward.
void maxpool2d_backward(const PoolParams& p, const Tensor& diff_dst, const Tensor& workspace, const Tensor& diff_src);
/// Float operands of one shape and dtype (relu_forward, relu_backward, add, axpy); `op` names the call.
void same_shape(const char* op, std::initializer_list<const Tensor*> operands);
/// A defined float tensor (scale).
void float_tensor(const char* op, const Tensor& t);
/// src and dst [N, C, H, W] of one shape; every per-channel tensor [C] (batchnorm forward).
void batchnorm(const char* op, const Tensor& src, const Tensor& dst, std::initializer_list<const Tensor*> per_channel);
/// p in [0, 1); src and dst of one shape (float); mask (u8, of that shape) when `mask` is given.
void dropout(const char* op, double p, const Tensor& src, const Tensor& dst, const Tensor* mask);
/// logits [N, C] float, labels s32 [N], diff_logits [N, C] float or null.
void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor* diff_logits);
/// A defined tensor (sum, sum_squares).
void defined_tensor(const char* op, const Tensor& t);
/// src and dst defined and of one shape; of one dtype unless `convert` (reorder converts dtype).
void copy(const char* op, const Tensor& src, const Tensor& dst, bool convert);

}  // namespace lathe::contract
