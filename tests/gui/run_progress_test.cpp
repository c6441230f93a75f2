// RunProgress over a prune + INT8 pipeline: the bar names the phase and counts every phase's
// planned steps, so fine-tuning is "step 630 of 940", not "step 630 of 469", and a finished run
// shows its last step of the whole plan; the ETA weighs the stepless phases (prune, calibrate,
// benchmark) by the plan's estimate, so it is not 0 while they run. Also the phase plan the engine
// logs (phase_plan.h).
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
  // Stepless work in training-step equivalents: a test pass of 10000 samples at batch 128 is
  // 10000 / (3 x 128) steps; the calibration adds 512 / 384; each benchmark times 2 models x 2
  // batch sizes for >= 0.3 s.
  const double eval = 10000.0 / 384;
  EXPECT_DOUBLE_EQ(plan[1].est_steps, eval);
  EXPECT_DOUBLE_EQ(plan[4].est_steps, 512.0 / 384 + eval);
  EXPECT_DOUBLE_EQ(plan[3].est_steps, eval);
  EXPECT_DOUBLE_EQ(plan[5].est_seconds, 1.2);
  EXPECT_EQ(plan[0].est_steps, 0);
  EXPECT_DOUBLE_EQ(plan_phases(cfg, 469, 1000)[1].est_steps, 1000.0 / 384);  // the real test set's size

  RunProgress p;
  TailBatch first = batch(100, 10'000, RunStatus::running,
                          {event("started", {{"total_steps", planned_steps(plan)}, {"plan", plan_json(plan)}}),
                           event("phase", {{"phase", "train"}, {"steps", 469}})});
  first.reset = true;
  p.applyBatch(first);
  EXPECT_EQ(p.phase(), "train");
  EXPECT_EQ(p.totalSteps(), 939);
  EXPECT_TRUE(p.barText().startsWith("train ")) << p.barText().toStdString();
  // 100 steps in 10 s: 1044.5 - 100 step equivalents to go at 10 a second, and the two benchmarks' 2.4 s.
  ASSERT_TRUE(p.etaSeconds().has_value());
  EXPECT_NEAR(*p.etaSeconds(), 96.85, 1e-9);

  p.applyBatch(batch(630, 63'000, RunStatus::running,
                     {event("phase", {{"phase", "prune"}, {"first_step", 469}}),
                      event("phase", {{"phase", "finetune"}, {"steps", 469}, {"first_step", 469}})}));
  EXPECT_EQ(p.phase(), "finetune");
  EXPECT_NE(p.text().indexOf("finetune (phase 3 of 6), step 630 of 939"), -1) << p.text().toStdString();
  // Done: train, prune, 161 fine-tuning steps (656.04 equivalents in 63 s); the rest of the plan to go.
  EXPECT_NEAR(*p.etaSeconds(), (1044.5 - 469 - eval - 161) * 63 / (469 + eval + 161) + 2.4, 1e-9);
  EXPECT_NEAR(*p.etaSeconds(), 39.704, 1e-3);
  EXPECT_EQ(p.barValue(), 630 * 1000 / 939);

  // The quantization logs under quant/* one step on; the second benchmark is the plan's 6th phase.
  p.applyBatch(batch(939, 95'000, RunStatus::running,
                     {event("phase", {{"phase", "benchmark"}}), event("phase", {{"phase", "calibrate"}}),
                      event("phase", {{"phase", "benchmark"}})},
                     "quant/test_accuracy"));
  EXPECT_EQ(p.phase(), "benchmark");
  EXPECT_NE(p.text().indexOf("benchmark (phase 6 of 6)"), -1) << p.text().toStdString();
  // Every step is done, yet the last benchmark is still to run: its test pass and its 1.2 s.
  ASSERT_TRUE(p.etaSeconds().has_value());
  EXPECT_NEAR(*p.etaSeconds(), eval * (95 - 1.2) / (1044.5 - eval) + 1.2, 1e-9);
  EXPECT_GT(*p.etaSeconds(), 3.5);
  EXPECT_NE(p.text().indexOf("ETA 4 s"), -1) << p.text().toStdString();

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
