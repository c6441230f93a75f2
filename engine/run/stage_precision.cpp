// Mixed-precision training hooks and the native-or-emulated report (see stage_precision.h).
#include "engine/run/stage_precision.h"

#include "engine/run/stage_registry.h"

#include "engine/nn/matmul_precision.h"

namespace lathe {

DType compute_dtype(Precision p) {
  switch (p) {
    case Precision::bf16:
      return DType::bf16;
    case Precision::f16:
      return DType::f16;
    case Precision::fp32:
      break;
  }
  return DType::f32;
}

nlohmann::json precision_path(const Backend& backend, DType precision) {
  const bool lin = runs_natively(backend, Op::linear, precision);
  const bool conv = runs_natively(backend, Op::conv2d, precision);
  const std::string p(dtype_name(precision));
  std::string note;
  if (lin && conv)
    note = "native " + p + " kernels on " + backend.device_name();
  else
    note = "EMULATED " + p + " on " + backend.device_name() + " (" + backend.name() + " backend has no " + p +
           " kernels for " +
           (lin    ? "conv2d"
            : conv ? "linear"
                   : "linear and conv2d") +
           "): operands and results rounded to " + p + ", arithmetic in f32; the numerics are " + p +
           "'s, the speed is not";
  return {{"precision", p},
          {"linear", lin ? "native" : "emulated"},
          {"conv2d", conv ? "native" : "emulated"},
          {"note", note}};
}

DType matmul_dtype(const Backend& backend, DType precision) {
  return precision != DType::f32 && precision_path(backend, precision)["linear"] == "native" ? precision : DType::f32;
}

std::unique_ptr<PrecisionStage> attach_precision_stage(StageContext& ctx, TrainHooks& hooks) {
  const DType precision = compute_dtype(ctx.cfg.train.precision);
  if (precision == DType::f32)
    return nullptr;
  auto stage = std::make_unique<PrecisionStage>();
  stage->precision = precision;
  ctx.model->set_compute_precision(precision);
  const nlohmann::json path = precision_path(ctx.be, precision);
  stage->emulated = path["linear"] != "native" || path["conv2d"] != "native";
  nlohmann::json event = path;
  if (precision == DType::f16) {
    const LossScaleConfig& c = ctx.cfg.train.loss_scale;
    stage->scaler =
        std::make_unique<LossScaler>(LossScaleOptions{c.init, c.growth_factor, c.backoff_factor, c.growth_interval});
    event["loss_scale"] = {{"init", c.init},
                           {"growth_factor", c.growth_factor},
                           {"backoff_factor", c.backoff_factor},
                           {"growth_interval", c.growth_interval}};
  }
  ctx.sink.event("precision", event);

  PrecisionStage* s = stage.get();
  Backend& be = ctx.be;
  if (s->scaler) {
    auto prev_scale = hooks.loss_scale;
    hooks.loss_scale = [s, prev_scale] { return s->scaler->scale() * (prev_scale ? prev_scale() : 1.0); };
    auto prev_update = hooks.before_update;
    hooks.before_update = [s, &be, prev_update](Model& model, int64_t step) {
      // Unscale first: whatever runs next (pruning masks) sees the true f32 gradients.
      if (!s->scaler->unscale_and_update(be, model.named_params()))
        return false;  // inf/nan: skip the update; the scale has backed off
      return prev_update ? prev_update(model, step) : true;
    };
  }
  auto prev_log = hooks.on_log;
  hooks.on_log = [s, prev_log](MetricsSink& sink, int64_t step, double wall_ms) {
    sink.sample("train/precision_emulated", step, wall_ms, s->emulated ? 1.0 : 0.0);
    if (s->scaler) {
      sink.sample("train/loss_scale", step, wall_ms, s->scaler->scale());
      sink.sample("train/skipped_steps", step, wall_ms, static_cast<double>(s->scaler->steps_skipped()));
    }
    if (prev_log)
      prev_log(sink, step, wall_ms);
  };
  return stage;
}

namespace {

/// The mixed-precision stage (stage.h): train.precision bf16 / f16 on the main training (its knobs
/// are in the train section, so it declares no fields of its own). Its mid-run state is the f16
/// loss scaler's.
class PrecisionStageAdapter final : public Stage {
 public:
  std::string section() const override { return "precision"; }
  int order() const override { return stage_order::precision; }
  void parse(const nlohmann::json& validated, ExperimentConfig& cfg) const override {}
  bool enabled(const ExperimentConfig& cfg) const override { return cfg.train.precision != Precision::fp32; }
  void attach(StageContext& ctx, TrainPhase& phase, TrainHooks& hooks) override {
    m_stage = attach_precision_stage(ctx, hooks);
  }

  StageState save_state() const override {
    StageState st;
    if (m_stage && m_stage->scaler)
      st.json = {{"loss_scale", m_stage->scaler->scale()},
                 {"good_steps_in_a_row", m_stage->scaler->good_steps_in_a_row()},
                 {"steps_skipped", m_stage->scaler->steps_skipped()}};
    return st;
  }

  void load_state(const StageState& st) override {
    if (st.json.is_null())
      return;
    LATHE_CHECK(m_stage && m_stage->scaler, "precision stage state: a loss scale, but no f16 loss scaler attached");
    m_stage->scaler->restore(st.json.at("loss_scale").get<double>(), st.json.at("good_steps_in_a_row").get<int64_t>(),
                             st.json.at("steps_skipped").get<int64_t>());
  }

 private:
  std::unique_ptr<PrecisionStage> m_stage;
};

}  // namespace

std::unique_ptr<Stage> new_precision_stage() { return std::make_unique<PrecisionStageAdapter>(); }

}  // namespace lathe
