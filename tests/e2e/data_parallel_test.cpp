// Data-parallel training is the same training (issue #15's equivalence): `lathe-cli run` with
// compute.devices=2 and batch 64 per rank against one rank with batch 128, same seed and data order,
// cnn on real Fashion-MNIST. After 10 steps every parameter of the saved models agrees within 1e-6 of
// the largest |value| (plain, ZeRO-1, grad_accum=2 against one rank with grad_accum=2), within 1e-3
// with fp16 buckets; ZeRO-1 holds half of the optimizer state on each rank (a third on 3 ranks). Over 200 steps float rounding grows chaotically in any run (one process with 2
// threads against 1 thread drifts as far), so there the 2-rank gap is held to a few times that
// single-process floor, measured in the same test. The metrics say what was measured
// (dist/world_size, dist/bytes_per_step exactly halved by fp16, per-rank throughput) and only rank 0
// leaves a run folder. The prune stage's masked fine-tuning on 2 ranks (plain and ZeRO-1) gives the
// masks and weights of 1 rank too.
#include <algorithm>
#include <cmath>
#include <map>

#include "engine/data/dataset.h"
#include "engine/dist/sharded_optimizer.h"
#include "engine/nn/safetensors.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/cli_test_util.h"

namespace lathe::test {
namespace {

class DataParallel : public Cli {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
    Cli::SetUp();
    m_cfg = write("cnn.json", R"({"seed": 3, "model": {"zoo": "cnn"},
      "train": {"epochs": 1, "optimizer": {"type": "sgd", "lr": 0.04, "momentum": 0.9}},
      "data": {"test_subset": 1000}, "compute": {"timeout_s": 120}})");
  }

  struct Run {
    std::string dir;                                    ///< its run folder
    std::map<std::string, std::vector<float>> w;        ///< the saved model's parameters
    std::map<std::string, std::vector<uint8_t>> other;  ///< its other tensors' bytes (sparsity masks)
    std::map<std::string, double> last;                 ///< last value of each metric
    int folders = 0;                                    ///< run folders under its output.dir
  };

  /// One run into its own output folder: `name`, global batch 128 over `devices` ranks, `steps` steps;
  /// `model_file` is the saved model read back (f32 tensors into w, others into other).
  Run run(const std::string& name, int steps, int devices, int grad_accum, const std::string& extra = "",
          const std::string& cfg = "", const std::string& model_file = "model.safetensors") {
    const std::filesystem::path out = m_dir / name;
    const int per_rank = 128 / devices;
    const int64_t samples = int64_t{steps} * 128 * grad_accum;
    const CmdResult r = run_cmd(
        "run " + (cfg.empty() ? m_cfg : cfg) + " --db " + db() + " --set output.dir=" + out.string() +
        " --set compute.devices=" + std::to_string(devices) + " --set train.batch_size=" + std::to_string(per_rank) +
        " --set train.grad_accum=" + std::to_string(grad_accum) +
        " --set data.train_subset=" + std::to_string(samples) + " " + extra);
    Run run;
    EXPECT_EQ(r.code, 0) << name << ":\n" << r.out;
    if (r.code != 0)
      return run;
    for (const auto& e : std::filesystem::directory_iterator(out))
      if (e.is_directory() && e.path().extension() != ".ranks") {
        run.dir = e.path().string();
        ++run.folders;
      }
    for (auto& [pname, t] : load_safetensors(run.dir + "/" + model_file).tensors)
      if (t.dtype() == DType::f32)
        run.w[pname].assign(t.data<float>(), t.data<float>() + t.numel());
      else
        run.other[pname].assign(static_cast<const uint8_t*>(t.raw()),
                                static_cast<const uint8_t*>(t.raw()) + t.nbytes());
    std::ifstream metrics(run.dir + "/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j.contains("metric") && j["value"].is_number())
        run.last[j["metric"].get<std::string>()] = j["value"].get<double>();
    }
    return run;
  }

  /// The largest |a - b| over every parameter, relative to the largest |a|.
  static double relative_gap(const Run& a, const Run& b) {
    EXPECT_EQ(a.w.size(), b.w.size());
    double gap = 0, largest = 0;
    for (const auto& [name, wa] : a.w) {
      const auto it = b.w.find(name);
      if (it == b.w.end() || it->second.size() != wa.size()) {
        ADD_FAILURE() << "parameter " << name << " missing or of another size";
        return INFINITY;
      }
      for (size_t i = 0; i < wa.size(); ++i) {
        gap = std::max(gap, static_cast<double>(std::abs(wa[i] - it->second[i])));
        largest = std::max(largest, static_cast<double>(std::abs(wa[i])));
      }
    }
    return gap / largest;
  }

