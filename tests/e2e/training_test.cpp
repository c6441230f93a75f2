// End-to-end training runs on real Fashion-MNIST: accuracy after one short epoch, bit-for-bit
// determinism with one thread, gradient accumulation equivalence and the files a run leaves.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <fstream>

#include "engine/data/dataset.h"
#include "engine/nn/model_io.h"
#include "engine/nn/zoo.h"
#include "engine/run/config.h"
#include "engine/run/metrics_sink.h"
#include "engine/run/spot_notice.h"
#include "engine/run/trainer.h"
#include "tests/support/config_from.h"
#include "tests/support/fashion_mnist.h"

namespace lathe {
namespace {

using test::have_fashion_mnist;

using test::config_from;

class TrainingE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_fashion_mnist())
      GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
    m_threads = omp_get_max_threads();
    m_dir = std::filesystem::temp_directory_path() / ("lathe-e2e-" + std::to_string(::getpid()));
  }
  void TearDown() override {
    omp_set_num_threads(m_threads);
    std::filesystem::remove_all(m_dir);
  }
  int m_threads = 1;
  std::filesystem::path m_dir;
};

TEST_F(TrainingE2E, MlpOnFiveThousandImagesOneEpochPassesEightyPercent) {
  // 5,000 images are 313 steps at batch 16; Nesterov momentum with a cosine decay lands at 80.6-81.1%
  // over seeds 0-3 (the plain lr 0.05 / batch 128 recipe gets ~77% from 39 steps, as PyTorch does).
  const ExperimentConfig cfg = config_from(
      {"model.zoo=mlp", "train.epochs=1", "data.train_subset=5000", "train.batch_size=16", "train.optimizer.lr=0.03",
       "train.optimizer.nesterov=true", "train.schedule.type=cosine", "output.dir=" + m_dir.string(), "name=e2e-mlp"});
  const RunSummary s = run_experiment(cfg);
  EXPECT_EQ(s.status, "finished");
  EXPECT_GT(s.final_metrics.at("test/accuracy"), 0.80);
  for (const char* m :
       {"train/loss", "train/accuracy", "train/samples_per_s", "test/loss", "model/params", "model/bytes",
        "model/flops_per_sample", "device/util", "device/mfu", "mem/peak_bytes", "cost/usd"})
    EXPECT_TRUE(s.final_metrics.count(m)) << "missing metric " << m;
  // 784*512+512 + 512*256+256 + 256*10+10 parameters, counted by hand.
  EXPECT_EQ(s.final_metrics.at("model/params"), 535818);
  EXPECT_EQ(s.final_metrics.at("model/flops_per_sample"), 2 * (784 * 512 + 512 * 256 + 256 * 10));
  EXPECT_EQ(s.final_metrics.at("cost/usd"), 0.0);  // instance "local"

  // The run folder holds the config, the metrics and the model file whose size is model/bytes.
  ASSERT_TRUE(std::filesystem::exists(s.run_dir + "/config.json"));
  ASSERT_TRUE(std::filesystem::exists(s.run_dir + "/metrics.jsonl"));
  const std::string model_path = s.run_dir + "/model.safetensors";
  ASSERT_TRUE(std::filesystem::exists(model_path));
  EXPECT_EQ(s.final_metrics.at("model/bytes"), static_cast<double>(std::filesystem::file_size(model_path)));
  std::ifstream metrics(s.run_dir + "/metrics.jsonl");
  std::string line, last;
  int lines = 0;
  while (std::getline(metrics, line)) {
    ASSERT_TRUE(nlohmann::json::accept(line)) << line;
    last = line;
    ++lines;
  }
  EXPECT_GT(lines, 20);
  EXPECT_EQ(nlohmann::json::parse(last)["event"], "finished");

  // The saved weights load back into the same architecture, and are refused by another.
  auto backend = make_backend("cpu");
  auto model = build_zoo_model("mlp");
  Rng rng(99);
  model->create_params(*backend, DType::f32, rng);
  EXPECT_NO_THROW(load_model_weights(*model, *backend, model_path));
  auto wrong = build_zoo_model("student");
  wrong->create_params(*backend, DType::f32, rng);
  EXPECT_THROW(load_model_weights(*wrong, *backend, model_path), DataError);
}

