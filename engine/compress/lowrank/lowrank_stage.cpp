// The low-rank stage: dense baseline -> truncated SVD and factored layers -> fine-tuning -> accuracy,
// ranks, parameters, real file size, and dense vs factored latency measured in this run.
//
// Metrics: dense/test_accuracy, lowrank_before_finetune/test_accuracy, lowrank/test_accuracy,
// lowrank/accuracy_drop_pt, lowrank/rank/<layer> (a dense layer logs its full rank),
// lowrank/weight_bytes_ratio (factored / dense Linear+Conv2d weights: what the bytes target sets),
// lowrank/bytes_ratio (file / dense file), lowrank/params_ratio, model/params, model/dense_bytes,
// model/bytes, latency/{dense,lowrank}/b{1,256}_ms with their throughput, lowrank/speedup_b{1,256}.
#include "engine/compress/lowrank/lowrank_stage.h"

#include "engine/compress/lowrank/lowrank_config.h"
#include "engine/nn/model_io.h"
#include "engine/run/latency.h"
#include "engine/run/stage_measure.h"

namespace lathe {

namespace {

const char* kSection = "lowrank";

const LowRankConfig& config_of(const ExperimentConfig& cfg) { return stage_config<LowRankConfig>(cfg, kSection); }

void log_factorisation(StageContext& ctx, const LowRankConfig& c, const LowRankReport& rep) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LowRankLayer& l : rep.layers) {
    const int64_t full = std::min(l.rows, l.cols);
    layers.push_back({{"layer", l.name},
                      {"kind", l.kind},
                      {"shape", {l.rows, l.cols}},
                      {"rank", l.rank > 0 ? l.rank : full},
                      {"factored", l.rank > 0},
                      {"kept_energy", l.kept_energy},
                      {"dense_because", l.dense_because}});
    ctx.sink.sample("lowrank/rank/" + l.name, ctx.step, ctx.wall_ms(), static_cast<double>(l.rank > 0 ? l.rank : full));
    if (l.rank > 0)
      ctx.sink.sample("lowrank/kept_energy/" + l.name, ctx.step, ctx.wall_ms(), l.kept_energy);
  }
  const char* selection = c.options.rank > 0 ? "rank" : c.options.energy > 0 ? "energy" : "target_bytes_ratio";
  ctx.sink.event("lowrank", {{"method", "svd"},
                             {"selection", selection},
                             {"rank", c.options.rank},
                             {"energy", c.options.energy},
                             {"target_bytes_ratio", c.options.target_bytes_ratio},
                             {"scope", c.options.scope == LowRankScope::global ? "global" : "layer"},
                             {"exclude", c.options.exclude},
                             {"layers", layers},
                             {"weight_values_before", rep.weight_values_before},
                             {"weight_values_after", rep.weight_values_after},
                             {"params_before", rep.params_before},
                             {"params_after", rep.params_after}});
  ctx.sink.sample("lowrank/weight_bytes_ratio", ctx.step, ctx.wall_ms(),
                  static_cast<double>(rep.weight_values_after) / static_cast<double>(rep.weight_values_before));
  ctx.sink.sample("lowrank/params_ratio", ctx.step, ctx.wall_ms(),
                  static_cast<double>(rep.params_after) / static_cast<double>(rep.params_before));
  ctx.sink.sample("model/params", ctx.step, ctx.wall_ms(), static_cast<double>(rep.params_after));
}

class LowRankStage final : public Stage {
 public:
  std::string section() const override { return kSection; }
  int order() const override { return stage_order::lowrank; }
  std::vector<FieldSpec> schema_fields() const override { return lowrank_schema_fields(); }

  void parse(const nlohmann::json& validated, ExperimentConfig& cfg) const override {
    cfg.stage_configs[kSection] = std::make_shared<LowRankConfig>(parse_lowrank_config(validated));
  }

  bool enabled(const ExperimentConfig& cfg) const override {
    // A config built in code holds no lowrank section: the stage is at its default, off.
    const LowRankConfig* c = find_stage_config<LowRankConfig>(cfg, kSection);
    return c && c->method != LowRankMethod::none;
  }

  void plan(const ExperimentConfig& cfg, int64_t steps_per_epoch, std::vector<PlannedPhase>& plan) const override {
    plan.push_back({"lowrank", 0});
    if (config_of(cfg).finetune_epochs > 0)
      plan.push_back({"finetune", steps_per_epoch * config_of(cfg).finetune_epochs});
    plan.push_back({"benchmark", 0});
  }

  // Every check of the real run but the SVDs, on the untrained model: exclusions, conv shapes.
  void prepare(const StageSetup& setup) override { check_lowrank_model(setup.model, config_of(setup.cfg).options); }

  void run(StageContext& ctx) override;
  bool runs_after_training() const override { return true; }

  // Its checkpoint state once it has replaced the model: the dense weights the factored model is
  // rebuilt from (the same SVD ranks) when a run resumes in or after its fine-tuning.
  StageState save_state() const override { return replacement_state(m_run); }
  void load_state(const StageState& state) override { load_replacement_state(state, m_run); }
  void restore_model(StageContext& ctx) override {
    const LowRankOptions options = config_of(ctx.cfg).options;
    restore_replacement(ctx, m_run, [&](Model& dense) { return factorize_model(dense, ctx.be, options); });
  }

 private:
  ReplacementRun m_run;
};

void LowRankStage::run(StageContext& ctx) {
  const LowRankConfig& c = config_of(ctx.cfg);
  if (ctx.stop_requested())
    return;
  // A run resumed inside the fine-tuning has the factored model back (restore_model) and the
  // baseline in its state: the measurements and the factorisation before it are in the store.
  std::unique_ptr<Model> factored;
  if (!resuming_replacement(ctx, m_run, kSection)) {
    begin_phase(ctx, "lowrank");
    // ---- the dense baseline, in this run ----
    m_run.baseline = measure_dense_baseline(ctx);

    // ---- truncated SVD: a new model of smaller dense layers ----
    LowRankReport report;
    factored = factorize_model(*ctx.model, ctx.be, c.options, &report);
    log_factorisation(ctx, c, report);
    nlohmann::json ranks = nlohmann::json::object();
    for (const LowRankLayer& l : report.layers)
      if (l.rank > 0)
        ranks[l.name] = l.rank;
    // node -> rank: "<node>.0" / "<node>.1" rebuild the graph
    m_run.file_meta = {{"lathe_lowrank_ranks", ranks.dump()}};
  }
  // ---- fine-tune the factored model (a fresh optimizer: train_phase makes one; checkpointed) ----
  if (!fine_tune_replacement(ctx, std::move(factored), m_run, kSection, "lowrank", "lowrank", c.finetune_epochs,
                             c.finetune_lr_scale))
    return;

  // ---- the factored model on disk: its real size ----
  save_replacement(ctx, m_run.baseline, "lowrank", "lowrank", m_run.file_meta);

  // ---- dense vs factored latency, measured now, on this device ----
  begin_phase(ctx, "benchmark");
  measure_dense_vs(ctx, *m_run.dense, *ctx.model, "lowrank", "lowrank");
  m_run.dense.reset();  // its weights stay in m_run.dense_tensors for later checkpoints
}

}  // namespace

std::unique_ptr<Stage> new_lowrank_stage() { return std::make_unique<LowRankStage>(); }

}  // namespace lathe
