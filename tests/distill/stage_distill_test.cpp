// The distillation stage in real (tiny) runs on Fashion-MNIST: a zoo teacher trained first, a saved
// teacher from a file and from run:<id>, the distill/* metrics, the teacher cache file shared by
// two runs, and bad teachers rejected before a run folder exists.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/data/dataset.h"
#include "engine/run/config.h"
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