TEST_F(TrainingE2E, SameSeedOneThreadGivesBitIdenticalLosses) {
  auto run = [&](const std::string& id) {
    const ExperimentConfig cfg =
        config_from({"model.zoo=cnn", "train.epochs=1", "data.train_subset=768", "data.test_subset=500",
                     "train.threads=1", "seed=5", "data.augment.shift_px=2", "data.augment.hflip=true",
                     "train.save_model=false", "output.dir=" + m_dir.string()});
    RunOptions o;
    o.write_run_dir = false;
    o.run_id = id;
    return run_experiment(cfg, o);
  };
  const RunSummary a = run("a"), b = run("b");
  EXPECT_EQ(a.final_metrics.at("train/loss"), b.final_metrics.at("train/loss"));  // bit for bit
  EXPECT_EQ(a.final_metrics.at("test/loss"), b.final_metrics.at("test/loss"));
  EXPECT_EQ(a.final_metrics.at("test/accuracy"), b.final_metrics.at("test/accuracy"));
}

TEST_F(TrainingE2E, GradientAccumulationMatchesTheLargerBatch) {
  // 2 micro-batches of 64 with accumulation = one batch of 128, up to float summation order.
  auto run = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> sets{"model.zoo=student",     "train.epochs=1",         "data.train_subset=1280",
                                  "data.test_subset=1000", "train.save_model=false", "train.threads=1"};
    sets.insert(sets.end(), extra.begin(), extra.end());
    RunOptions o;
    o.write_run_dir = false;
    return run_experiment(config_from(sets), o);
  };
  const RunSummary big = run({"train.batch_size=128"});
  const RunSummary accum = run({"train.batch_size=64", "train.grad_accum=2"});
  EXPECT_EQ(big.steps, accum.steps);
  EXPECT_NEAR(big.final_metrics.at("test/loss"), accum.final_metrics.at("test/loss"), 1e-4);
}

TEST_F(TrainingE2E, StopFlagCancelsAfterTheCurrentStep) {
  std::atomic<bool> stop{false};
  RunOptions o;
  o.write_run_dir = false;
  o.stop = &stop;
  o.on_progress = [&](const Progress& p) {
    if (p.step == 3)
      stop = true;
  };
  const RunSummary s = run_experiment(
      config_from({"model.zoo=student", "train.epochs=2", "data.train_subset=2560", "train.save_model=false"}), o);
  EXPECT_EQ(s.status, "cancelled");
  EXPECT_EQ(s.steps, 3);
}

// A spot notice that arrives once the last step has been taken (here during the final evaluation)
// cuts nothing short: the run is finished, not `interrupted` with its last steps after the newest
// checkpoint to be trained again by the resume (the spot supervisor's "steps redone").
TEST_F(TrainingE2E, StopAfterTheLastStepFinishesTheRun) {
  struct StopOnFinalEvaluation final : MetricsSink {
    std::atomic<bool> stop{false};
    std::atomic<int> reason{static_cast<int>(StopReason::none)};
    void sample(const std::string& metric, int64_t, double, double) override {
      if (metric == "test/accuracy") {  // one epoch: the only evaluation, after the last step
        reason = static_cast<int>(StopReason::spot_notice);
        stop = true;
      }
    }
    void event(const std::string&, const nlohmann::json&) override {}
  } sink;
  RunOptions o;
  o.write_run_dir = false;
  o.stop = &sink.stop;
  o.stop_reason = &sink.reason;
  o.extra_sink = &sink;
  const RunSummary s =
      run_experiment(config_from({"model.zoo=mlp", "train.epochs=1", "data.train_subset=512", "data.test_subset=128",
                                  "train.batch_size=32", "train.save_model=false"}),
                     o);
  ASSERT_TRUE(sink.stop);
  EXPECT_EQ(s.status, "finished");
  EXPECT_EQ(s.steps, 16);
}

