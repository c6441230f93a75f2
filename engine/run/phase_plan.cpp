// plan_phases (see phase_plan.h): mirrors the order and the step accounting of run_experiment and
// the stages (stage_distill, stage_prune*, stage_quantize).
#include "engine/run/phase_plan.h"

#include "engine/run/config.h"

namespace lathe {

std::vector<PlannedPhase> plan_phases(const ExperimentConfig& cfg, int64_t steps_per_epoch) {
  std::vector<PlannedPhase> plan;
  // A zoo teacher is trained first, in this run (attach_distill_stage).
  if (cfg.distill.teacher.rfind("zoo:", 0) == 0)
    plan.push_back({"teacher", steps_per_epoch * cfg.distill.teacher_epochs});
  // The main training; with a teacher it is the distillation (its phase event still says "train").
  plan.push_back({cfg.distill.teacher.empty() ? "train" : "distill", steps_per_epoch * cfg.train.epochs});
  if (cfg.prune.method != "none") {
    plan.push_back({"prune", 0});
    if (cfg.prune.finetune_epochs > 0)
      plan.push_back({"finetune", steps_per_epoch * cfg.prune.finetune_epochs});
    plan.push_back({"benchmark", 0});
  }
  if (cfg.quant.mode != "none") {
    plan.push_back({"calibrate", 1});  // run_quantize_stage logs its results one step on
    if (cfg.quant.mode == "qat")
      plan.push_back({"qat", steps_per_epoch * cfg.quant.qat_epochs + 1});  // + the step of the rebuilt INT8 model
    plan.push_back({"benchmark", 0});
  }
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
