// Prune stage: masks (magnitude / N:M / sensitivity-picked / AGP-grown), masked fine-tuning with
// gradients and optimizer state of pruned weights zeroed, then the deployed form: the model file
// with sparse encodings (model/bytes), the sparse executors swapped in where they measured faster,
// and dense vs pruned latency and accuracy side by side.
#include "engine/run/stage_prune.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/compress/prune/agp.h"
#include "engine/compress/prune/mask.h"
#include "engine/compress/prune/sensitivity.h"
#include "engine/compress/prune/sparse_deploy.h"
#include "engine/compress/prune/sparse_model_io.h"
#include "engine/run/latency.h"
#include "engine/run/stage_prune_structured.h"
#include "engine/run/stage_registry.h"

namespace lathe {

namespace {

/// prune.exclude: comma-separated node names, spaces around them ignored, empty parts rejected.
std::vector<std::string> split_prune_exclude(const std::string& text) {
  std::vector<std::string> out;
  if (text.find_first_not_of(" ,") == std::string::npos)
    return out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const size_t b = text.find_first_not_of(' ', at), e = text.find_last_not_of(' ', comma - 1);
    if (b >= comma || e == std::string::npos || e < b)
      throw ConfigError("prune.exclude: \"" + text + "\" has an empty name; allowed: node names separated by commas");
    out.push_back(text.substr(b, e - b + 1));
    at = comma + 1;
  }
  return out;
}

bool is_structured(PruneMethod method) {
  return method == PruneMethod::l1_structured || method == PruneMethod::l2_structured;
}

std::string layer_of(const std::string& param) { return param.substr(0, param.rfind('.')); }

std::vector<int64_t> sample_shape(const StageContext& ctx) { return ctx.data.test.sample_shape(); }

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
        if (t && t->defined()) {
          if (t->shape() == p->value.shape())
            mask_tensor(*t, m);
          else  // a ZeRO-1 rank's slice of the state
            mask_tensor_slice(*t, m, opt->state_offset(p));
        }
  }
}

