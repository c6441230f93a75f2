// The prune stage of the pipeline (after training): unstructured magnitude (l1-unstructured,
// one-shot or AGP) and N:M pruning with masked fine-tuning, optional sensitivity analysis, the
// compressed model file (CSR / bitmask) and dense vs sparse-kernel latency measured in the same run.
// l1-structured / l2-structured are handed to the structured stage (stage_prune_structured.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/compress/prune/mask.h"
#include "engine/run/pipeline.h"
#include "engine/run/stage_measure.h"

namespace lathe {

/// The masks of an unstructured / N:M prune run.
struct MaskPlan {
  std::vector<PruneMask> masks;
  std::map<std::string, double> picked;  ///< per-layer ratios from the sensitivity pick (empty = none)
};

/// What the prune stage holds while it runs (its Stage::save_state): the masks applied during the
/// fine-tuning and the optimizer steps done in it (the AGP schedule's position), or the structured
/// methods' replaced dense model.
struct PruneRunState {
  MaskPlan plan;
  int64_t finetune_steps_done = 0;
  /// Set once the fine-tuning starts: the dense baseline measured before it and the global step
  /// it starts on, which a run resumed mid-fine-tuning (ctx.resume of "prune"/"finetune") takes
  /// instead of measuring and pruning again.
  bool finetuning = false;
  int64_t finetune_first_step = 0;
  double dense_accuracy = 0;
  int64_t dense_file_bytes = 0;
  /// l1-/l2-structured: the dense model replaced by the smaller one (stage_prune_structured.h).
  ReplacementRun structured;
};

/// Checks the prune config against the model before anything is written: exclusions name prunable
/// layers, N:M groups fit every pruned layer, AGP has fine-tuning steps to run in, the device can
/// run the masks. Throws ConfigError naming the field.
void prepare_prune_stage(const ExperimentConfig& cfg, Model& model, Backend& backend);

/// Runs the stage when prune.method != "none"; logs at ctx.step and advances it by the fine-tuning.
/// `state` (optional) receives the masks and the fine-tuning position as they change.
void run_prune_stage(StageContext& ctx, PruneRunState* state = nullptr);

}  // namespace lathe
