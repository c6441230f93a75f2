// The structured prune stage (prune.method l1-structured / l2-structured): after training, remove
// whole filters and neurons (engine/compress/prune/structured.h), fine-tune the smaller dense model
// with a fresh optimizer, and report from the same run the dense and pruned accuracy, FLOPs,
// parameters, the real file size and the measured latency / throughput at batch 1 and 256.
// stage_prune.cpp dispatches the structured methods here.
#pragma once

#include "engine/compress/prune/structured.h"
#include "engine/run/pipeline.h"
#include "engine/run/stage_measure.h"

namespace lathe {

/// The pruning options that prune.* describe (method l1-/l2-structured, scope, ratio, exclude).
/// Throws ConfigError for a method that is not structured or a scope other than global / layer.
StructuredOptions structured_options_from_config(const PruneConfig& prune);

/// Checks the structured options against the (untrained) model before anything is written: ratio
/// below 1, exclusions naming Linear/Conv2d nodes, every layer rebuildable. Throws ConfigError.
/// Does nothing unless prune.method is l1-structured or l2-structured.
void prepare_structured_prune_stage(const ExperimentConfig& cfg, Model& model, Backend& backend);

/// Runs the stage on ctx: logs dense/* and pruned_before_finetune/* accuracy, prune/flops_ratio,
/// prune/params_ratio, prune/channels/<layer>, model/params, model/flops_per_sample,
/// prune/accuracy_drop_pt, model/dense_bytes, model/bytes (the pruned file really written),
/// latency/{dense,pruned}/b{1,256}_ms with their throughput, and prune/speedup_b{1,256}. Fine-tunes
/// for prune.finetune_epochs at train.optimizer.lr x prune.finetune_lr_scale (advancing ctx.step)
/// and replaces ctx.model with the smaller model. `run` is the stage's checkpoint state: the
/// fine-tuning is checkpointed, and a run resumed inside it (restore_structured_prune first)
/// continues it and skips the measurements and the pruning before it.
void run_structured_prune_stage(StageContext& ctx, ReplacementRun& run);

/// A resumed run's Stage::restore_model: prunes the dense weights of `run` again (the same channels:
/// the ranking is a function of them) and puts the smaller model in ctx.model.
void restore_structured_prune(StageContext& ctx, ReplacementRun& run);

}  // namespace lathe
