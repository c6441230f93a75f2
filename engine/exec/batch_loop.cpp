// forward_backward, DeviceBatch, the in-order batch loop and the evaluation built on it.
#include "engine/exec/batch_loop.h"

#include <algorithm>

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

void DeviceBatch::load(Backend& be, const Batch& b) {
  if (be.device().is_cpu()) {
    images = b.images;
    labels = b.labels;
    return;
  }
  if (!images.defined() || images.shape() != b.images.shape()) {
    images = be.empty(b.images.shape(), b.images.dtype());
    labels = be.empty(b.labels.shape(), b.labels.dtype());
  }
  be.copy(b.images, images);
  be.copy(b.labels, labels);
}

void for_each_batch(Backend& be, const Dataset& data, int64_t batch_size,
                    const std::function<void(const Batch&, DeviceBatch&)>& fn) {
  LoaderOptions lo;
  lo.batch_size = batch_size;
  lo.shuffle = false;
  DataLoader loader(data, lo);
  loader.start_epoch(0);
  Batch b;
  DeviceBatch db;
  while (loader.next(b)) {
    db.load(be, b);
    fn(b, db);
  }
}

EvalResult evaluate_logits(Backend& be, const Dataset& data, int64_t batch_size,
                           const std::function<Tensor(const Batch&, DeviceBatch&)>& forward) {
  EvalResult r;
  double loss = 0;
  for_each_batch(be, data, batch_size, [&](const Batch& b, DeviceBatch& db) {
    const LossResult l = be.softmax_cross_entropy(forward(b, db), db.labels, nullptr, 1.0);
    loss += l.loss_sum;
    r.correct += l.correct;
    r.samples += b.labels.dim(0);
  });
  const double n = static_cast<double>(std::max<int64_t>(r.samples, 1));
  r.loss_sum = loss;
  r.loss = loss / n;
  r.accuracy = static_cast<double>(r.correct) / n;
  return r;
}

EvalResult evaluate(Model& model, Backend& be, const Dataset& data, int64_t batch_size) {
  LayerContext ctx{be, false, 0};
  return evaluate_logits(be, data, batch_size,
                         [&](const Batch&, DeviceBatch& db) { return model.forward(ctx, db.images); });
}

}  // namespace lathe