// The same stop (a notice during the final evaluation) with a stage after the training: the
// finished training is checkpointed (training_done) before the stage, the run ends `interrupted`
// at the stage, and a resume from that checkpoint runs no training step, runs the stage, and ends
// with the uninterrupted run's quantized accuracy.
TEST_F(TrainingE2E, StopAfterTheLastStepWithAStageAfterItResumesAtTheStage) {
  struct StopOnFinalEvaluation final : MetricsSink {
    std::atomic<bool> stop{false};
    std::atomic<int> reason{static_cast<int>(StopReason::none)};
    int train_samples = 0;
    nlohmann::json resumed;
    void sample(const std::string& metric, int64_t, double, double) override {
      train_samples += metric == "train/loss";
      if (metric == "test/accuracy" && !stop) {  // one epoch: the only evaluation, after the last step
        reason = static_cast<int>(StopReason::spot_notice);
        stop = true;
      }
    }
    void event(const std::string& kind, const nlohmann::json& fields) override {
      if (kind == "resumed")
        resumed = fields;
    }
  };
  const std::vector<std::string> sets = {"model.zoo=mlp",          "train.epochs=1",
                                         "data.train_subset=512",  "data.test_subset=128",
                                         "train.batch_size=32",    "train.save_model=false",
                                         "train.threads=1",        "quant.mode=ptq-static",
                                         "quant.calib_samples=64", "checkpoint.dir=" + (m_dir / "ckpt").string()};
  RunOptions plain;
  plain.write_run_dir = false;
  const RunSummary ref = run_experiment(config_from(sets), plain);
  ASSERT_EQ(ref.status, "finished");

  StopOnFinalEvaluation sink;
  RunOptions o;
  o.write_run_dir = false;
  o.run_id = "stopped-run";
  o.stop = &sink.stop;
  o.stop_reason = &sink.reason;
  o.extra_sink = &sink;
  const RunSummary s = run_experiment(config_from(sets), o);
  ASSERT_TRUE(sink.stop);
  EXPECT_EQ(s.status, "interrupted");
  EXPECT_EQ(s.steps, 16);
  EXPECT_EQ(s.final_metrics.count("quant/test_accuracy"), 0u) << "the stage ran";
  const std::string ckpt = (m_dir / "ckpt" / "stopped-run" / "step-000000000016").string();
  ASSERT_TRUE(std::filesystem::exists(ckpt + "/state.json"));
  std::ifstream state_file(ckpt + "/state.json");
  EXPECT_TRUE(nlohmann::json::parse(state_file).value("training_done", false));

  StopOnFinalEvaluation again;  // no stop this time
  RunOptions r;
  r.write_run_dir = false;
  r.run_id = "stopped-run";
  r.resume_checkpoint_dir = (m_dir / "ckpt" / "stopped-run").string();
  r.extra_sink = &again;
  const RunSummary resumed = run_experiment(config_from(sets), r);
  EXPECT_EQ(resumed.status, "finished");
  EXPECT_EQ(again.resumed.value("from_step", -1), 16);
  EXPECT_TRUE(again.resumed.value("training_done", false));
  EXPECT_EQ(again.train_samples, 0) << "a step of the main training ran again";
  EXPECT_EQ(resumed.steps, ref.steps);
  EXPECT_EQ(resumed.final_metrics.at("quant/test_accuracy"), ref.final_metrics.at("quant/test_accuracy"));
  EXPECT_EQ(resumed.final_metrics.at("quant/f32_test_accuracy"), ref.final_metrics.at("quant/f32_test_accuracy"));
}

}  // namespace
}  // namespace lathe
