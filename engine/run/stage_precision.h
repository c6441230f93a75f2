// The mixed-precision stage (train.precision = bf16 | f16): the model's Linear/Conv2d layers compute
// at bf16/f16 with f32 master weights for the whole run (PyTorch autocast semantics, see
// engine/nn/matmul_precision.h); f16 adds dynamic loss scaling (engine/compress/precision/
// loss_scaler.h) through the training loop's hooks: the loss gradient is scaled, the gradients are
// unscaled and checked before each update, a step with inf/nan is skipped. A "precision" event says
// whether the device runs real bf16/f16 kernels or the emulation (values rounded, f32 arithmetic),
// and the metric train/precision_emulated repeats it (1 = emulated) so emulated speed is never
// mistaken for bf16 speed. Metrics (f16): train/loss_scale, train/skipped_steps.
#pragma once

#include <memory>

#include "engine/compress/precision/loss_scaler.h"
#include "engine/run/pipeline.h"

namespace lathe {

struct PrecisionStage {
  DType precision = DType::f32;
  bool emulated = false;               ///< some matmul op of the model has no native kernel here
  std::unique_ptr<LossScaler> scaler;  ///< f16 only
};

/// The DType of train.precision (fp32 -> f32).
DType compute_dtype(Precision p);

/// What the precision event says about `backend` at `precision`: {"precision", "linear", "conv2d"
/// ("native" or "emulated"), "note"}.
nlohmann::json precision_path(const Backend& backend, DType precision);

/// The type the matmuls compute at when training at `precision` on `backend`: `precision` where its
/// linear kernels are native, else f32 (emulation rounds to `precision` but computes in f32). MFU is
/// measured against this type's peak (the trainer, bench/train_throughput).
DType matmul_dtype(const Backend& backend, DType precision);

/// nullptr at fp32. Otherwise sets ctx.model's compute precision, logs the precision event and
/// chains its hooks onto `hooks` (calling any hook already set there). Keep the result alive for
/// the training phase.
std::unique_ptr<PrecisionStage> attach_precision_stage(StageContext& ctx, TrainHooks& hooks);

}  // namespace lathe
