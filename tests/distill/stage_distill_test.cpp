// The distillation stage in real (tiny) runs on Fashion-MNIST: a zoo teacher trained first, a saved
// teacher from a file and from run:<id>, the distill/* metrics, the teacher cache file shared by
// two runs, and bad teachers rejected before a run folder exists.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>

#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/data/dataset.h"
#include "engine/run/checkpoint.h"
#include "engine/run/config.h"
#include "engine/run/spot_notice.h"
#include "engine/run/trainer.h"
#include "tests/distill/distill_run_fixture.h"
#include "tests/support/config_from.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

using test::config_from;

class DistillStageRun : public test::DistillRunFixture {
 protected:
  DistillStageRun() : DistillRunFixture("lathe-distill-") {}
};

TEST_F(DistillStageRun, ZooTeacherIsTrainedFirstAndTheMetricsAreLogged) {
  RunOptions o;
  o.write_run_dir = false;
  const RunSummary s = run_experiment(
      config_from(tiny({"distill.teacher=zoo:mlp", "distill.teacher_epochs=1", "distill.feature_pairs=1:3"})), o);
  EXPECT_EQ(s.status, "finished");
  for (const char* m : {"distill/kd_loss", "distill/feature_loss", "distill/teacher_accuracy", "teacher/test/accuracy",
                        "teacher/train/loss", "test/accuracy"})
    EXPECT_TRUE(s.final_metrics.count(m)) << "missing " << m;
  EXPECT_EQ(s.steps, 2 * 8);  // 8 teacher steps, then 8 student steps (512 / 64)
  // The teacher's accuracy is measured on the same test set its own evaluation used.
  EXPECT_DOUBLE_EQ(s.final_metrics.at("distill/teacher_accuracy"), s.final_metrics.at("teacher/test/accuracy"));
  EXPECT_GT(s.final_metrics.at("distill/teacher_accuracy"), 0.5);
  EXPECT_GT(s.final_metrics.at("distill/kd_loss"), 0);
}

TEST_F(DistillStageRun, SavedTeacherFromAFileAndFromARunShareTheCacheFile) {
  const RunSummary t = run_experiment(config_from(tiny({"model.zoo=mlp", "name=t"})), {});
  const std::string weights = t.run_dir + "/model.safetensors";
  ASSERT_TRUE(fs::exists(weights));
  const std::string cache = (m_dir / "cache.bin").string();
  RunOptions o;
  o.write_run_dir = false;
  const RunSummary a = run_experiment(
      config_from(tiny({"distill.teacher=" + weights, "distill.teacher_cache=" + cache, "distill.alpha=0.9"})), o);
  ASSERT_TRUE(fs::exists(cache));
  // run:<id> without a store resolves under output.dir; it reuses the cache (same weights).
  const RunSummary b = run_experiment(
      config_from(tiny({"distill.teacher=run:" + t.run_id, "distill.teacher_cache=" + cache, "distill.alpha=0.9"})), o);
  EXPECT_DOUBLE_EQ(a.final_metrics.at("distill/teacher_accuracy"), t.final_metrics.at("test/accuracy"));
  EXPECT_DOUBLE_EQ(b.final_metrics.at("distill/teacher_accuracy"), t.final_metrics.at("test/accuracy"));
  // Same seed, same teacher outputs (computed or cached): the same student, bit for bit.
  EXPECT_EQ(a.final_metrics.at("train/loss"), b.final_metrics.at("train/loss"));
  EXPECT_EQ(a.final_metrics.at("test/accuracy"), b.final_metrics.at("test/accuracy"));
}

TEST_F(DistillStageRun, BadTeachersFailBeforeAnythingIsWritten) {
  const auto before = std::distance(fs::directory_iterator(m_dir), fs::directory_iterator());
  EXPECT_THROW(run_experiment(config_from(tiny({"distill.teacher=/nonexistent/model.safetensors"}))), DataError);
  EXPECT_THROW(run_experiment(config_from(tiny({"distill.teacher=run:no-such-run"}))), DataError);
  EXPECT_THROW(run_experiment(config_from(tiny({"distill.teacher=zoo:teacher", "distill.feature_pairs=1:99"}))),
               ConfigError);
  EXPECT_THROW(run_experiment(config_from(tiny({"distill.teacher=zoo:teacher", "distill.feature_pairs=0:8"}))),
               ConfigError);  // student node 0 is fused with its ReLU
  EXPECT_THROW(run_experiment(config_from(tiny({"distill.teacher=teacher"}))), ConfigError);  // at validation
  EXPECT_EQ(std::distance(fs::directory_iterator(m_dir), fs::directory_iterator()), before);
}

