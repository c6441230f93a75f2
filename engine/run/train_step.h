// One micro-batch of training (forward, softmax cross-entropy, backward) and evaluation over a
// dataset. Shared by the trainer, the throughput benchmark and the tests, so all run the same work.
#pragma once

#include "engine/data/loader.h"
#include "engine/nn/model.h"

namespace lathe {

/// Runs forward and backward on one batch; parameter gradients are overwritten with
/// grad_scale * d(sum of per-sample losses)/d(param). `diff_buf` is reused between calls.
LossResult forward_backward(Model& model, LayerContext& ctx, const Tensor& images, const Tensor& labels,
                            double grad_scale, Tensor& diff_buf);

/// A host batch on the backend's device (a view, no copy, on the CPU backends); device buffers are
/// reused while the batch shape stays the same.
struct DeviceBatch {
  Tensor images, labels;
  void load(Backend& be, const Batch& b);
};

struct EvalResult {
  double loss = 0, accuracy = 0;  // mean cross-entropy and top-1 accuracy
  int64_t correct = 0, samples = 0;
};

/// Evaluation-mode forward over every sample of `data`, in order, `batch_size` at a time.
EvalResult evaluate(Model& model, Backend& be, const Dataset& data, int64_t batch_size);

}  // namespace lathe
