// The phase plan of a run: every phase the pipeline will go through (teacher, train, prune,
// finetune, calibrate, qat, benchmark) with its planned optimizer steps, worked out from the
// config before the first step, and an estimate of what each costs beyond its steps (an evaluation
// pass, the calibration forwards, the latency repetitions), so the ETA is not 0 during the phases
// that advance no step. The "started" event carries it, so progress and ETA count the whole
// pipeline, not only the training.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lathe {

struct ExperimentConfig;

struct PlannedPhase {
  std::string name;   ///< teacher, train (distill with a teacher), prune, finetune, calibrate, qat, benchmark
  int64_t steps = 0;  ///< optimizer steps it advances the run's step by (0: measures only)
  /// Work beyond its steps, in training-step equivalents (forward passes over the test or
  /// calibration set: a forward of one sample is about a third of a training step's work on it).
  double est_steps = 0;
  /// Time that does not scale with the step time (the latency benchmark's minimum repetition time).
  double est_seconds = 0;
};

/// The phases of `cfg` in pipeline order; `steps_per_epoch` is the training loader's (after grad_accum),
/// `test_samples` the test set's size (Fashion-MNIST's 10000 when not known yet).
std::vector<PlannedPhase> plan_phases(const ExperimentConfig& cfg, int64_t steps_per_epoch,
                                      int64_t test_samples = 10000);
/// What plan_phases tells a stage that adds its phases (Stage::plan_estimated).
struct PlanInputs {
  int64_t steps_per_epoch = 0;  ///< the training loader's (after grad_accum)
  double eval_steps = 0;        ///< one test-set evaluation, in training-step equivalents
};
/// Training-step equivalents of forward passes over `samples` at training batch size `batch`: a
/// training step is a forward and a backward (about 3 forwards' work) over `batch` samples.
double forward_steps(int64_t samples, int batch);
/// A benchmark phase: the dense and the compressed model timed at each batch size for at least
/// min_seconds (latency.h), then the compressed model's test evaluation (`eval_steps`).
PlannedPhase benchmark_phase(double eval_steps);

/// The sum of the phases' steps.
int64_t planned_steps(const std::vector<PlannedPhase>& plan);
/// [{"phase": name, "steps": n, "est_steps": x, "est_seconds": s}, ...] for the started event.
nlohmann::json plan_json(const std::vector<PlannedPhase>& plan);

}  // namespace lathe
