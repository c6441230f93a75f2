// The prune stage of the pipeline (after training): unstructured magnitude (l1-unstructured,
// one-shot or AGP) and N:M pruning with masked fine-tuning, optional sensitivity analysis, the
// compressed model file (CSR / bitmask) and dense vs sparse-kernel latency measured in the same run.
// l1-structured / l2-structured are handed to the structured stage (stage_prune_structured.h).
#pragma once

#include "engine/run/pipeline.h"

namespace lathe {

/// Checks the prune config against the model before anything is written: exclusions name prunable
/// layers, N:M groups fit every pruned layer, AGP has fine-tuning steps to run in, the device can
/// run the masks. Throws ConfigError naming the field.
void prepare_prune_stage(const ExperimentConfig& cfg, Model& model, Backend& backend);

/// Runs the stage when prune.method != "none"; logs at ctx.step and advances it by the fine-tuning.
void run_prune_stage(StageContext& ctx);

}  // namespace lathe
