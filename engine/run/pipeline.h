// The experiment pipeline's shared pieces: the context every stage works on (train -> distill ->
// prune + fine-tune -> quantize -> evaluate -> benchmark), the training loop with hooks that the
// stages use (distillation replaces the loss, pruning masks gradients, the loss scaler skips
// steps), the communicator seam (ctx.comm) and the checkpoint seams (TrainHooks::on_step_end with
// a TrainLoopState; TrainPhase::start to resume mid-phase), and the evaluation that logs test
// metrics. run_experiment (trainer.cpp) builds the context and calls the registered stages
// (stage.h) in their order.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/backend/backend.h"
#include "engine/data/dataset.h"
#include "engine/data/loader.h"
#include "engine/exec/batch_loop.h"
#include "engine/exec/communicator.h"
#include "engine/nn/model.h"
#include "engine/nn/optimizer.h"
#include "engine/run/config.h"
#include "engine/run/cost_model.h"
#include "engine/run/metrics_sink.h"
#include "engine/run/trainer.h"

namespace lathe {

struct TrainLoopState;
struct PendingPhaseResume;

/// What every stage reads and advances. One per run; stages run one after another on it.
struct StageContext {
  const ExperimentConfig& cfg;
  const RunOptions& options;
  Backend& be;
  TrainTest& data;
  std::unique_ptr<Model> model;  ///< the current model; a stage may replace it (structured pruning)
  MetricsSink& sink;
  std::string run_id;
  std::string run_dir;      ///< "" when nothing is written (options.write_run_dir false)
  int64_t step = 0;         ///< global optimizer step: each stage logs at steps >= this and advances it
  int64_t total_steps = 0;  ///< planned steps of every phase known so far (a stage adds its own)
  int threads = 1;
  double peak_flops_per_s = 0;              ///< one rank's peak; 0 = unknown (device/mfu not reported)
  const InstancePrice* instance = nullptr;  ///< prices cost/usd
  bool spot = false;
  std::function<double()> wall_ms;  ///< ms since the run started
  Progress progress;                ///< last progress reported (epoch, accuracy, ...)
  /// The ranks of a data-parallel run; one process: LocalCommunicator (every call a no-op).
  std::shared_ptr<Communicator> comm = std::make_shared<LocalCommunicator>();
  /// The checkpoint seam of the stages' fine-tuning phases: train_phase calls it after every
  /// optimizer step of a phase with TrainPhase::checkpointed (run_experiment sets it to the
  /// CheckpointScheduler; null = no checkpoints).
  std::function<void(const TrainLoopState&)> checkpoint = {};
  /// A resumed run whose newest checkpoint lies in a stage's phase (resume_training): train_phase
  /// continues the phase of that (stage, phase name) from here, once, and clears it.
  std::shared_ptr<PendingPhaseResume> resume = {};
  /// The run's cost so far at this moment, in dollars.
  double cost_usd_now() const;

