// plan_phases (see phase_plan.h): the main training, then each enabled stage's own phases
// (Stage::plan), in the order run_experiment runs them.
#include "engine/run/phase_plan.h"

#include "engine/run/config.h"
#include "engine/run/stage_registry.h"

namespace lathe {

std::vector<PlannedPhase> plan_phases(const ExperimentConfig& cfg, int64_t steps_per_epoch) {
  // The main training, then what each stage adds in pipeline order (Stage::plan).
  std::vector<PlannedPhase> plan{{"train", steps_per_epoch * cfg.train.epochs}};
  for (const auto& stage : stage_prototypes())
    if (stage->enabled(cfg))
      stage->plan(cfg, steps_per_epoch, plan);
  return plan;
}

int64_t planned_steps(const std::vector<PlannedPhase>& plan) {
  int64_t total = 0;
  for (const PlannedPhase& p : plan)
    total += p.steps;
  return total;
}

nlohmann::json plan_json(const std::vector<PlannedPhase>& plan) {
  nlohmann::json out = nlohmann::json::array();
  for (const PlannedPhase& p : plan)
    out.push_back({{"phase", p.name}, {"steps", p.steps}});
  return out;
}

}  // namespace lathe
