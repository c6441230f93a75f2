// Checkpoints of a training run: what goes into one (weights and buffers, optimizer state, the loop
// position, LR-schedule position, RNG stream keys, every stage's save_state() (the loss scaler,
// prune masks...), the phase name, the store run id), when one
// is written (checkpoint.every_steps, checkpoint.every_min, an emergency one when a stop is
// requested by a spot notice or SIGTERM, and one of the finished training before the stages that
// follow it), and how a resumed run gets it back (read before the stages attach, so that a stage
// can skip work whose result its state holds: a zoo teacher's training).
// Every random stream of a run is keyed, not stateful: initialisation by the seed, the shuffle by
// (seed, epoch), augmentation by (seed, epoch, sample), dropout by the global micro-batch number,
// so the seed and the loop position are the whole RNG state; the checkpoint records those keys.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/run/checkpoint.h"
#include "engine/run/pipeline.h"
#include "engine/run/spot_notice.h"
#include "engine/run/stage.h"

namespace lathe {

/// Model tensors are stored as "model/<name>", optimizer state as "optim/<param>.<kind>", a
/// stage's tensors as "stage/<section>/<name>" (its JSON under state.json's "stages").
CheckpointData capture_training_state(StageContext& ctx, const TrainLoopState& loop,
                                      const std::vector<std::unique_ptr<Stage>>& stages);

/// Where a resumed run continues (resume_training).
struct ResumedAt {
  /// The main training is complete: the checkpoint is the one written after its last step, before
  /// the first stage (`training_done` in its state.json), or one of a stage's fine-tuning phase.
  /// run_experiment then trains no step and writes no model file (the first process wrote it).
  bool training_done = false;
  /// The stage whose fine-tuning phase the checkpoint is of (ctx.resume is set): that stage's run()
  /// continues the phase, the stages before it are done. "" = the stages run from the first.
  std::string stage;
};

/// The checkpoint a resumed run continues from, read before the stages attach (a stage may take
/// its state then: Stage::resume_before_attach).
struct ResumeCheckpoint {
  std::string dir;
  std::optional<LoadedCheckpoint> loaded;          ///< none: the training starts over
  std::vector<std::string> none_valid;             ///< when there is none: why each one was not usable
  std::map<std::string, StageState> stage_states;  ///< each stage's state in it, by section
};

/// Reads the newest valid checkpoint of `dir` ("" = none); on several ranks checks that every rank
/// picked the same one (one all-reduce), and rank 0 removes what killed writers left. DataError
/// when it belongs to another run.
ResumeCheckpoint read_resume_checkpoint(StageContext& ctx, const std::string& dir);

/// Each stage's resume_before_attach() with its state in `checkpoint` (an empty one when it has
/// none, or when there is no checkpoint). DataError naming the checkpoint when a state does not fit.
void resume_stages_before_attach(const ResumeCheckpoint& checkpoint,
                                 const std::vector<std::unique_ptr<Stage>>& stages);

/// Continues a resumed run from `checkpoint` (read_resume_checkpoint): loads it into ctx.model
/// (weights and buffers), ctx.step and each stage's load_state(); when it is of a stage's phase, the stages up to
/// that one first rebuild the model they had replaced (Stage::restore_model: structured pruning,
/// low-rank), so that its weights load into their shapes. Of the main training mid-way: a restored
/// optimizer and the position (epoch, step in the epoch) go to `phase.start`. Of the finished main
/// training (written before the first stage, no optimizer state): `training_done`, the stages run
/// from the first. Of a stage's phase (prune fine-tuning, QAT): the restored optimizer and the
/// position go to ctx.resume and the stage's section is returned; the caller skips the main
/// training and the stages before it (their results are in the store already). Logs a "resumed"
/// event (from_step, phase, stage, training_done, the checkpoint, the newer ones passed over and
/// why). Without a valid checkpoint the training starts over (the event says so). DataError naming
/// the checkpoint when it belongs to another model (a tensor missing or of another shape), to a
/// stage this run lacks, or to another phase layout (another run's: read_resume_checkpoint).
ResumedAt resume_training(StageContext& ctx, const ResumeCheckpoint& checkpoint, TrainPhase& phase,
                          const std::vector<std::unique_ptr<Stage>>& stages);

/// Decides when to write and writes: at every `every_steps` global steps, after `every_min`
/// minutes since the last one (or the start), and once when a stop is requested for a spot notice
/// or a signal (the emergency checkpoint). Logs ckpt/write_s and ckpt/bytes at the step, a
/// "checkpoint" event, an "artifact" (kind checkpoint) and, for an emergency one, "spot/notice"
/// (a notice) and "spot/checkpoint".
class CheckpointScheduler {
 public:
  /// `dir` "" disables checkpoints. `reason` (may be null) says why a stop was requested.
  CheckpointScheduler(StageContext& ctx, std::string dir, const std::atomic<int>* reason,
                      const std::vector<std::unique_ptr<Stage>>& stages);
  /// The TrainHooks::on_step_end body.
  void on_step_end(const TrainLoopState& loop);
  /// The checkpoint of the finished main training `phase` (its final evaluation and the model file
  /// done), written when stages run after it: the weights and buffers, every stage's save_state(),
  /// the loop position at its end and `training_done`, no optimizer state (nothing continues that
  /// phase). A kill or stop during the stages then resumes with them, not with training steps. It
  /// replaces a periodic checkpoint of the same step. Rank 0 writes; no collective.
  void after_training(const TrainPhase& phase);
  int64_t written() const { return m_written; }
  bool emergency_written() const { return m_emergency; }

 private:
  StageContext& m_ctx;
  std::string m_dir;
  const std::atomic<int>* m_reason;
  const std::vector<std::unique_ptr<Stage>>& m_stages;
  double m_last_ms = 0;
  int64_t m_written = 0;
  bool m_emergency = false;
};

/// The checkpoint folder of a run: <checkpoint.dir>/<run id>, else <run_dir>/ckpt, else "" (none).
std::string checkpoint_dir(const ExperimentConfig& cfg, const std::string& run_id, const std::string& run_dir);

}  // namespace lathe