  std::string m_cfg;
};

TEST_F(DataParallel, TwoRanksOfBatch64TrainTheModelOfOneRankOfBatch128) {
  constexpr int kSteps = 10;
  const Run one = run("one", kSteps, 1, 1, "--set train.threads=2");
  const Run two = run("two", kSteps, 2, 1);
  const Run zero = run("zero1", kSteps, 2, 1, "--set compute.shard_optimizer=true");
  const Run fp16 = run("fp16", kSteps, 2, 1, "--set compute.grad_compression=fp16");
  const Run one_accum = run("one-accum", kSteps, 1, 2, "--set train.threads=2");
  const Run two_accum = run("two-accum", kSteps, 2, 2);
  ASSERT_FALSE(one.w.empty() || two.w.empty() || zero.w.empty() || fp16.w.empty() || one_accum.w.empty() ||
               two_accum.w.empty());

  EXPECT_EQ(one.last.at("train/lr"), 0.04);
  EXPECT_EQ(two.folders, 1) << "rank 1 must leave no run folder";
  const double plain = relative_gap(one, two), sharded = relative_gap(one, zero), half = relative_gap(one, fp16),
               accum = relative_gap(one_accum, two_accum);
  EXPECT_LE(plain, 1e-6);
  EXPECT_LE(sharded, 1e-6);
  // Four partial sums per step instead of two: on AVX2 (no AVX-512) oneDNN's blocking leaves 1.8e-6
  // here, within the issue's 1e-5 (a lost micro-batch or a wrong scale is ~1e-2).
  EXPECT_LE(accum, 1e-5);
  EXPECT_LE(half, 1e-3);
  // The runs did train apart from the start (not two copies of the initial weights).
  EXPECT_GT(relative_gap(one, run("other-seed", kSteps, 1, 1, "--set seed=4 --set train.threads=2")), 1e-2);
  std::printf(
      "[ measured ] 2x64 vs 1x128 after %d cnn steps: max |dw| / max |w| = %.2e plain, %.2e ZeRO-1, "
      "%.2e fp16, %.2e grad_accum=2\n",
      kSteps, plain, sharded, half, accum);

  EXPECT_EQ(two.last.at("dist/world_size"), 2);
  EXPECT_EQ(one.last.count("dist/world_size"), 0u);
  EXPECT_GT(two.last.at("dist/bytes_per_step"), 0);
  EXPECT_EQ(fp16.last.at("dist/bytes_per_step") * 2, two.last.at("dist/bytes_per_step"));
  for (const char* m : {"dist/comm_s", "dist/comm_fraction", "dist/rank0/samples_per_s", "dist/rank1/samples_per_s",
                        "dist/rank0/util", "dist/rank1/util"})
    EXPECT_TRUE(two.last.count(m)) << "missing " << m;
  EXPECT_GE(two.last.at("dist/comm_fraction"), 0);
  EXPECT_LE(two.last.at("dist/comm_fraction"), 1);
  // ZeRO-1's flat partition: each rank holds half of the momentum within one alignment unit (16
  // f32), though one weight is 95% of the cnn's parameters (whole tensors gave rank 0 all of it).
  const double all = two.last.at("mem/optimizer_bytes"), unit = kShardAlign * 4;
  EXPECT_EQ(two.last.at("dist/rank1/optimizer_bytes"), all) << "unsharded, every rank holds all of it";
  EXPECT_EQ(zero.last.at("mem/optimizer_bytes"), zero.last.at("dist/rank0/optimizer_bytes"));
  EXPECT_NEAR(zero.last.at("dist/rank0/optimizer_bytes"), all / 2, unit);
  EXPECT_NEAR(zero.last.at("dist/rank1/optimizer_bytes"), all / 2, unit);
  EXPECT_EQ(zero.last.at("dist/rank0/optimizer_bytes") + zero.last.at("dist/rank1/optimizer_bytes"), all);
  std::printf("[ measured ] ZeRO-1 optimizer state %.0f B on rank 0, %.0f B on rank 1, against %.0f B unsharded\n",
              zero.last.at("dist/rank0/optimizer_bytes"), zero.last.at("dist/rank1/optimizer_bytes"), all);
}

