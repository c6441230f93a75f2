// The low-rank stage on a tiny synthetic dataset: the context's model is replaced by the factored
// one, fine-tuning advances the global step, and the metrics are the ones promised (ranks, the
// parameter ratio counted here, model/bytes equal to the size of the file the factored model really
// serializes to, dense and factored latency at batch 1 and 256).
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/compress/lowrank/lowrank_config.h"
#include "engine/compress/lowrank/lowrank_stage.h"
#include "engine/nn/model_io.h"
#include "engine/nn/zoo.h"
#include "tests/compress/lowrank_test_models.h"
#include "tests/support/config_from.h"
#include "tests/support/quadrant_set.h"
#include "tests/support/recording_sink.h"

namespace lathe {
namespace {

using test::RecordingSink;

ExperimentConfig finetune_config_with(const std::vector<std::string>& overrides) {
  std::vector<std::string> sets = {"train.batch_size=16", "train.epochs=1", "train.optimizer.lr=0.05",
                                   "lowrank.method=svd", "lowrank.finetune_epochs=1"};
  sets.insert(sets.end(), overrides.begin(), overrides.end());
  return test::config_from(sets);
}

using test::small_cnn;

TEST(LowRankStage, ReplacesTheModelFineTunesAndLogsWhatItPromised) {
  const ExperimentConfig cfg = finetune_config_with({"lowrank.rank=2", "lowrank.exclude=6"});
  RunOptions options;
  auto be = make_backend("cpu");
  TrainTest data;
  data.train = test::quadrant_set(64, 1);
  data.test = test::quadrant_set(32, 2);
  auto model = small_cnn();
  Rng rng(3);
  model->create_params(*be, DType::f32, rng);
  const int64_t dense_params = model->param_count();
  RecordingSink sink;
  StageContext ctx{cfg, options, *be, data, std::move(model), sink};
  ctx.wall_ms = [] { return 0.0; };
  ctx.step = 10;  // as if training had run

  std::unique_ptr<Stage> stage = new_lowrank_stage();
  EXPECT_EQ(stage->section(), "lowrank");
  ASSERT_TRUE(stage->enabled(cfg));
  stage->run(ctx);

  // conv 0 (8 x 9) -> 1 x 1 ... rank 2: 2 x (8 + 9) = 34 < 72; linear 4 (12 x 128) -> 2 x 140 = 280;
  // linear 6 excluded.
  Model& m = *ctx.model;
  ASSERT_GE(m.find("0.0"), 0);
  ASSERT_GE(m.find("4.1"), 0);
  EXPECT_LT(m.find("6.0"), 0);
  EXPECT_EQ(sink.last("lowrank/rank/0"), 2);
  EXPECT_EQ(sink.last("lowrank/rank/4"), 2);
  EXPECT_EQ(sink.last("lowrank/rank/6"), 4);  // dense: its full rank min(4, 12)
  const int64_t params = dense_params - (72 + 1536) + (34 + 280);
  EXPECT_EQ(m.param_count(), params);
  EXPECT_EQ(sink.last("model/params"), params);
  EXPECT_DOUBLE_EQ(sink.last("lowrank/params_ratio"), static_cast<double>(params) / dense_params);
  EXPECT_DOUBLE_EQ(sink.last("lowrank/weight_bytes_ratio"), (34.0 + 280 + 48) / (72 + 1536 + 48));

  // One fine-tuning epoch of 64 / 16 steps.
  EXPECT_EQ(ctx.step, 10 + 4);
  EXPECT_EQ(sink.samples.at("dense/test_accuracy").back().first, 10);
  EXPECT_EQ(sink.samples.at("lowrank/test_accuracy").back().first, 14);
  EXPECT_NEAR(sink.last("lowrank/accuracy_drop_pt"),
              100 * (sink.last("dense/test_accuracy") - sink.last("lowrank/test_accuracy")), 1e-9);

  // model/bytes: the real serialized size (no run folder: measured, not written).
  const std::string tmp = (std::filesystem::temp_directory_path() / "lathe-lowrank-stage-test.safetensors").string();
  const int64_t bytes = save_model(m, *be, tmp,
                                   {{"format", "pt"},
                                    {"lathe_model", std::string(enum_name(cfg.model.zoo))},
                                    {"lathe_run", ""},
                                    {"lathe_kind", "lowrank"},
                                    {"lathe_lowrank_ranks", R"({"0":2,"4":2})"}});
  std::filesystem::remove(tmp);
  EXPECT_EQ(sink.last("model/bytes"), bytes);
  EXPECT_LT(sink.last("model/bytes"), sink.last("model/dense_bytes"));
  EXPECT_DOUBLE_EQ(sink.last("lowrank/bytes_ratio"), bytes / sink.last("model/dense_bytes"));

  for (const std::string label : {"dense", "lowrank"})
    for (const std::string b : {"1", "256"})
      EXPECT_GT(sink.last("latency/" + label + "/b" + b + "_ms"), 0) << label << b;
  EXPECT_NEAR(sink.last("lowrank/speedup_b256"),
              sink.last("latency/dense/b256_ms") / sink.last("latency/lowrank/b256_ms"), 1e-9);
  EXPECT_NE(std::find(sink.events.begin(), sink.events.end(), "lowrank"), sink.events.end());
}

}  // namespace
}  // namespace lathe
