// plan_phases (see phase_plan.h): mirrors the order and the step accounting of run_experiment and
// the stages (stage_distill, stage_prune*, stage_quantize), and estimates the work of the phases
// that advance no step from the sizes they process.
#include "engine/run/phase_plan.h"

#include <algorithm>

#include "engine/run/config.h"
#include "engine/run/latency.h"

namespace lathe {
namespace {

/// Training-step equivalents of forward passes over `samples` at training batch size `batch`: a
/// training step is a forward and a backward (about 3 forwards' work) over `batch` samples.
double forward_steps(int64_t samples, int batch) {
  return static_cast<double>(std::max<int64_t>(0, samples)) / (3.0 * std::max(1, batch));
}

/// The benchmark phase: the dense and the compressed model timed at each batch size for at least
/// min_seconds (latency.h), then the compressed model's test evaluation.
PlannedPhase benchmark_phase(double eval_steps) {
  const LatencyOptions lo;
  return {"benchmark", 0, eval_steps, 2.0 * static_cast<double>(lo.batches.size()) * lo.min_seconds};
}

}  // namespace

std::vector<PlannedPhase> plan_phases(const ExperimentConfig& cfg, int64_t steps_per_epoch, int64_t test_samples) {
  std::vector<PlannedPhase> plan;
  const int64_t tests = cfg.data.test_subset > 0 ? std::min(cfg.data.test_subset, test_samples) : test_samples;
  const double eval_steps = forward_steps(tests, cfg.train.batch_size);
  // A zoo teacher is trained first, in this run (attach_distill_stage).
  if (cfg.distill.teacher.rfind("zoo:", 0) == 0)
    plan.push_back({"teacher", steps_per_epoch * cfg.distill.teacher_epochs});
  // The main training; with a teacher it is the distillation (its phase event still says "train").
  plan.push_back({cfg.distill.teacher.empty() ? "train" : "distill", steps_per_epoch * cfg.train.epochs});
  if (cfg.prune.method != "none") {
    plan.push_back({"prune", 0, eval_steps});  // the masks, then the pruned model's test pass
    if (cfg.prune.finetune_epochs > 0)
      plan.push_back({"finetune", steps_per_epoch * cfg.prune.finetune_epochs});
    plan.push_back(benchmark_phase(eval_steps));
  }
  if (cfg.quant.mode != "none") {
    // run_quantize_stage logs its results one step on; the statistics pass over the calibration
    // set, then the INT8 model's test pass.
    plan.push_back({"calibrate", 1, forward_steps(cfg.quant.calib_samples, cfg.train.batch_size) + eval_steps});
    if (cfg.quant.mode == "qat")
      plan.push_back({"qat", steps_per_epoch * cfg.quant.qat_epochs + 1});  // + the step of the rebuilt INT8 model
    plan.push_back(benchmark_phase(eval_steps));
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
    out.push_back({{"phase", p.name}, {"steps", p.steps}, {"est_steps", p.est_steps}, {"est_seconds", p.est_seconds}});
  return out;
}

}  // namespace lathe
