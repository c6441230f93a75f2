// The batch loops every part of the engine runs on: one micro-batch of training (forward, softmax
// cross-entropy, backward), the pass over a dataset in order with a per-batch callback, and the one
// evaluation loop (the f32 model, an INT8 model on the CPU or a GPU, calibration statistics all go
// through it). Shared by the trainer, the stages, the benchmarks and the tests, so all run the same
// work.
#pragma once

#include <functional>

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
  double loss_sum = 0;  // summed cross-entropy: loss = loss_sum / samples
};

/// Calls `fn(host batch, the batch on be's device)` for every sample of `data`, in order,
/// `batch_size` at a time (the last batch smaller).
void for_each_batch(Backend& be, const Dataset& data, int64_t batch_size,
                    const std::function<void(const Batch&, DeviceBatch&)>& fn);

/// Mean cross-entropy and top-1 accuracy of the logits `forward` gives for each batch, scored by
/// `be` (whose device the logits must be on).
EvalResult evaluate_logits(Backend& be, const Dataset& data, int64_t batch_size,
                           const std::function<Tensor(const Batch&, DeviceBatch&)>& forward);

/// Evaluation-mode forward of `model` over every sample of `data`, in order, `batch_size` at a time.
EvalResult evaluate(Model& model, Backend& be, const Dataset& data, int64_t batch_size);

}  // namespace lathe
