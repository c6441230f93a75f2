// plan_phases (see phase_plan.h): the main training, then each enabled stage's own phases
// (Stage::plan_estimated), in the order run_experiment runs them; and the helpers with which the
// stages estimate the work of the phases that advance no step from the sizes they process.
#include "engine/run/phase_plan.h"

#include <algorithm>

#include "engine/run/config.h"
#include "engine/run/latency.h"
#include "engine/run/stage_registry.h"

namespace lathe {

double forward_steps(int64_t samples, int batch) {
  return static_cast<double>(std::max<int64_t>(0, samples)) / (3.0 * std::max(1, batch));
}

PlannedPhase benchmark_phase(double eval_steps) {
  const LatencyOptions lo;
  return {"benchmark", 0, eval_steps, 2.0 * static_cast<double>(lo.batches.size()) * lo.min_seconds};
}

std::vector<PlannedPhase> plan_phases(const ExperimentConfig& cfg, int64_t steps_per_epoch, int64_t test_samples) {
  const int64_t tests = cfg.data.test_subset > 0 ? std::min(cfg.data.test_subset, test_samples) : test_samples;
  const PlanInputs in{.steps_per_epoch = steps_per_epoch, .eval_steps = forward_steps(tests, cfg.train.batch_size)};
  // The main training, then what each stage adds in pipeline order.
  std::vector<PlannedPhase> plan{{"train", steps_per_epoch * cfg.train.epochs}};
  for (const auto& stage : stage_prototypes())
    if (stage->enabled(cfg))
      stage->plan_estimated(cfg, in, plan);
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
    out.push_back({{"phase", p.name}, {"steps", p.steps}, {"est_steps", p.est_steps}, {"est_seconds", p.est_seconds}});
  return out;
}

}  // namespace lathe