TEST_F(DataParallel, ZeroOneOnThreeRanksSplitsTheStateInThirdsAndTrainsAsPlainDataParallel) {
  // 421,642 cnn parameters do not divide by 3: the cuts fall inside the large dense weight.
  constexpr int kSteps = 5;
  const Run plain = run("plain3", kSteps, 3, 1);
  const Run zero = run("zero3", kSteps, 3, 1, "--set compute.shard_optimizer=true");
  ASSERT_FALSE(plain.w.empty() || zero.w.empty());
  const double gap = relative_gap(plain, zero);
  EXPECT_EQ(gap, 0.0) << "the update is elementwise: ZeRO-1's weights are plain data parallel's bit for bit";
  const double all = plain.last.at("mem/optimizer_bytes"), unit = kShardAlign * 4;
  double sum = 0;
  for (int r = 0; r < 3; ++r) {
    const double mine = zero.last.at("dist/rank" + std::to_string(r) + "/optimizer_bytes");
    EXPECT_NEAR(mine, all / 3, unit) << "rank " << r;
    sum += mine;
  }
  EXPECT_EQ(sum, all);
  std::printf("[ measured ] ZeRO-1 on 3 ranks: %.0f / %.0f / %.0f B of %.0f B; max |dw| / max |w| = %.2e\n",
              zero.last.at("dist/rank0/optimizer_bytes"), zero.last.at("dist/rank1/optimizer_bytes"),
              zero.last.at("dist/rank2/optimizer_bytes"), all, gap);
}

TEST_F(DataParallel, OverALongRunTwoRanksDriftNoFurtherThanOneProcessOnOtherThreads) {
  constexpr int kSteps = 200;
  const Run one = run("one", kSteps, 1, 1, "--set train.threads=2");
  const Run threads = run("one-thread", kSteps, 1, 1, "--set train.threads=1");
  const Run two = run("two", kSteps, 2, 1);
  ASSERT_FALSE(one.w.empty() || threads.w.empty() || two.w.empty());
  const double floor = relative_gap(one, threads), gap = relative_gap(one, two);
  std::printf(
      "[ measured ] after %d cnn steps, max |dw| / max |w| against 1x128 on 2 threads: %.2e for 2x64, "
      "%.2e for 1x128 on 1 thread (the rounding floor); test accuracy %.4f, %.4f, %.4f\n",
      kSteps, gap, floor, one.last.at("test/accuracy"), two.last.at("test/accuracy"), threads.last.at("test/accuracy"));
  EXPECT_LE(gap, 3 * floor + 1e-3);
  EXPECT_GT(two.last.at("test/accuracy"), 0.75);
}

TEST_F(DataParallel, PruneFineTuningOnTwoRanksEqualsItOnOne) {
  // Issue 15 item 6: the compression stages' fine-tuning is a train phase too, so it runs on every
  // rank with the same shares. 2:4 pruning of the mlp after 5 steps, then 5 masked fine-tuning steps.
  constexpr int kSteps = 5;
  const std::string cfg = std::string(LATHE_SOURCE_DIR) + "/experiments/prune-nm24.json";
  const std::string extra = "--set train.epochs=1 --set data.test_subset=1000";
  const Run one = run("one", kSteps, 1, 1, extra + " --set train.threads=2", cfg, "model.pruned.safetensors");
  const Run two = run("two", kSteps, 2, 1, extra, cfg, "model.pruned.safetensors");
  // ZeRO-1 too: each rank zeroes the pruned entries of its slice of the momentum.
  const Run zero = run("zero", kSteps, 2, 1, extra + " --set compute.shard_optimizer=true", cfg,
                       "model.pruned.safetensors");
  ASSERT_FALSE(one.w.empty() || two.w.empty() || zero.w.empty());
  EXPECT_EQ(relative_gap(two, zero), 0.0) << "ZeRO-1's weights are plain data parallel's bit for bit";
  EXPECT_EQ(one.other, zero.other);
  EXPECT_LE(relative_gap(one, zero), 1e-6);
  EXPECT_FALSE(one.other.empty()) << "the pruned file holds its masks";
  EXPECT_EQ(one.other, two.other) << "the same weights are pruned on 1 and 2 ranks";
  const double gap = relative_gap(one, two);
  EXPECT_LE(gap, 1e-6);
  EXPECT_NEAR(one.last.at("pruned/test_accuracy"), two.last.at("pruned/test_accuracy"), 0.002);
  EXPECT_EQ(two.last.at("dist/world_size"), 2);
  std::printf(
      "[ measured ] 2:4 prune + %d fine-tuning steps, 2x64 vs 1x128: max |dw| / max |w| = %.2e; "
      "pruned test accuracy %.4f vs %.4f\n",
      kSteps, gap, one.last.at("pruned/test_accuracy"), two.last.at("pruned/test_accuracy"));
}

}  // namespace
}  // namespace lathe::test
