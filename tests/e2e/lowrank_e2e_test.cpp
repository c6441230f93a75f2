// The low-rank stage end to end through run_experiment on a slice of real Fashion-MNIST (the mlp,
// 1,500 training and 500 test images): the run finishes, the factored model file is written and
// is the size model/bytes says, smaller than the dense one, and the accuracy survives a 50% budget.
// A real training run, so label e2e: the sanitizer stage (unit suites only) spent ~24 s of ASan on it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/data/dataset.h"
#include "engine/run/trainer.h"
#include "tests/support/config_from.h"

namespace lathe {
namespace {

TEST(LowRankE2E, MlpOnASliceOfFashionMnist) {
  if (!std::filesystem::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("lathe-lowrank-e2e-" + std::to_string(::getpid()));
  const ExperimentConfig cfg = test::config_from(
      {"model.zoo=mlp", "train.epochs=1", "data.train_subset=1500", "data.test_subset=500", "train.batch_size=32",
       "train.optimizer.lr=0.05", "train.optimizer.momentum=0.9", "lowrank.method=svd", "lowrank.scope=global",
       "lowrank.target_bytes_ratio=0.5", "lowrank.finetune_epochs=1", "compute.backend=cpu",
       "output.dir=" + dir.string(), "name=e2e-lowrank"});
  const RunSummary s = run_experiment(cfg);
  EXPECT_EQ(s.status, "finished");
  const auto& m = s.final_metrics;
  for (const char* k :
       {"dense/test_accuracy", "lowrank/test_accuracy", "lowrank/accuracy_drop_pt", "lowrank/rank/0", "lowrank/rank/2",
        "lowrank/rank/4", "lowrank/bytes_ratio", "lowrank/params_ratio", "model/dense_bytes", "model/bytes",
        "latency/dense/b1_ms", "latency/dense/b256_ms", "latency/lowrank/b1_ms", "latency/lowrank/b256_ms",
        "lowrank/speedup_b1", "lowrank/speedup_b256"})
    EXPECT_TRUE(m.count(k)) << "missing metric " << k;
  const std::string file = s.run_dir + "/model.lowrank.safetensors";
  ASSERT_TRUE(std::filesystem::exists(file));
  EXPECT_EQ(static_cast<double>(std::filesystem::file_size(file)), m.at("model/bytes"));
  EXPECT_LT(m.at("lowrank/bytes_ratio"), 0.52);  // weights at most half, biases and header on top
  EXPECT_LE(m.at("lowrank/weight_bytes_ratio"), 0.5);
  EXPECT_GT(m.at("lowrank/test_accuracy"), 0.70);
  EXPECT_LT(m.at("lowrank/accuracy_drop_pt"), 3.0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lathe