std::vector<PruneMask> magnitude_for(StageContext& ctx, const MaskPlan& plan, double sparsity) {
  const PruneConfig& pc = ctx.cfg.prune;
  if (plan.picked.empty())
    return magnitude_masks(*ctx.model, sparsity, pc.scope == PruneScope::global, pc.exclude);
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

/// The dense baseline measured in this run, the sensitivity analysis and the first masks (N:M,
/// one-shot magnitude or AGP's first step), applied; false when a stop was requested.
bool prune_before_finetune(StageContext& ctx, PruneRunState& state) {
  const PruneConfig& pc = ctx.cfg.prune;
  Model& model = *ctx.model;
  const bool nm = pc.method == PruneMethod::nm, agp = !nm && pc.schedule == PruneSchedule::agp;
  // ---- the dense baseline, measured in this run ----
  const EvalResult dense = evaluate_and_log(ctx, "dense");
  const SparseSaveResult dense_file = save_sparse_model(model, ctx.be, "");
  ctx.sink.sample("model/dense_bytes", ctx.step, ctx.wall_ms(), static_cast<double>(dense_file.file_bytes));
  log_latency(ctx.sink, ctx.step, ctx.wall_ms(), "dense", measure_model_latency(model, ctx.be, sample_shape(ctx)),
              ctx.be.device_name());
  if (ctx.stop_requested())
    return false;

  MaskPlan& plan = state.plan;
  if (pc.sensitivity)
    plan.picked = run_sensitivity(ctx, dense.accuracy);
  if (ctx.stop_requested())
    return false;

  // ---- the masks: N:M, one-shot magnitude, or AGP's first step ----
  if (nm)
    plan.masks = nm_masks(model, pc.nm_n, pc.nm_m, pc.exclude);
  else
    plan.masks = magnitude_for(ctx, plan, agp ? pc.agp_initial : pc.ratio);
  mask_all(model, nullptr, plan.masks, false);
  ctx.sink.event("prune", {{"method", std::string(enum_name(pc.method))},
                           {"schedule", nm ? std::string("one-shot") : std::string(enum_name(pc.schedule))},
                           {"target", nm ? 1.0 - static_cast<double>(pc.nm_n) / pc.nm_m : pc.ratio},
                           {"exclude", pc.exclude},
                           {"layers", plan.masks.size()}});
  log_sparsity(ctx, true);
  evaluate_and_log(ctx, "pruned_before_finetune");

  state.dense_accuracy = dense.accuracy;
  state.dense_file_bytes = dense_file.file_bytes;
  return true;
}

void run_unstructured(StageContext& ctx, PruneRunState& state) {
  const PruneConfig& pc = ctx.cfg.prune;
  Model& model = *ctx.model;
  const bool nm = pc.method == PruneMethod::nm, agp = !nm && pc.schedule == PruneSchedule::agp;

  MaskPlan& plan = state.plan;
  // A run resumed from a checkpoint of the fine-tuning has its masks, the baseline and the phase
  // position back (load_state): the measurements and masks before the fine-tuning are in the store.
  const bool resuming = state.finetuning && ctx.resume && ctx.resume->stage == "prune";
  if (!resuming && !prune_before_finetune(ctx, state))
    return;

  // ---- masked fine-tuning (AGP grows the masks on its schedule) ----
  TrainPhase phase = fine_tuning_phase(ctx, "finetune", static_cast<int>(pc.finetune_epochs), pc.finetune_lr_scale);
  phase.stage = "prune";
  phase.checkpointed = true;
  const int64_t steps_per_epoch = ctx.steps_per_epoch(phase.loader);
  const int64_t phase_steps = steps_per_epoch * phase.epochs;
  if (!resuming) {
    state.finetune_first_step = ctx.step;
    state.finetune_steps_done = 0;
    state.finetuning = true;
  }
  const int64_t phase_start = state.finetune_first_step;
  AgpSchedule schedule;
  if (agp) {
    schedule.initial = pc.agp_initial;
    schedule.final = pc.ratio;
    schedule.start = pc.agp_start_step;
    schedule.end = pc.agp_end_step > 0 ? pc.agp_end_step : std::max<int64_t>(pc.agp_start_step + 1, phase_steps / 2);
    schedule.frequency = pc.agp_frequency;
    schedule.validate();
    if (!resuming)
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
      state.finetune_steps_done = t;
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
  ctx.sink.sample("prune/accuracy_drop_pt", ctx.step, ctx.wall_ms(), 100.0 * (state.dense_accuracy - pruned.accuracy));
  const std::string path = ctx.run_dir.empty() ? "" : ctx.run_dir + "/model.pruned.safetensors";
  const SparseSaveResult file = save_sparse_model(model, ctx.be, path,
                                                  {{"format", "pt"},
                                                   {"lathe_model", std::string(enum_name(ctx.cfg.model.zoo))},
                                                   {"lathe_run", ctx.run_id},
                                                   {"lathe_kind", "pruned"}});
  if (!path.empty())
    ctx.sink.event("artifact", {{"kind", "pruned"}, {"path", path}, {"bytes", file.file_bytes}});
  ctx.sink.sample("model/dense_bytes", ctx.step, ctx.wall_ms(), static_cast<double>(state.dense_file_bytes));
  ctx.sink.sample("model/bytes", ctx.step, ctx.wall_ms(), static_cast<double>(file.file_bytes));
  ctx.sink.sample("prune/bytes_ratio", ctx.step, ctx.wall_ms(),
                  static_cast<double>(file.file_bytes) / static_cast<double>(state.dense_file_bytes));

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
  if (pc.method == PruneMethod::none || is_structured(pc.method))
    return;  // the structured stage checks its own options
  if (!backend.device().is_cpu())
    throw ConfigError(
        "prune.method: \"" + std::string(enum_name(pc.method)) +
        "\" runs on the CPU backend in this version (masks and sparse "
        "kernels are host code); allowed: compute.backend = \"cpu\" or \"reference\", or a structured method");
  if (pc.schedule == PruneSchedule::agp && pc.method == PruneMethod::l1_unstructured && pc.finetune_epochs < 1)
    throw ConfigError(
        "prune.finetune_epochs: 0 leaves AGP no steps to prune in; allowed: >= 1 with prune.schedule = \"agp\"");
  // Exclusions and N:M shapes are checked by computing the masks once on the untrained weights.
  if (pc.method == PruneMethod::nm)
    nm_masks(model, pc.nm_n, pc.nm_m, pc.exclude);
  else
    magnitude_masks(model, 0.0, pc.scope == PruneScope::global, pc.exclude);
}

void run_prune_stage(StageContext& ctx, PruneRunState* state) {
  PruneRunState local;
  const PruneMethod method = ctx.cfg.prune.method;
  if (method == PruneMethod::none)
    return;
  begin_phase(ctx, "prune");
  if (is_structured(method)) {
    run_structured_prune_stage(ctx, state ? state->structured : local.structured);  // stage_prune_structured.cpp
    return;
  }
  run_unstructured(ctx, state ? *state : local);
}

namespace {

using nlohmann::json;

/// The prune stage (stage.h): section prune, after training. Its mid-run state is the fine-tuning's
/// masks and the AGP position (optimizer steps done in the fine-tuning).
class PruneStage final : public Stage {
 public:
  std::string section() const override { return "prune"; }
  int order() const override { return stage_order::prune; }

  std::vector<FieldSpec> schema_fields() const override {
    using namespace schema;
    std::vector<FieldSpec> f;
    f.push_back(enumeration("prune.method", {"none", "l1-unstructured", "l1-structured", "l2-structured", "nm"},
                            "Pruning after training: l1-unstructured (smallest |w|, stored sparse), l1/l2-structured "
                            "(removes whole filters/neurons), nm (N:M pattern, e.g. 2:4); none = no pruning stage"));
    // The stage does nothing with method none (run_prune_stage returns); the rest follows what each
    // method reads: unstructured masks (l1-unstructured), structured_options_from_config
    // (l1/l2-structured), nm_masks (nm). The sensitivity analysis runs for l1-unstructured and nm.
    const auto by_method = [](FieldSpec spec, std::vector<std::string> methods) {
      return only_when(std::move(spec), "prune.method", std::move(methods));
    };
    const std::vector<std::string> pruning = {"l1-unstructured", "l1-structured", "l2-structured", "nm"};
    const std::vector<std::string> sensitivity_methods = {"l1-unstructured", "nm"};
    // prune.ratio: every method but nm sizes its masks by it; with nm, sensitivity_pick still picks
    // per-layer ratios for it (the sensitivity_pick event).
    f.push_back(only_when(by_method(number("prune.ratio", 0.5, 0, 1,
                                           "Fraction removed: of weights (l1-unstructured; AGP's final sparsity), of "
                                           "filters/neurons per layer (l1/l2-structured); nm ignores it (1 - n/m)",
                                           false, true),
                                    pruning),
                          {one_of("prune.method", {"l1-unstructured", "l1-structured", "l2-structured"}),
                           one_of("prune.sensitivity_pick", {true})}));
    f.push_back(by_method(
        enumeration("prune.scope", {"global", "layer"},
                    "Rank weights (or normalised filter norms) across all layers together, or each layer alone"),
        {"l1-unstructured", "l1-structured", "l2-structured"}));
    f.push_back(by_method(enumeration("prune.schedule", {"one-shot", "agp"},
                                      "one-shot: prune once, then fine-tune; agp: gradual (Zhu & Gupta cubic) during "
                                      "fine-tuning (l1-unstructured)"),
                          {"l1-unstructured"}));
    f.push_back(
        by_method(integer("prune.finetune_epochs", 1, 0, kInf, "Fine-tuning epochs after pruning (masks stay applied)"),
                  pruning));
    f.push_back(
        by_method(number("prune.finetune_lr_scale", 0.25, 0, 10,
                         "Fine-tuning learning rate = train.optimizer.lr x this (schedule as train.schedule)", true),
                  pruning));
    f.push_back(by_method(
        string("prune.exclude", "",
               "Layers left unpruned: node names, comma-separated (e.g. \"0,9\" for the cnn's first and last)"),
        pruning));
    const auto nm = [](FieldSpec spec) { return only_when(std::move(spec), "prune.method", {"nm"}); };
    // AGP is l1-unstructured's: nm prunes once, the structured methods have no schedule.
    const auto agp = [](FieldSpec spec) {
      return only_when(only_when(std::move(spec), "prune.method", {"l1-unstructured"}), "prune.schedule", {"agp"});
    };
    f.push_back(nm(integer("prune.nm_n", 2, 1, 64, "N of N:M (method nm): weights kept in each group of M")));
    f.push_back(nm(integer("prune.nm_m", 4, 1, 64, "M of N:M (method nm): group length along the input dimension")));
    f.push_back(agp(number("prune.agp.initial", 0, 0, 1, "AGP: sparsity at the first pruning step")));
    f.push_back(agp(
        integer("prune.agp.start_step", 0, 0, kInf, "AGP: first pruning step, counted from the fine-tuning start")));
    f.push_back(agp(integer("prune.agp.end_step", 0, 0, kInf,
                            "AGP: step where prune.ratio is reached (from the fine-tuning start); 0 = half the "
                            "fine-tuning steps")));
    f.push_back(agp(integer("prune.agp.frequency", 50, 1, kInf, "AGP: steps between mask updates")));
    f.push_back(by_method(boolean("prune.sensitivity", false,
                                  "Sensitivity analysis: prune each layer alone at ratios 0.1..0.9 and evaluate "
                                  "(metrics sensitivity/<layer>/accuracy, step = ratio x 100)"),
                          sensitivity_methods));
    const auto analysing = [&](FieldSpec spec) {
      return only_when(by_method(std::move(spec), sensitivity_methods), {one_of("prune.sensitivity", {true})});
    };
    f.push_back(analysing(integer("prune.sensitivity_samples", 2000, 0, kInf,
                                  "Test images per sensitivity evaluation (0 = the whole test set)")));
    f.push_back(analysing(boolean("prune.sensitivity_pick", false,
                                  "Use the sensitivity curves to choose per-layer ratios reaching prune.ratio overall "
                                  "(l1-unstructured; needs prune.sensitivity)")));
    return f;
  }

  void parse(const json& j, ExperimentConfig& c) const override {
    const json& p = j.at("prune");
    c.prune.method = parse_choice<PruneMethod, 5>(p.at("method"), "prune.method");
    c.prune.ratio = p.at("ratio").get<double>();
    c.prune.scope = parse_choice<PruneScope, 2>(p.at("scope"), "prune.scope");
    c.prune.schedule = parse_choice<PruneSchedule, 2>(p.at("schedule"), "prune.schedule");
    c.prune.finetune_epochs = p.at("finetune_epochs").get<int64_t>();
    c.prune.finetune_lr_scale = p.at("finetune_lr_scale").get<double>();
    c.prune.exclude = split_prune_exclude(p.at("exclude").get<std::string>());
    c.prune.nm_n = p.at("nm_n").get<int>();
    c.prune.nm_m = p.at("nm_m").get<int>();
    if (c.prune.method == PruneMethod::nm && c.prune.nm_n > c.prune.nm_m)
      throw ConfigError("prune.nm_n: " + std::to_string(c.prune.nm_n) + " is larger than prune.nm_m = " +
                        std::to_string(c.prune.nm_m) + "; allowed: 1 <= nm_n <= nm_m (e.g. 2:4)");
    const json& agp = p.at("agp");
    c.prune.agp_initial = agp.at("initial").get<double>();
    c.prune.agp_start_step = agp.at("start_step").get<int64_t>();
    c.prune.agp_end_step = agp.at("end_step").get<int64_t>();
    c.prune.agp_frequency = agp.at("frequency").get<int64_t>();
    if (c.prune.schedule == PruneSchedule::agp && c.prune.agp_initial > c.prune.ratio)
      throw ConfigError("prune.agp.initial: " + std::to_string(c.prune.agp_initial) + " is above prune.ratio = " +
                        std::to_string(c.prune.ratio) + " (the final sparsity); allowed: 0 <= initial <= ratio");
    if (c.prune.agp_end_step > 0 && c.prune.agp_end_step <= c.prune.agp_start_step)
      throw ConfigError("prune.agp.end_step: " + std::to_string(c.prune.agp_end_step) +
                        " must be after prune.agp.start_step = " + std::to_string(c.prune.agp_start_step) +
                        " (or 0 = half the fine-tuning steps)");
    c.prune.sensitivity = p.at("sensitivity").get<bool>();
    c.prune.sensitivity_samples = p.at("sensitivity_samples").get<int64_t>();
    c.prune.sensitivity_pick = p.at("sensitivity_pick").get<bool>();
    if (c.prune.sensitivity_pick && !c.prune.sensitivity)
      throw ConfigError("prune.sensitivity_pick: true needs prune.sensitivity = true (the curves it picks from)");
  }

  bool enabled(const ExperimentConfig& cfg) const override { return cfg.prune.method != PruneMethod::none; }

  void plan_estimated(const ExperimentConfig& cfg, const PlanInputs& in,
                      std::vector<PlannedPhase>& plan) const override {
    plan.push_back({"prune", 0, in.eval_steps});  // the masks, then the pruned model's test pass
    if (cfg.prune.finetune_epochs > 0)
      plan.push_back({"finetune", in.steps_per_epoch * cfg.prune.finetune_epochs});
    plan.push_back(benchmark_phase(in.eval_steps));
  }

  void prepare(const StageSetup& s) override {
    prepare_prune_stage(s.cfg, s.model, s.be);
    prepare_structured_prune_stage(s.cfg, s.model, s.be);
  }

  void run(StageContext& ctx) override { run_prune_stage(ctx, &m_state); }
  bool runs_after_training() const override { return true; }

  StageState save_state() const override {
    if (m_state.structured.replaced)
      return replacement_state(m_state.structured);
    StageState st;
    if (m_state.plan.masks.empty())
      return st;
    json masks = json::array();
    for (const PruneMask& m : m_state.plan.masks) {
      masks.push_back(m.param);
      st.tensors.emplace_back("mask/" + m.param, m.keep);
    }
    st.json = {{"masks", masks},
               {"finetune_steps_done", m_state.finetune_steps_done},
               {"picked", m_state.plan.picked},
               {"finetuning", m_state.finetuning},
               {"finetune_first_step", m_state.finetune_first_step},
               {"dense_accuracy", m_state.dense_accuracy},
               {"dense_file_bytes", m_state.dense_file_bytes}};
    return st;
  }

  void load_state(const StageState& st) override {
    m_state = {};
    if (st.json.is_null())
      return;
    if (st.json.value("replaced", false)) {  // structured: the dense model it replaced
      load_replacement_state(st, m_state.structured);
      return;
    }
    for (const auto& name : st.json.at("masks")) {
      const std::string param = name.get<std::string>();
      const std::string key = "mask/" + param;
      const auto it = std::find_if(st.tensors.begin(), st.tensors.end(), [&](const auto& t) { return t.first == key; });
      LATHE_CHECK(it != st.tensors.end(), "prune stage state: no tensor ", key);
      m_state.plan.masks.push_back({param, it->second});
    }
    m_state.plan.picked = st.json.at("picked").get<std::map<std::string, double>>();
    m_state.finetune_steps_done = st.json.at("finetune_steps_done").get<int64_t>();
    m_state.finetuning = st.json.value("finetuning", false);
    m_state.finetune_first_step = st.json.value("finetune_first_step", int64_t{0});
    m_state.dense_accuracy = st.json.value("dense_accuracy", 0.0);
    m_state.dense_file_bytes = st.json.value("dense_file_bytes", int64_t{0});
  }

  void restore_model(StageContext& ctx) override {
    if (m_state.structured.replaced)
      restore_structured_prune(ctx, m_state.structured);
  }

 private:
  PruneRunState m_state;
};

}  // namespace

std::unique_ptr<Stage> new_prune_stage() { return std::make_unique<PruneStage>(); }

}  // namespace lathe
