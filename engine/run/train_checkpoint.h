// Checkpoints of a training run: what goes into one (weights and buffers, optimizer state, the loop
// position, LR-schedule position, RNG stream keys, loss scaler, stage name, store run id), when one
// is written (checkpoint.every_steps, checkpoint.every_min, and an emergency one when a stop is
// requested by a spot notice or SIGTERM), and how a resumed run gets it back.
// Every random stream of a run is keyed, not stateful: initialisation by the seed, the shuffle by
// (seed, epoch), augmentation by (seed, epoch, sample), dropout by the global micro-batch number,
// so the seed and the loop position are the whole RNG state; the checkpoint records those keys.
#pragma once

#include <atomic>
#include <string>

#include "engine/compress/precision/loss_scaler.h"
#include "engine/run/checkpoint.h"
#include "engine/run/pipeline.h"
#include "engine/run/spot_notice.h"

namespace lathe {

/// Model tensors are stored as "model/<name>", optimizer state as "optim/<param>.<kind>".
CheckpointData capture_training_state(StageContext& ctx, const LoopState& loop, Optimizer& optimizer,
                                      const LossScaler* scaler);

/// What a checkpoint gives back to a resumed run.
struct RestoredTraining {
  PhaseResume resume;
  CheckpointInfo info;
  std::vector<std::string> skipped;  ///< newer checkpoints that were not usable, and why
};

/// Loads the newest valid checkpoint of `dir` into ctx.model (weights and buffers) and `scaler`
/// (when both it and the checkpoint have one) and returns the loop and optimizer state; nullopt
/// when `dir` holds no valid checkpoint. DataError naming the checkpoint when it belongs to
/// another run or model (a tensor missing or of another shape).
std::optional<RestoredTraining> restore_training_state(StageContext& ctx, const std::string& dir, LossScaler* scaler);

/// Decides when to write and writes: at every `every_steps` global steps, after `every_min`
/// minutes since the last one (or the start), and once when a stop is requested for a spot notice
/// or a signal (the emergency checkpoint). Logs ckpt/write_s and ckpt/bytes at the step, a
/// "checkpoint" event, an "artifact" (kind checkpoint) and, for an emergency one, "spot/checkpoint".
class CheckpointScheduler {
 public:
  /// `dir` "" disables checkpoints. `reason` (may be null) says why a stop was requested.
  CheckpointScheduler(StageContext& ctx, std::string dir, const std::atomic<int>* reason, const LossScaler* scaler);
  /// The TrainHooks::on_step_end body.
  void on_step_end(const LoopState& loop, Optimizer& optimizer);
  int64_t written() const { return m_written; }
  bool emergency_written() const { return m_emergency; }

 private:
  StageContext& m_ctx;
  std::string m_dir;
  const std::atomic<int>* m_reason;
  const LossScaler* m_scaler;
  double m_last_ms = 0;
  int64_t m_written = 0;
  bool m_emergency = false;
};

/// The checkpoint folder of a run: <checkpoint.dir>/<run id>, else <run_dir>/ckpt, else "" (none).
std::string checkpoint_dir(const ExperimentConfig& cfg, const std::string& run_id, const std::string& run_dir);

}  // namespace lathe