/// Counts the teacher's own training samples (teacher/*) of a run.
struct TeacherSampleCounter final : MetricsSink {
  int teacher_samples = 0;
  void sample(const std::string& metric, int64_t, double, double) override {
    teacher_samples += metric.rfind("teacher/", 0) == 0;
  }
  void event(const std::string&, const nlohmann::json&) override {}
};

// A resumed run takes a zoo teacher's trained weights from its checkpoint (stage/distill/teacher/*):
// a checkpoint whose teacher tensor has another shape is refused, naming the checkpoint, the tensor
// and both shapes, before the teacher trains.
TEST_F(DistillStageRun, ResumeRefusesACheckpointTeacherTensorOfAnotherShape) {
  const std::string ckpt = (m_dir / "ckpt").string();
  const std::vector<std::string> sets = tiny(
      {"distill.teacher=zoo:mlp", "distill.teacher_epochs=1", "checkpoint.every_steps=4", "checkpoint.dir=" + ckpt});
  RunOptions o;
  o.write_run_dir = false;
  o.run_id = "distill-run";
  ASSERT_EQ(run_experiment(config_from(sets), o).status, "finished");
  std::optional<LoadedCheckpoint> c = load_newest_checkpoint(ckpt + "/distill-run");
  ASSERT_TRUE(c);
  bool replaced = false;
  for (auto& named : c->data.tensors)
    if (named.first == "stage/distill/teacher/0.weight") {
      EXPECT_EQ(named.second.shape(), (Shape{512, 784}));
      named.second = Tensor::zeros({3, 4}, DType::f32);
      replaced = true;
    }
  ASSERT_TRUE(replaced) << "the checkpoint holds no trained teacher";
  write_checkpoint(ckpt + "/distill-run", c->info.step, c->data, 3);  // a valid manifest again

  TeacherSampleCounter counter;
  RunOptions r;
  r.write_run_dir = false;
  r.run_id = "distill-run";
  r.resume_checkpoint_dir = ckpt + "/distill-run";
  r.extra_sink = &counter;
  try {
    run_experiment(config_from(sets), r);
    ADD_FAILURE() << "the checkpoint was accepted";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("stage/distill/teacher/0.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("[3, 4]"), std::string::npos) << what;
    EXPECT_NE(what.find("[512, 784]"), std::string::npos) << what;
    EXPECT_NE(what.find(c->info.path), std::string::npos) << what;
  }
  EXPECT_EQ(counter.teacher_samples, 0) << "the teacher trained before the checkpoint was refused";
}

// A stop request during the zoo teacher's training cuts it short and ends the run there: no
// student step (it would learn from a half-trained teacher), no teacher accuracy, no checkpoint, so
// that the resume starts over and ends as the uninterrupted run.
TEST_F(DistillStageRun, ATeacherCutShortByAStopEndsTheRunWithNoCheckpoint) {
  struct StopInTheTeacher final : MetricsSink {
    std::atomic<bool> stop{false};
    std::atomic<int> reason{static_cast<int>(StopReason::none)};
    void sample(const std::string& metric, int64_t step, double, double) override {
      if (metric == "teacher/train/loss" && step >= 3 && !stop) {
        reason = static_cast<int>(StopReason::signal);
        stop = true;
      }
    }
    void event(const std::string&, const nlohmann::json&) override {}
  };
  const std::string ckpt = (m_dir / "ckpt").string();
  StopInTheTeacher sink;
  RunOptions o;
  o.write_run_dir = false;
  o.run_id = "stopped-teacher";
  o.stop = &sink.stop;
  o.stop_reason = &sink.reason;
  o.extra_sink = &sink;
  const RunSummary s = run_experiment(
      config_from(tiny({"distill.teacher=zoo:mlp", "distill.teacher_epochs=1", "checkpoint.dir=" + ckpt})), o);
  ASSERT_TRUE(sink.stop);
  EXPECT_EQ(s.status, "cancelled");
  EXPECT_LT(s.steps, 8) << "the teacher's 8 steps all ran";
  EXPECT_EQ(s.final_metrics.count("distill/teacher_accuracy"), 0u);
  EXPECT_EQ(s.final_metrics.count("train/loss"), 0u) << "the student trained";
  EXPECT_FALSE(load_newest_checkpoint(ckpt + "/stopped-teacher")) << "a checkpoint of a student step";
  // The resume finds no checkpoint, starts over and ends as a run never stopped.
  RunOptions r;
  r.write_run_dir = false;
  r.run_id = "stopped-teacher";
  r.resume_checkpoint_dir = ckpt + "/stopped-teacher";
  const std::vector<std::string> sets = tiny({"distill.teacher=zoo:mlp", "distill.teacher_epochs=1"});
  const RunSummary resumed = run_experiment(config_from(sets), r);
  ASSERT_EQ(resumed.status, "finished");
  const RunSummary whole = run_experiment(config_from(sets), {});
  EXPECT_EQ(resumed.steps, whole.steps);
  EXPECT_EQ(resumed.final_metrics.at("test/accuracy"), whole.final_metrics.at("test/accuracy"));
  EXPECT_EQ(resumed.final_metrics.at("distill/teacher_accuracy"), whole.final_metrics.at("distill/teacher_accuracy"));
}

// A saved teacher (a file) is not trained in the run: its checkpoints carry no teacher weights, and
// a resume reads the file again and ends with the uninterrupted run's student.
TEST_F(DistillStageRun, SavedTeacherCheckpointsCarryNoTeacherAndResume) {
  const RunSummary t = run_experiment(config_from(tiny({"model.zoo=mlp", "name=t"})), {});
  const std::string weights = t.run_dir + "/model.safetensors";
  const std::string ckpt = (m_dir / "ckpt").string();
  const std::vector<std::string> sets =
      tiny({"distill.teacher=" + weights, "checkpoint.every_steps=4", "checkpoint.dir=" + ckpt});
  RunOptions o;
  o.write_run_dir = false;
  o.run_id = "file-teacher";
  const RunSummary first = run_experiment(config_from(sets), o);
  ASSERT_EQ(first.status, "finished");
  const std::optional<LoadedCheckpoint> c = load_newest_checkpoint(ckpt + "/file-teacher");
  ASSERT_TRUE(c);
  for (const auto& named : c->data.tensors)
    EXPECT_NE(named.first.rfind("stage/distill/", 0), 0u) << named.first;  // no projections, no teacher
  // From the checkpoint of step 4 (the newest is the last step): the rest trained again, the same.
  const std::vector<std::string> all = list_checkpoints(ckpt + "/file-teacher");
  ASSERT_GE(all.size(), 2u);
  for (size_t i = 1; i < all.size(); ++i)
    std::filesystem::remove_all(all[i]);
  RunOptions r;
  r.write_run_dir = false;
  r.run_id = "file-teacher";
  r.resume_checkpoint_dir = ckpt + "/file-teacher";
  const RunSummary resumed = run_experiment(config_from(sets), r);
  EXPECT_EQ(resumed.status, "finished");
  EXPECT_EQ(resumed.final_metrics.at("test/accuracy"), first.final_metrics.at("test/accuracy"));
  EXPECT_EQ(resumed.final_metrics.at("train/loss"), first.final_metrics.at("train/loss"));
}

TEST(DistillConfig, KnobsParseAndBadValuesAreRejected) {
  const ExperimentConfig c =
      config_from({"distill.teacher=zoo:teacher", "distill.temperature=2", "distill.feature_pairs=1:8",
                   "distill.teacher_epochs=3", "distill.student_augment_factor=1.5", "distill.cache_teacher=false"});
  EXPECT_EQ(c.distill.teacher, "zoo:teacher");
  EXPECT_EQ(c.distill.temperature, 2);
  EXPECT_EQ(c.distill.feature_pairs, "1:8");
  EXPECT_EQ(c.distill.teacher_epochs, 3);
  EXPECT_EQ(c.distill.student_augment_factor, 1.5);
  EXPECT_FALSE(c.distill.cache_teacher);
  const ExperimentConfig d = config_from({});
  EXPECT_EQ(d.distill.teacher, "");
  EXPECT_EQ(d.distill.feature_weight, 0.3);
  EXPECT_EQ(d.distill.student_augment_factor, 1.2);
  for (const char* bad : {"distill.temperature=0", "distill.alpha=1.5", "distill.teacher_epochs=0",
                          "distill.feature_weight=-1", "distill.student_augment_factor=-0.5"})
    EXPECT_THROW(config_from({bad}), ConfigError) << bad;
}

}  // namespace
}  // namespace lathe
