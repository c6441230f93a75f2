// Prune stage: masks (magnitude / N:M / sensitivity-picked / AGP-grown), masked fine-tuning with
// gradients and optimizer state of pruned weights zeroed, then the deployed form: the model file
// with sparse encodings (model/bytes), the sparse executors swapped in where they measured faster,
// and dense vs pruned latency and accuracy side by side.
#include "engine/run/stage_prune.h"

#include <cmath>
#include <filesystem>

#include "engine/compress/prune/agp.h"
#include "engine/compress/prune/mask.h"
#include "engine/compress/prune/sensitivity.h"
#include "engine/compress/prune/sparse_deploy.h"
#include "engine/compress/prune/sparse_model_io.h"
#include "engine/run/latency.h"
#include "engine/run/stage_prune_structured.h"

namespace lathe {

namespace {

bool is_structured(const std::string& method) { return method == "l1-structured" || method == "l2-structured"; }

std::string layer_of(const std::string& param) { return param.substr(0, param.rfind('.')); }

std::vector<int64_t> sample_shape(const StageContext& ctx) { return {1, ctx.data.test.rows, ctx.data.test.cols}; }

/// Overall sparsity (over the prunable weights) and per layer, at `step`.
void log_sparsity(StageContext& ctx, bool per_layer) {
  const SparsityReport r = sparsity_report(*ctx.model);
  const double ms = ctx.wall_ms();
  ctx.sink.sample("prune/sparsity", ctx.step, ms, r.overall());
  if (per_layer)
    for (const ParamSparsity& p : r.params)
      ctx.sink.sample("prune/sparsity/" + layer_of(p.name), ctx.step, ms, p.fraction());
}

/// Forward FLOPs per sample with each Linear/Conv2d's multiply-adds scaled by its weight density.
double flops_ratio(Model& model) {
  const SparsityReport r = sparsity_report(model);
  std::map<std::string, double> density;
  for (const ParamSparsity& p : r.params)
    density[layer_of(p.name)] = 1.0 - p.fraction();
  double dense = 0, pruned = 0;
  for (const LayerInfo& li : model.layer_infos()) {
    dense += static_cast<double>(li.flops);
    auto it = density.find(li.name);
    pruned += static_cast<double>(li.flops) * (it == density.end() ? 1.0 : it->second);
  }
  return dense > 0 ? pruned / dense : 1.0;
}

Param* find_param(Model& model, const std::string& name) {
  for (const NamedParam& np : model.named_params())
    if (np.name == name)
      return np.param;
  LATHE_FAIL("prune stage: no parameter ", name);
}

/// Masks weights, gradients or optimizer state in place (host tensors; the stage runs on the CPU).
void mask_all(Model& model, Optimizer* opt, const std::vector<PruneMask>& masks, bool grads) {
  for (const PruneMask& m : masks) {
    Param* p = find_param(model, m.param);
    mask_tensor(grads ? p->grad : p->value, m);
    if (opt)
      for (Tensor* t : opt->state_of(p))
        if (t && t->defined())
          mask_tensor(*t, m);
  }
}

struct MaskPlan {
  std::vector<PruneMask> masks;
  std::map<std::string, double> picked;  ///< per-layer ratios from the sensitivity pick (empty = none)
};

std::vector<PruneMask> magnitude_for(StageContext& ctx, const MaskPlan& plan, double sparsity) {
  const PruneConfig& pc = ctx.cfg.prune;
  if (plan.picked.empty())
    return magnitude_masks(*ctx.model, sparsity, pc.scope == "global", pc.exclude);
  std::map<std::string, double> scaled;
  for (const auto& [layer, r] : plan.picked)
    scaled[layer] = pc.ratio > 0 ? std::min(1.0, r * sparsity / pc.ratio) : 0.0;
  return layerwise_magnitude_masks(*ctx.model, scaled);
}

/// sensitivity/<layer>/accuracy at step = ratio x 100 (and the dense accuracy at step 0).
std::map<std::string, double> run_sensitivity(StageContext& ctx, double dense_accuracy) {
  const PruneConfig& pc = ctx.cfg.prune;
  const Dataset eval_set = pc.sensitivity_samples > 0 && pc.sensitivity_samples < ctx.data.test.count
                               ? subset(ctx.data.test, pc.sensitivity_samples)
                               : ctx.data.test;
  const double baseline = evaluate(*ctx.model, ctx.be, eval_set, 500).accuracy;
  std::vector<double> ratios;
  for (int i = 1; i <= 9; ++i)
    ratios.push_back(i / 10.0);
  const auto curves = sensitivity_analysis(*ctx.model, ratios, pc.exclude,
                                           [&] { return evaluate(*ctx.model, ctx.be, eval_set, 500).accuracy; });
  const double ms = ctx.wall_ms();
  nlohmann::json table = nlohmann::json::object();
  for (const SensitivityCurve& c : curves) {
    const std::string metric = "sensitivity/" + c.layer + "/accuracy";
    ctx.sink.sample(metric, 0, ms, baseline);
    for (size_t i = 0; i < c.ratios.size(); ++i)
      ctx.sink.sample(metric, std::llround(c.ratios[i] * 100), ms, c.accuracy[i]);
    table[c.layer] = c.accuracy;
  }
  ctx.sink.event("sensitivity", {{"ratios", ratios},
                                 {"accuracy", table},
                                 {"baseline_accuracy", baseline},
                                 {"samples", eval_set.count},
                                 {"dense_test_accuracy", dense_accuracy}});
  if (!pc.sensitivity_pick)
    return {};
  const auto picked = pick_layer_ratios(curves, baseline, pc.ratio);
  ctx.sink.event("sensitivity_pick", {{"target", pc.ratio}, {"ratios", picked}});
  return picked;
}

void run_unstructured(StageContext& ctx) {
  const PruneConfig& pc = ctx.cfg.prune;
  Model& model = *ctx.model;
  const bool nm = pc.method == "nm", agp = !nm && pc.schedule == "agp";

  // ---- the dense baseline, measured in this run ----
  const EvalResult dense = evaluate_and_log(ctx, "dense");
  const SparseSaveResult dense_file = save_sparse_model(model, ctx.be, "");
  ctx.sink.sample("model/dense_bytes", ctx.step, ctx.wall_ms(), static_cast<double>(dense_file.file_bytes));
  log_latency(ctx.sink, ctx.step, ctx.wall_ms(), "dense", measure_model_latency(model, ctx.be, sample_shape(ctx)),
              ctx.be.device_name());
  if (ctx.stop_requested())
    return;

  MaskPlan plan;
  if (pc.sensitivity)
    plan.picked = run_sensitivity(ctx, dense.accuracy);
  if (ctx.stop_requested())
    return;

  // ---- the masks: N:M, one-shot magnitude, or AGP's first step ----
  if (nm)
    plan.masks = nm_masks(model, pc.nm_n, pc.nm_m, pc.exclude);
  else
    plan.masks = magnitude_for(ctx, plan, agp ? pc.agp_initial : pc.ratio);
  mask_all(model, nullptr, plan.masks, false);
  ctx.sink.event("prune", {{"method", pc.method},
                           {"schedule", nm ? "one-shot" : pc.schedule},
                           {"target", nm ? 1.0 - static_cast<double>(pc.nm_n) / pc.nm_m : pc.ratio},
                           {"exclude", pc.exclude},
                           {"layers", plan.masks.size()}});
  log_sparsity(ctx, true);
  evaluate_and_log(ctx, "pruned_before_finetune");

  // ---- masked fine-tuning (AGP grows the masks on its schedule) ----
  const TrainPhase phase =
      fine_tuning_phase(ctx, "finetune", static_cast<int>(pc.finetune_epochs), pc.finetune_lr_scale);
  const int64_t steps_per_epoch = ctx.steps_per_epoch(phase.loader);
  const int64_t phase_steps = steps_per_epoch * phase.epochs, phase_start = ctx.step;
  AgpSchedule schedule;
  if (agp) {
    schedule.initial = pc.agp_initial;
    schedule.final = pc.ratio;
    schedule.start = pc.agp_start_step;
    schedule.end = pc.agp_end_step > 0 ? pc.agp_end_step : std::max<int64_t>(pc.agp_start_step + 1, phase_steps / 2);
    schedule.frequency = pc.agp_frequency;
    schedule.validate();
    ctx.sink.event("agp", {{"initial", schedule.initial},
                           {"final", schedule.final},
                           {"start_step", phase_start + schedule.start},
                           {"end_step", phase_start + schedule.end},
                           {"frequency", schedule.frequency}});
  }
  if (phase.epochs > 0) {
    ctx.total_steps += phase_steps;
    TrainHooks hooks;
    hooks.before_update = [&](Model& m, int64_t) {
      mask_all(m, nullptr, plan.masks, true);
      return true;
    };
    hooks.after_update = [&](Model& m, Optimizer& opt, int64_t step) {
      const int64_t t = step - phase_start + 1;  // optimizer steps done in this phase
      if (agp && schedule.update_at(t))
        plan.masks = magnitude_for(ctx, plan, schedule.at(t));
      mask_all(m, &opt, plan.masks, false);
    };
    hooks.on_log = [&](MetricsSink& sink, int64_t step, double ms) {
      sink.sample("prune/sparsity", step, ms, sparsity_report(*ctx.model).overall());
    };
    train_phase(ctx, phase, hooks);
    if (ctx.stop_requested())
      return;
  }

  // ---- the pruned model: accuracy, sparsity, real bytes, latency with the sparse kernels ----
  mask_all(model, nullptr, plan.masks, false);
  const EvalResult pruned = evaluate_and_log(ctx, "pruned");
  log_sparsity(ctx, true);
  ctx.sink.sample("prune/flops_ratio", ctx.step, ctx.wall_ms(), flops_ratio(model));
  ctx.sink.sample("prune/accuracy_drop_pt", ctx.step, ctx.wall_ms(), 100.0 * (dense.accuracy - pruned.accuracy));
  const std::string path = ctx.run_dir.empty() ? "" : ctx.run_dir + "/model.pruned.safetensors";
  const SparseSaveResult file = save_sparse_model(model, ctx.be, path,
                                                  {{"format", "pt"},
                                                   {"lathe_model", std::string(enum_name(ctx.cfg.model.zoo))},
                                                   {"lathe_run", ctx.run_id},
                                                   {"lathe_kind", "pruned"}});
  if (!path.empty())
    ctx.sink.event("artifact", {{"kind", "pruned"}, {"path", path}, {"bytes", file.file_bytes}});
  ctx.sink.sample("model/dense_bytes", ctx.step, ctx.wall_ms(), static_cast<double>(dense_file.file_bytes));
  ctx.sink.sample("model/bytes", ctx.step, ctx.wall_ms(), static_cast<double>(file.file_bytes));
  ctx.sink.sample("prune/bytes_ratio", ctx.step, ctx.wall_ms(),
                  static_cast<double>(file.file_bytes) / static_cast<double>(dense_file.file_bytes));

  SparseDeployment deployed(model);
  begin_phase(ctx, "benchmark");
  const auto latency = measure_model_latency(model, ctx.be, sample_shape(ctx));
  const EvalResult deployed_eval = evaluate(model, ctx.be, ctx.data.test, 500);
  log_latency(ctx.sink, ctx.step, ctx.wall_ms(), "pruned", latency, ctx.be.device_name());
  ctx.sink.sample("pruned/deployed_test_accuracy", ctx.step, ctx.wall_ms(), deployed_eval.accuracy);
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& s : deployed.layers())
    for (const auto& [batch, c] : s.executor->choices())
      kernels.push_back({{"layer", s.name},
                         {"density", s.executor->density()},
                         {"batch", batch},
                         {"dense_ms", c.dense_ms},
                         {"sparse_ms", c.sparse_ms},
                         {"kernel", c.sparse ? std::string("sparse ") + spmm_isa_name(s.executor->isa()) : "dense"}});
  ctx.sink.event("sparse_kernels",
                 {{"device", ctx.be.device_name()}, {"isa", spmm_isa_name(spmm_best_isa())}, {"layers", kernels}});
  deployed.restore();
}

}  // namespace

