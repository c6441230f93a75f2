// The training run: data -> model -> epochs of SGD/AdamW with test evaluation -> saved weights,
// with every metric sent to a MetricsSink as it is measured. Used by lathe-cli, the tests and the
// benchmarks. The stages (stage.h) come from the registry (stage_registry.h); the shared loop is in
// pipeline.h.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "engine/core/run_model_ref.h"
#include "engine/exec/communicator.h"
#include "engine/run/config.h"
#include "engine/run/metrics_sink.h"

namespace lathe {

struct Progress {
  int epoch = 0, epochs = 0;          // 1-based epoch being run
  int64_t step = 0, total_steps = 0;  // optimizer steps done / planned
  double elapsed_s = 0, eta_s = 0;
  double train_loss = 0, train_accuracy = 0;  // running means over the current logging window
  double test_accuracy = -1;                  // last evaluation, -1 before the first
  int evaluations = 0;                        // how many evaluations have run (test_accuracy is the last)
  double samples_per_s = 0;
};

struct RunOptions {
  std::string run_id;                                // empty: make_run_id()
  std::atomic<bool>* stop = nullptr;                 // set (e.g. by SIGTERM) to end after the current step
  MetricsSink* extra_sink = nullptr;                 // also receives every sample and event
  std::function<void(const Progress&)> on_progress;  // called after every optimizer step
  bool write_run_dir = true;                         // false: nothing on disk (tests, benchmarks)
  std::string store_path;                            // the run store lathe-cli records into ("" = none)
  /// Resolves "run:<ref>" references (distill.teacher) to an earlier run's model file; the engine
  /// never opens the store itself. Unset: the run folder <output.dir>/<ref>/ is used.
  RunResolver resolve_run;
  /// Called once set-up has succeeded (config, data, model, prices), just before anything is
  /// written: the place to register the run in the store, so a bad input leaves no trace there.
  std::function<void(const std::string& run_id, const std::string& backend, const std::string& device)> on_start;
  /// The best f32 peak FLOP/s recorded for this CPU model and thread count (lathe-cli reads it from
  /// the store): the floor of the peak MFU is computed against. Unset or 0: none.
  std::function<double(const std::string& cpu_model, int threads)> recorded_peak_flops;
  /// Why `stop` was set (a StopReason of spot_notice.h): a spot notice or a signal writes an
  /// emergency checkpoint first; a spot notice ends the run `interrupted`, anything else `cancelled`.
  const std::atomic<int>* stop_reason = nullptr;
  /// Set: continue the run in this existing folder (lathe-cli resume) from its newest valid
  /// checkpoint instead of starting one; run_id must be the run's id. Nothing is created, the
  /// config is not rewritten, metrics.jsonl is appended to, and a "resumed" event replaces "started".
  std::string resume_run_dir;
  double resume_wall_ms = 0;  ///< the resumed run's clock starts here (the store's last wall_ms)
  /// Set on a rank > 0 of a resumed data-parallel run: the run's checkpoint folder, from whose
  /// newest valid checkpoint this rank continues (the same one rank 0 picks, or the run fails).
  std::string resume_checkpoint_dir;
  /// The ranks of a data-parallel run (lathe-cli builds a dist::GlooCommunicator, wrapped in an
  /// NCCL one for GPU ranks); null = one process. attach(backend) is called once set-up is done.
  std::shared_ptr<Communicator> comm;
  /// The device the backend opens (a GPU rank's local rank); 0 for one process.
  int device_index = 0;
};

struct RunSummary {
  std::string run_id, run_dir;
  std::string status;  // "finished", "cancelled" or "interrupted" (a spot notice)
  std::string backend, device;
  std::map<std::string, double> final_metrics;  // last value of each metric
  double elapsed_s = 0;  ///< of this process: since its resume, for a resumed run
  int64_t steps = 0;
  int64_t resumed_from_step = -1;  ///< a resumed run: the step it continued from (0: started over)
  std::string cost_projection;     ///< why cost/usd is a projection (cost_projection_reason); "" : it is not
};

/// Runs the whole experiment. Throws ConfigError / DataError before anything is written when the
/// config or the data is bad; lathe::Error for failures during the run.
RunSummary run_experiment(const ExperimentConfig& cfg, const RunOptions& options = {});

}  // namespace lathe