  /// True once a stop was requested (SIGTERM in lathe-cli): stages return early, keeping what is done.
  bool stop_requested() const { return stop_agreed || (options.stop && options.stop->load()); }
  /// stop_requested() agreed by every rank (a collective on several ranks: every rank calls it at
  /// the same point), so that a stop seen by one rank between stages ends the run on all of them
  /// there, not with the others waiting in the next stage's collectives until the timeout.
  bool stop_agreed_by_all();
  /// Set once the training loop decided to stop after the current step (on several ranks: all
  /// agreed): its emergency checkpoint follows this decision and every rank skips the remaining
  /// stages alike.
  bool stop_agreed = false;
  /// Set with stop_agreed when the stop was for a spot notice on some rank: every rank then ends
  /// `interrupted`, not only the one that saw it.
  bool notice_agreed = false;
  /// Set with stop_agreed when the stop was for a signal (SIGTERM) on some rank. With
  /// notice_agreed, the reasons for an emergency checkpoint, agreed by every rank.
  bool signal_agreed = false;
  /// test_share()'s copy on a world of several ranks, made once (an aggregate keeps it public).
  std::shared_ptr<Dataset> test_share_cache = {};
  /// The part of the test set this rank evaluates (all of it on one rank); the sums are reduced.
  const Dataset& test_share();
  /// The training loader options of the config (batch size, seed, augmentation, prefetch) and this
  /// rank's share of every global batch.
  LoaderOptions loader_options() const;
  /// Steps per epoch of a phase with this loader (after grad_accum).
  int64_t steps_per_epoch(const LoaderOptions& lo) const;
};

/// Where a training phase stands right after an optimizer step: what a checkpoint records
/// (TrainHooks::on_step_end). A phase started from (epoch, step_in_epoch) with this optimizer's
/// state and the same ctx.step continues exactly where this one stood (TrainPhase::start).
struct TrainLoopState {
  const std::string& phase;   ///< TrainPhase::name
  const std::string& stage;   ///< TrainPhase::stage ("" = the main training)
  int epoch = 0;              ///< 0-based epoch being run
  int64_t step_in_epoch = 0;  ///< optimizer steps done in this epoch (1 .. steps_per_epoch)
  int64_t steps_per_epoch = 0;
  int64_t global_step = 0;  ///< ctx.step after this step
  int64_t phase_step = 0;   ///< optimizer steps done in the phase: the LR schedule's position
  Optimizer& optimizer;     ///< its state (momentum, Adam moments) is what a checkpoint saves
  const LrSchedule& schedule;
};

/// How a stage changes the training loop. Every member is optional.
struct TrainHooks {
  /// Replaces forward_backward (distillation): run forward and backward on the batch, leaving
  /// grad_scale * d(loss sum)/d(param) in the parameters' gradients; return the hard-label loss
  /// sum and correct count for the train metrics.
  std::function<LossResult(Model& model, LayerContext& ctx, const DeviceBatch& batch, double grad_scale,
                           Tensor& diff_buf)>
      forward_backward;
  /// Multiplies grad_scale (the f16 loss scale); read before every micro-batch.
  std::function<double()> loss_scale;
  /// After the gradients of one optimizer step are complete, before the update. Return false to skip
  /// the update (the loss scaler on inf/nan). Pruning zeroes the gradients of pruned weights here.
  std::function<bool(Model& model, int64_t step)> before_update;
  /// After the update of `step` (0-based; ctx.step is already step + 1): pruning re-applies its masks
  /// here and AGP grows them.
  std::function<void(Model& model, Optimizer& optimizer, int64_t step)> after_update;
  /// Extra metrics at every logging point (e.g. train/loss_scale, prune/sparsity).
  std::function<void(MetricsSink& sink, int64_t step, double wall_ms)> on_log;
  /// Called after each evaluation of the phase (e.g. the distillation teacher's accuracy once).
  std::function<void(const EvalResult& result, int64_t step)> after_eval;
  /// After every optimizer step, once its metrics and progress are out and before a stop request
  /// ends the phase: the checkpoint seam (write a checkpoint every N steps / minutes, or on a stop).
  std::function<void(const TrainLoopState& state)> on_step_end;
};

/// Where a phase starts: (0, 0) is its beginning. A resumed phase starts at the (epoch,
/// step_in_epoch) a TrainLoopState recorded, with ctx.step set back to its global_step and the
/// optimizer restored by the caller: the loader is deterministic by (seed, epoch), so it starts
/// the epoch at the batch of step_in_epoch, and dropout and augmentation depend on the global step
/// and the sample only, so the run continues bit for bit.
struct PhaseStart {
  int epoch = 0;
  int64_t step_in_epoch = 0;
  /// The optimizer to continue with (its state restored); null = a fresh one from TrainPhase::optimizer.
  std::shared_ptr<Optimizer> optimizer;
};

/// Where a resumed run continues a stage's fine-tuning phase (StageContext::resume): the phase's
/// key and its start (weights, ctx.step and the stages' states are restored already).
struct PendingPhaseResume {
  std::string stage;  ///< Stage::section() that runs the phase
  std::string phase;  ///< TrainPhase::name
  int64_t steps_per_epoch = 0;
  std::string checkpoint;  ///< its path, for messages
  PhaseStart start;
};

/// One training phase: the main training, or a fine-tuning after pruning / QAT.
struct TrainPhase {
  std::string name = "train";  ///< event/log label ("train", "finetune", "qat")
  int epochs = 1;
  LoaderOptions loader;       ///< usually ctx.loader_options(), perhaps with stronger augmentation
  LrSchedule schedule;        ///< total_steps is filled in by train_phase when left at 1
  OptimizerConfig optimizer;  ///< a fresh optimizer is made for the phase
  int grad_accum = 1;
  int64_t eval_every = 1;  ///< evaluate every N epochs and after the last
  PhaseStart start;        ///< (0, 0) = from the beginning; see PhaseStart to resume
  /// The stage section running the phase ("" = the main training): with `name`, the phase's key
  /// in a checkpoint.
  std::string stage;
  /// Checkpoints in this phase through ctx.checkpoint (a stage sets it when its run() can resume
  /// the phase mid-way); the main training's checkpoints go through TrainHooks::on_step_end.
  bool checkpointed = false;
};

struct PhaseResult {
  int64_t steps = 0;
  bool stopped = false;
  EvalResult last_eval;  ///< samples == 0 when no evaluation ran
  double train_seconds = 0;
  double samples = 0;  ///< training samples of all ranks (the global batches) in those seconds
  double flops = 0;    ///< their training FLOPs (3 x forward per sample)
};

/// The phase the config describes (train.*), with its LR schedule.
TrainPhase main_train_phase(const StageContext& ctx);
/// A fine-tuning phase after a compression step ("finetune", "qat"): the main phase's loader,
/// optimizer and schedule type for `epochs` epochs from train.optimizer.lr x `lr_scale`.
TrainPhase fine_tuning_phase(const StageContext& ctx, const std::string& name, int epochs, double lr_scale);
/// An LR schedule from train.schedule for `epochs` epochs starting at `base_lr`.
LrSchedule make_lr_schedule(const TrainConfig& t, double base_lr, int epochs, int64_t steps_per_epoch);
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& o);

