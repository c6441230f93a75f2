// forward_backward: the training step's model work.
#include "engine/run/train_step.h"

namespace lathe {

LossResult forward_backward(Model& model, LayerContext& ctx, const Tensor& images, const Tensor& labels,
                            double grad_scale, Tensor& diff_buf) {
  const Tensor& logits = model.forward(ctx, images);
  if (!diff_buf.defined() || diff_buf.shape() != logits.shape())
    diff_buf = ctx.backend.empty(logits.shape(), logits.dtype());
  const LossResult r = ctx.backend.softmax_cross_entropy(logits, labels, &diff_buf, grad_scale);
  model.backward(ctx, diff_buf);
  return r;
}

}  // namespace lathe
