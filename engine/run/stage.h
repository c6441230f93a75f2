// The Stage interface: one shape for every step of the pipeline that a config section switches on
// (distillation, mixed precision, pruning, quantization, ...). A stage declares its schema fields,
// parses its own section into typed values, checks its inputs before anything is written
// (prepare), hooks into the main training (attach) and/or runs after it (run), and hands a
// checkpoint its mid-run state (save_state / load_state). run_experiment loops over the registered
// stages in their declared order and names none of them; the registry is stage_registry.h.
// How to add a stage: docs/ARCHITECTURE.md, "How to add a stage".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/tensor.h"
#include "engine/run/config.h"
#include "engine/run/config_schema.h"
#include "engine/run/phase_plan.h"
#include "engine/run/pipeline.h"

namespace lathe {

/// What a checkpoint stores of a stage in the middle of a run: JSON plus named host tensors.
struct StageState {
  nlohmann::json json;                                  ///< null: nothing to store
  std::vector<std::pair<std::string, Tensor>> tensors;  ///< host tensors, names unique within the stage
  bool empty() const { return json.is_null() && tensors.empty(); }
};

/// What prepare() sees: set-up is done (backend, data, the untrained model), nothing is written yet.
struct StageSetup {
  const ExperimentConfig& cfg;
  Backend& be;
  const TrainTest& data;
  Model& model;
  const RunOptions& options;
};

/// The declared pipeline order (Stage::order): lower runs first, in attach() and in run(). The gaps
/// leave room for new stages between the existing ones.
namespace stage_order {
constexpr int distill = 100;    ///< attach: a zoo teacher trained first, then the main training's loss
constexpr int precision = 200;  ///< attach: bf16/f16 compute, f16 loss scaling on the main training
constexpr int prune = 300;      ///< run: unstructured / N:M / structured pruning + fine-tuning
constexpr int lowrank = 400;    ///< run: low-rank factorisation + fine-tuning
constexpr int quantize = 500;   ///< run: INT8 (PTQ, QAT, mixed precision)
}  // namespace stage_order

class Stage {
 public:
  virtual ~Stage() = default;

  /// The config section the stage owns ("prune") and its key in the registry.
  virtual std::string section() const = 0;
  /// Its place in the pipeline (stage_order); the schema lists stage sections in this order too.
  virtual int order() const = 0;

  /// The fields of its section (paths "<section>.<name>", FieldSpec::section = section()), in the
  /// order the GUI and --help show them. experiment_schema() includes them; validate_config checks
  /// them like every other field, and the designer form is generated from them.
  virtual std::vector<FieldSpec> schema_fields() const { return {}; }

  /// Parses its section of the validated config (defaults filled in) into typed values and checks
  /// the rules that span fields, throwing ConfigError that names the field, the value and what is
  /// allowed. Stages whose typed section is a member of ExperimentConfig (prune, distill, quant) fill
  /// it; any other stage stores its own StageConfig in cfg.stage_configs[section()].
  virtual void parse(const nlohmann::json& validated, ExperimentConfig& cfg) const = 0;

  /// Whether `cfg` uses the stage (e.g. prune.method != none). A disabled stage is never
  /// prepared, attached, run or asked for its plan. A config built in code (ExperimentConfig{})
  /// has no stage_configs entry: a stage keeping its config there is then off
  /// (find_stage_config returns nullptr).
  virtual bool enabled(const ExperimentConfig& cfg) const = 0;

  /// Adds the phases it will run (phase_plan.h) to `plan`, which holds the main "train" phase and
  /// what earlier stages added; `steps_per_epoch` is the training loader's (after grad_accum).
  virtual void plan(const ExperimentConfig& cfg, int64_t steps_per_epoch, std::vector<PlannedPhase>& plan) const {}
  /// plan() with what estimating the work of stepless phases needs (PlannedPhase::est_steps /
  /// est_seconds; phase_plan.h has forward_steps and benchmark_phase). plan_phases calls this one;
  /// the default calls plan(cfg, in.steps_per_epoch, plan), so a stage overrides either.
  virtual void plan_estimated(const ExperimentConfig& cfg, const PlanInputs& in,
                              std::vector<PlannedPhase>& plan) const {
    this->plan(cfg, in.steps_per_epoch, plan);
  }

  /// Checks the stage's inputs against the model, data and backend before anything is written (a
  /// teacher file, N:M groups that fit, a backend that can run it): ConfigError / DataError naming
  /// the field. May keep what it loaded for attach() / run().
  virtual void prepare(const StageSetup& setup) {}

  /// A resumed run, before attach(): the stage's state in the checkpoint the run continues from
  /// (what save_state() returned then; empty when it has none). A stage whose attach() does work
  /// whose result the state holds (a zoo teacher's training) takes it here and skips that work.
  /// load_state() follows, after attach(). DataError naming the tensor when the state does not fit.
  virtual void resume_before_attach(const StageState& state) {}

  /// Hooks into the main training phase before it starts (it may also change the phase, e.g. the
  /// augmentation, or run a phase of its own first, advancing ctx.step). Hooks already set on
  /// `hooks` by earlier stages must keep working: chain, do not overwrite.
  virtual void attach(StageContext& ctx, TrainPhase& phase, TrainHooks& hooks) {}

  /// A stop request cut short a phase attach() ran (a zoo teacher's training; agreed by every
  /// rank): the run ends there, training nothing more and writing no checkpoint, so that its
  /// resume starts that phase over.
  virtual bool stopped_in_attach() const { return false; }

  /// Runs after the main training (and after the earlier stages' run): logs at ctx.step and
  /// advances it by its own phases. Returns early when ctx.stop_requested().
  virtual void run(StageContext& ctx) {}
  /// Whether run() does work (true for every stage that overrides it): when an enabled stage does,
  /// run_experiment checkpoints the finished main training before the first stage runs, so that a
  /// kill during the stages resumes with them and trains no step again.
  virtual bool runs_after_training() const { return false; }

  /// The state a checkpoint needs to continue this stage mid-run (masks, schedule positions, loss
  /// scale, trainable projections); empty when nothing beyond the model and optimizer matters.
  virtual StageState save_state() const { return {}; }
  /// Restores what save_state() returned (after prepare/attach of a resumed run, before the
  /// checkpoint's weights are loaded). lathe::Error when the state does not fit (missing tensor,
  /// wrong shape).
  virtual void load_state(const StageState& state) {}
  /// A resumed run whose checkpoint was written in this stage's phase or a later stage's, after
  /// load_state(): when the stage had replaced the model by then (structured pruning, low-rank),
  /// it rebuilds that model's shapes in ctx.model from its state (the dense weights), so that the
  /// checkpoint's weights load into it. Called in pipeline order, each stage on the model the
  /// earlier ones left. Default: nothing (the stage keeps the run's model).
  virtual void restore_model(StageContext& ctx) {}
};

}  // namespace lathe