/// Runs the phase on ctx.model: metrics train/loss, train/accuracy, train/samples_per_s, train/lr,
/// device/util, device/mfu, mem/peak_bytes, cost/usd at ~20 points an epoch, test/loss and
/// test/accuracy after evaluations; progress to options.on_progress. Advances ctx.step.
/// The loop, in order: broadcast the parameters (ctx.comm); per optimizer step: the micro-batches
/// (gradient accumulation), all_reduce_gradients, before_update, the update, after_update, the
/// metrics at a logging point, progress, on_step_end, the stop check; per epoch (eval_every): the
/// evaluation, the epoch event, after_eval. phase.start resumes mid-phase (PhaseStart); so does a
/// ctx.resume of this phase's (stage, name), which it consumes (DataError when its steps per epoch
/// differ from the phase's).
PhaseResult train_phase(StageContext& ctx, const TrainPhase& phase, const TrainHooks& hooks = {});

/// Says that a phase without training steps starts (prune, calibrate, benchmark): a "phase" event
/// like train_phase's, with steps 0, so progress shows what the run is doing.
void begin_phase(StageContext& ctx, const std::string& name);

/// Evaluates ctx.model on the test set and logs test/loss and test/accuracy at ctx.step (and, with a
/// non-empty prefix, `<prefix>/test_accuracy` too). The sums are reduced over the ranks (ctx.comm).
EvalResult evaluate_and_log(StageContext& ctx, const std::string& prefix = "");

/// Saves ctx.model as safetensors at run_dir/<file> and returns its size in bytes (0 when no run
/// folder is written); logs an artifact event. Every rank meets at a barrier first.
int64_t save_model_artifact(StageContext& ctx, const std::string& file, const std::string& kind);

}  // namespace lathe
