// What the stages that replace the model (structured pruning, low-rank factorisation, ...) measure
// the same way: the dense baseline, the new model's test accuracy under a prefix, a model's exact
// serialized size and its file, and dense vs compressed latency timed in this run, alternately, on
// this device; and their checkpoint state (ReplacementRun): a resumed run rebuilds the
// replacement's shapes from the dense weights.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/run/pipeline.h"
#include "engine/run/stage.h"

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

/// A model-replacing stage's run once it has replaced the model (its Stage::save_state): the dense
/// baseline, the dense weights (host copies) and what describes the replacement's shapes in its
/// file's metadata. A checkpoint of its fine-tuning, or of any later phase, carries this, and a
/// resumed run rebuilds the replacement's shapes from the dense weights (restore_replacement):
/// the rebuild (structured pruning, SVD) is a function of those weights and the config.
struct ReplacementRun {
  bool replaced = false;  ///< set when the replacement goes into ctx.model, before its fine-tuning
  DenseBaseline baseline;
  std::map<std::string, std::string> file_meta;  ///< e.g. lathe_pruned_channels: JSON of the shapes
  /// The dense model's parameters and buffers by name, host copies taken when it was replaced.
  std::vector<std::pair<std::string, Tensor>> dense_tensors;
  std::unique_ptr<Model> dense;  ///< the dense model itself, for the latency comparison at the end
};

/// The checkpoint state of `run` ({} until it has replaced the model): the baseline, the metadata
/// and the dense tensors as "dense/<name>".
StageState replacement_state(const ReplacementRun& run);
/// Reads replacement_state()'s JSON and tensors back into `run` (the dense model is not rebuilt:
/// restore_replacement does that). DataError naming what is missing.
void load_replacement_state(const StageState& state, ReplacementRun& run);
/// A resumed run whose checkpoint was written after the stage replaced the model: loads the dense
/// weights of `run` into ctx.model (the model the stage replaced: the run's, or an earlier stage's
/// replacement, rebuilt first), has `rebuild` make the replacement from it, keeps the dense model
/// in run.dense and puts the replacement (its shapes; the checkpoint's weights load next) in
/// ctx.model. DataError when the dense weights do not fit ctx.model.
void restore_replacement(StageContext& ctx, ReplacementRun& run,
                         const std::function<std::unique_ptr<Model>(Model& dense)>& rebuild);

/// Puts `replacement` in ctx.model (the dense model goes to run.dense, its weights to
/// run.dense_tensors; run.replaced is set), logs `<label>_before_finetune/*`, fine-tunes for
/// `epochs` at train.optimizer.lr x `lr_scale` (a fresh optimizer; a checkpointed phase "finetune"
/// of stage `section`), and logs `<label>/test_accuracy` and `<prefix>/accuracy_drop_pt` (points
/// below the baseline's accuracy). A run resumed inside that fine-tuning (run.replaced, ctx.resume
/// of `section`; `replacement` null) continues it from the checkpoint. False when a stop was
/// requested on the way (nothing more is logged).
bool fine_tune_replacement(StageContext& ctx, std::unique_ptr<Model> replacement, ReplacementRun& run,
                           const std::string& section, const std::string& label, const std::string& prefix,
                           int64_t epochs, double lr_scale);

/// Whether this run resumes inside the fine-tuning of `section`'s replacement.
bool resuming_replacement(const StageContext& ctx, const ReplacementRun& run, const std::string& section);

/// Dense and compressed latency at batch 1 and 256, alternating dense / compressed twice and keeping
/// each batch size's faster median, so a burst of load from other processes does not land on one
/// model only. Logs latency/dense/*, latency/<label>/* and <speedup_prefix>/speedup_b<N>.
void measure_dense_vs(StageContext& ctx, Model& dense, Model& compressed, const std::string& label,
                      const std::string& speedup_prefix);

}  // namespace lathe
