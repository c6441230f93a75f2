// One micro-batch of training: forward, softmax cross-entropy, backward. Shared by the trainer and
// the throughput benchmark so both measure exactly the same work.
#pragma once

#include "engine/nn/model.h"

namespace lathe {

/// Runs forward and backward on one batch; parameter gradients are overwritten with
/// grad_scale * d(sum of per-sample losses)/d(param). `diff_buf` is reused between calls.
LossResult forward_backward(Model& model, LayerContext& ctx, const Tensor& images, const Tensor& labels,
                            double grad_scale, Tensor& diff_buf);

}  // namespace lathe