void prepare_prune_stage(const ExperimentConfig& cfg, Model& model, Backend& backend) {
  const PruneConfig& pc = cfg.prune;
  if (pc.method == "none" || is_structured(pc.method))
    return;  // the structured stage checks its own options
  if (!backend.device().is_cpu())
    throw ConfigError(
        "prune.method: \"" + pc.method +
        "\" runs on the CPU backend in this version (masks and sparse "
        "kernels are host code); allowed: compute.backend = \"cpu\" or \"reference\", or a structured method");
  if (pc.schedule == "agp" && pc.method == "l1-unstructured" && pc.finetune_epochs < 1)
    throw ConfigError(
        "prune.finetune_epochs: 0 leaves AGP no steps to prune in; allowed: >= 1 with prune.schedule = \"agp\"");
  // Exclusions and N:M shapes are checked by computing the masks once on the untrained weights.
  if (pc.method == "nm")
    nm_masks(model, pc.nm_n, pc.nm_m, pc.exclude);
  else
    magnitude_masks(model, 0.0, pc.scope == "global", pc.exclude);
}

void run_prune_stage(StageContext& ctx) {
  const std::string& method = ctx.cfg.prune.method;
  if (method == "none")
    return;
  begin_phase(ctx, "prune");
  if (is_structured(method)) {
    run_structured_prune_stage(ctx);  // stage_prune_structured.cpp
    return;
  }
  run_unstructured(ctx);
}

}  // namespace lathe
