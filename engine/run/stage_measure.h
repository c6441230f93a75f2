// What the stages that replace the model (structured pruning, low-rank factorisation, ...) measure
// the same way: the dense baseline, the new model's test accuracy under a prefix, a model's exact
// serialized size and its file, and dense vs compressed latency timed in this run, alternately, on
// this device.
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

/// The dense model a stage is about to replace, measured in this run before it goes.
struct DenseBaseline {
  EvalResult eval;                          ///< its test accuracy and loss (logged as dense/test_*)
  int64_t bytes = 0;                        ///< its exact serialized size (logged as model/dense_bytes)
  std::map<std::string, std::string> meta;  ///< what the run's model files carry: format, lathe_model, lathe_run
};

/// Evaluates ctx.model as "dense", measures its serialized size (a temporary file) and logs
/// model/dense_bytes and model/dense_params at ctx.step.
DenseBaseline measure_dense_baseline(StageContext& ctx);

/// Saves ctx.model (the replacement) as <run dir>/model.<kind>.safetensors (a temporary file where
/// the run has no folder) with the baseline's metadata, lathe_kind = `kind` and `extra`; logs the
/// artifact, model/dense_bytes, model/bytes and <prefix>/bytes_ratio at ctx.step. Returns its bytes.
int64_t save_replacement(StageContext& ctx, const DenseBaseline& dense, const std::string& kind,
                         const std::string& prefix, const std::map<std::string, std::string>& extra);

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
