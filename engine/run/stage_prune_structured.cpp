// Structured prune stage: dense baseline -> remove filters/neurons -> fine-tune the smaller model ->
// accuracy, FLOPs, parameters, real file size, and dense vs pruned latency measured in this run.
#include "engine/run/stage_prune_structured.h"

#include <algorithm>

#include "engine/nn/model_io.h"
#include "engine/run/latency.h"
#include "engine/run/stage_measure.h"

namespace lathe {

StructuredOptions structured_options_from_config(const PruneConfig& pc) {
  StructuredOptions o;
  if (pc.method == PruneMethod::l1_structured)
    o.norm = StructuredNorm::l1;
  else if (pc.method == PruneMethod::l2_structured)
    o.norm = StructuredNorm::l2;
  else
    throw ConfigError("prune.method: \"" + std::string(enum_name(pc.method)) +
                      "\" is not structured pruning; allowed here: l1-structured, l2-structured");
  o.scope = pc.scope == PruneScope::global ? StructuredScope::global : StructuredScope::layer;
  o.ratio = pc.ratio;
  o.exclude = pc.exclude;
  return o;
}

void prepare_structured_prune_stage(const ExperimentConfig& cfg, Model& model, Backend& backend) {
  if (cfg.prune.method != PruneMethod::l1_structured && cfg.prune.method != PruneMethod::l2_structured)
    return;
  // A full plan and rebuild on the untrained weights: every check the real run makes, made now.
  prune_structured(model, backend, structured_options_from_config(cfg.prune));
}

void run_structured_prune_stage(StageContext& ctx, ReplacementRun& run) {
  const PruneConfig& pc = ctx.cfg.prune;
  const StructuredOptions options = structured_options_from_config(pc);
  if (ctx.stop_requested())
    return;
  // A run resumed inside the fine-tuning has the smaller model back (restore_structured_prune) and
  // the baseline in its state: the measurements and the pruning before it are in the store.
  std::unique_ptr<Model> pruned;
  if (!resuming_replacement(ctx, run, "prune")) {
    // ---- the dense baseline, in this run ----
    run.baseline = measure_dense_baseline(ctx);

    // ---- remove filters and neurons: a new, smaller dense model ----
    StructuredReport report;
    pruned = prune_structured(*ctx.model, ctx.be, options, &report);
    nlohmann::json layers = nlohmann::json::array();
    nlohmann::json channels = nlohmann::json::object();
    for (const StructuredLayerChange& l : report.layers) {
      layers.push_back({{"layer", l.name},
                        {"kind", l.kind},
                        {"before", l.channels_before},
                        {"after", l.channels_after},
                        {"not_pruned_because", l.not_pruned_because}});
      channels[l.name] = l.channels_after;
      ctx.sink.sample("prune/channels/" + l.name, ctx.step, ctx.wall_ms(), static_cast<double>(l.channels_after));
    }
    // out channels per layer, to rebuild the graph
    run.file_meta = {{"lathe_pruned_channels", channels.dump()}};
    ctx.sink.event("prune", {{"method", std::string(enum_name(pc.method))},
                             {"scope", std::string(enum_name(pc.scope))},
                             {"ratio", pc.ratio},
                             {"exclude", pc.exclude},
                             {"residual_groups", "shared ranking: mean of per-producer normalised norms"},
                             {"layers", layers},
                             {"flops_before", report.flops_before},
                             {"flops_after", report.flops_after},
                             {"params_before", report.params_before},
                             {"params_after", report.params_after}});
    ctx.sink.sample("prune/flops_ratio", ctx.step, ctx.wall_ms(), report.flops_ratio());
    ctx.sink.sample("prune/params_ratio", ctx.step, ctx.wall_ms(),
                    static_cast<double>(report.params_after) / static_cast<double>(report.params_before));
    ctx.sink.sample("model/params", ctx.step, ctx.wall_ms(), static_cast<double>(report.params_after));
    ctx.sink.sample("model/flops_per_sample", ctx.step, ctx.wall_ms(), static_cast<double>(report.flops_after));
  }

  // ---- fine-tune the smaller model (a fresh optimizer: train_phase makes one; checkpointed) ----
  if (!fine_tune_replacement(ctx, std::move(pruned), run, "prune", "pruned", "prune", pc.finetune_epochs,
                             pc.finetune_lr_scale))
    return;

  // ---- the smaller model on disk: its real size ----
  save_replacement(ctx, run.baseline, "pruned", "prune", run.file_meta);

  // ---- dense vs pruned latency, measured now, on this device ----
  begin_phase(ctx, "benchmark");
  measure_dense_vs(ctx, *run.dense, *ctx.model, "pruned", "prune");
  run.dense.reset();  // its weights stay in run.dense_tensors for later checkpoints
}

void restore_structured_prune(StageContext& ctx, ReplacementRun& run) {
  const StructuredOptions options = structured_options_from_config(ctx.cfg.prune);
  restore_replacement(ctx, run, [&](Model& dense) { return prune_structured(dense, ctx.be, options); });
}

}  // namespace lathe
