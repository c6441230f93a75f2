// The phase plan of a run: every phase the pipeline will go through (teacher, train, prune,
// finetune, calibrate, qat, benchmark) with its planned optimizer steps, worked out from the
// config before the first step. The "started" event carries it, so progress and ETA count the
// whole pipeline, not only the training.
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
};

/// The phases of `cfg` in pipeline order; `steps_per_epoch` is the training loader's (after grad_accum).
std::vector<PlannedPhase> plan_phases(const ExperimentConfig& cfg, int64_t steps_per_epoch);
/// The sum of the phases' steps.
int64_t planned_steps(const std::vector<PlannedPhase>& plan);
/// [{"phase": name, "steps": n}, ...] for the started event.
nlohmann::json plan_json(const std::vector<PlannedPhase>& plan);

}  // namespace lathe
