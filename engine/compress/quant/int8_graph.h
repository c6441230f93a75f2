// Graph facts the INT8 planner needs beyond a chain: who reads each node, which ReLU the Model
// fuses into a layer, which BatchNorm can be folded into the conv before it, and the fold itself.
// A BatchNorm in evaluation mode is an affine map per channel, so after a conv that feeds nothing
// else it folds into that conv's weights and bias (in f32, before calibration):
//   w'[o] = w[o] * a[o],  b'[o] = (b[o] - mean[o]) * a[o] + beta[o],  a[o] = gamma[o] / sqrt(var[o] + eps)
// (computed in double, stored as f32); the folded conv's output is the BatchNorm node's output.
#pragma once

#include <vector>

#include "engine/nn/model.h"

namespace lathe {

/// Per node, the nodes that read its output (in node order).
std::vector<std::vector<int>> node_consumers(const Model& model);

/// True when every node reads exactly the node before it (or the model input for the first).
bool is_chain(const Model& model);

/// The ReLU node the Model fuses into node i (Model::set_fuse_relu: a Linear/Conv2d whose only
/// reader is a ReLU), or -1.
int relu_fused_by_model(const Model& model, const std::vector<std::vector<int>>& consumers, size_t i);

/// The batchnorm2d node that can be folded into conv2d node i: its only reader, when that reader is
/// a batchnorm2d; -1 otherwise (another reader would see the unfolded output).
int foldable_batchnorm(const Model& model, const std::vector<std::vector<int>>& consumers, size_t i);

struct FoldedConv {
  Tensor weight;  ///< f32 [O, C, KH, KW]
  Tensor bias;    ///< f32 [O]
};

/// Folds an evaluation-mode BatchNorm (per-channel gamma, beta, running mean and variance, eps)
/// into the conv before it (see the header). Host f32 tensors; `bias` may be null (zero). Throws
/// lathe::Error on shapes that do not match [O, ...] / [O].
FoldedConv fold_batchnorm(const Tensor& weight, const Tensor* bias, const Tensor& gamma, const Tensor& beta,
                          const Tensor& mean, const Tensor& var, double eps);

}  // namespace lathe
