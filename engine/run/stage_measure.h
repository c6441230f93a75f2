// What the stages that replace the model (structured pruning, low-rank factorisation, ...) measure
// the same way: the new model's test accuracy under a prefix, a model's exact serialized size, and
// dense vs compressed latency timed in this run, alternately, on this device.
#pragma once

#include <map>
#include <string>

#include "engine/run/pipeline.h"

namespace lathe {

/// Evaluates ctx.model and logs only `<prefix>/test_accuracy` and `<prefix>/test_loss` at ctx.step
/// (test/* at this step already holds the training's last evaluation).
EvalResult evaluate_as(StageContext& ctx, const std::string& prefix);

/// Saves `model` at `path`, or, with no path, to a temporary file that is removed: either way the
/// exact serialized size in bytes.
int64_t saved_model_bytes(Model& model, Backend& be, const std::string& path,
                          const std::map<std::string, std::string>& metadata);

/// Puts `replacement` in ctx.model (the dense model goes to `dense`), logs
/// `<label>_before_finetune/*`, fine-tunes for `epochs` at train.optimizer.lr x `lr_scale` (a fresh
/// optimizer), and logs `<label>/test_accuracy` and `<prefix>/accuracy_drop_pt` (points below
/// `dense_accuracy`). False when a stop was requested on the way (nothing more is logged).
bool fine_tune_replacement(StageContext& ctx, std::unique_ptr<Model> replacement, std::unique_ptr<Model>& dense,
                           const std::string& label, const std::string& prefix, int64_t epochs, double lr_scale,
                           double dense_accuracy);

/// Dense and compressed latency at batch 1 and 256, alternating dense / compressed twice and keeping
/// each batch size's faster median, so a burst of load from other processes does not land on one
/// model only. Logs latency/dense/*, latency/<label>/* and <speedup_prefix>/speedup_b<N>.
void measure_dense_vs(StageContext& ctx, Model& dense, Model& compressed, const std::string& label,
                      const std::string& speedup_prefix);

}  // namespace lathe
