// RunProgress over a prune + INT8 pipeline: the bar names the phase and counts every phase's
// planned steps, so fine-tuning is "step 630 of 940", not "step 630 of 469", and a finished run
// shows its last step of the whole plan. Also the phase plan the engine logs (phase_plan.h).
#include <gtest/gtest.h>

#include "engine/run/config.h"
#include "engine/run/phase_plan.h"
#include "widgets/ui/run_progress.h"

namespace lathe::ui {
namespace {

EventRecord event(const std::string& kind, nlohmann::json fields) {
  EventRecord e;
  e.kind = kind;
  e.fields = std::move(fields);
  return e;
}

TailBatch batch(int64_t step, double wall_ms, RunStatus status, std::vector<EventRecord> events = {},
                const std::string& metric = "train/loss") {
  TailBatch b;
  b.runId = "r1";
  RunRecord r;
  r.id = "r1";
  r.status = status;
  b.run = r;
  b.series.push_back({metric, {Point{step, wall_ms, 0.5}}});
  b.events = std::move(events);
  return b;
}

}  // namespace

TEST(GuiRunProgress, PhaseAndEtaOfTheWholePipeline) {
  // 469 steps an epoch: train 1 epoch, prune, fine-tune 1 epoch, benchmark, calibrate (1 step), benchmark.
  ExperimentConfig cfg;
  cfg.train.epochs = 1;
  cfg.prune.method = PruneMethod::l1_unstructured;
  cfg.prune.finetune_epochs = 1;
  cfg.quant.mode = QuantMode::ptq_static;
  const std::vector<PlannedPhase> plan = plan_phases(cfg, 469);
  ASSERT_EQ(plan.size(), 6u);
  EXPECT_EQ(plan[0].name, "train");
  EXPECT_EQ(plan[2].name, "finetune");
  EXPECT_EQ(plan[4].name, "calibrate");
  EXPECT_EQ(planned_steps(plan), 469 + 469 + 1);

  RunProgress p;
  TailBatch first = batch(100, 10'000, RunStatus::running,
                          {event("started", {{"total_steps", planned_steps(plan)}, {"plan", plan_json(plan)}}),
                           event("phase", {{"phase", "train"}, {"steps", 469}})});
  first.reset = true;
  p.applyBatch(first);
  EXPECT_EQ(p.phase(), "train");
  EXPECT_EQ(p.totalSteps(), 939);
  EXPECT_TRUE(p.barText().startsWith("train ")) << p.barText().toStdString();
  // 100 steps in 10 s: 839 steps to go at 10 steps/s.
  ASSERT_TRUE(p.etaSeconds().has_value());
  EXPECT_NEAR(*p.etaSeconds(), 83.9, 1e-9);

  p.applyBatch(batch(630, 63'000, RunStatus::running,
                     {event("phase", {{"phase", "prune"}}), event("phase", {{"phase", "finetune"}, {"steps", 469}})}));
  EXPECT_EQ(p.phase(), "finetune");
  EXPECT_NE(p.text().indexOf("finetune (phase 3 of 6), step 630 of 939"), -1) << p.text().toStdString();
  EXPECT_NEAR(*p.etaSeconds(), 30.9, 1e-9);  // the fine-tuning's rest and the quantization step
  EXPECT_EQ(p.barValue(), 630 * 1000 / 939);

  // The quantization logs under quant/* one step on; the second benchmark is the plan's 6th phase.
  p.applyBatch(batch(939, 95'000, RunStatus::running,
                     {event("phase", {{"phase", "benchmark"}}), event("phase", {{"phase", "calibrate"}}),
                      event("phase", {{"phase", "benchmark"}})},
                     "quant/test_accuracy"));
  EXPECT_EQ(p.phase(), "benchmark");
  EXPECT_NE(p.text().indexOf("benchmark (phase 6 of 6)"), -1) << p.text().toStdString();

  p.applyBatch(batch(939, 99'000, RunStatus::finished));
  EXPECT_NE(p.text().indexOf("finished, step 939 of 939"), -1) << p.text().toStdString();
  EXPECT_EQ(p.barText(), "done");
  EXPECT_FALSE(p.etaSeconds().has_value());
}

TEST(GuiRunProgress, DistillationWithAZooTeacherPlansTheTeacherFirst) {
  ExperimentConfig cfg;
  cfg.train.epochs = 2;
  cfg.distill.teacher = "zoo:teacher";
  cfg.distill.teacher_epochs = 3;
  const std::vector<PlannedPhase> plan = plan_phases(cfg, 10);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].name, "teacher");
  EXPECT_EQ(plan[0].steps, 30);
  EXPECT_EQ(plan[1].name, "distill");
  RunProgress p;
  p.applyBatch(batch(35, 1000, RunStatus::running,
                     {event("started", {{"total_steps", 50}, {"plan", plan_json(plan)}}),
                      event("phase", {{"phase", "teacher"}}), event("phase", {{"phase", "train"}})}));
  EXPECT_EQ(p.phase(), "distill");
  EXPECT_NE(p.text().indexOf("distill (phase 2 of 2), step 35 of 50"), -1) << p.text().toStdString();
}

}  // namespace lathe::ui
