// The structured prune stage on a tiny synthetic dataset: the context's model is replaced by the
// smaller one, fine-tuning advances the global step, and the metrics are the ones promised:
// prune/flops_ratio and model/params as counted here, model/bytes equal to the size of the file the
// pruned model really serializes to, latency and throughput for dense and pruned at batch 1 and 256.
// Bad prune options are rejected before anything runs. Its checkpoint state rebuilds the pruned
// model's shapes from the dense weights.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/nn/model_io.h"
#include "engine/run/stage_prune_structured.h"
#include "tests/prune/structured_test_models.h"
#include "tests/support/quadrant_set.h"
#include "tests/support/recording_sink.h"

namespace lathe {
namespace {

using test::RecordingSink;

using test::quadrant_set;

ExperimentConfig config_with(const std::vector<std::string>& overrides) {
  nlohmann::json j = nlohmann::json::object();
  for (const std::string& o :
       {"train.batch_size=16", "train.epochs=1", "train.optimizer.lr=0.05", "prune.method=l2-structured",
        "prune.ratio=0.5", "prune.scope=layer", "prune.finetune_epochs=1"})
    apply_override(j, o);
  for (const std::string& o : overrides)
    apply_override(j, o);
  return parse_experiment(validate_config(j));
}

std::unique_ptr<Model> small_cnn() {
  return build_model_from_layers(nlohmann::json::parse(R"([
    {"type": "conv2d", "out": 8, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"}, {"type": "linear", "out": 12}, {"type": "relu"}, {"type": "linear", "out": 4}])"),
                                 {1, 8, 8});
}

TEST(StructuredStage, ReplacesTheModelFineTunesAndLogsWhatItPromised) {
  const ExperimentConfig cfg = config_with({});
  RunOptions options;
  auto be = make_backend("cpu");
  TrainTest data;
  data.train = quadrant_set(64, 1);
  data.test = quadrant_set(32, 2);
  auto model = small_cnn();
  Rng rng(3);
  model->create_params(*be, DType::f32, rng);
  const int64_t dense_flops = model->flops_per_sample();
  RecordingSink sink;
  StageContext ctx{cfg, options, *be, data, std::move(model), sink};
  ctx.wall_ms = [] { return 0.0; };
  ctx.step = 10;  // as if training had run

  ReplacementRun run;
  run_structured_prune_stage(ctx, run);

  // 8 -> 4 filters, 12 -> 6 neurons; the 4 classes stay.
  Model& m = *ctx.model;
  EXPECT_EQ(test::out_channels(m, "0"), 4);
  EXPECT_EQ(test::in_channels(m, "4"), 4 * 16);
  EXPECT_EQ(test::out_channels(m, "4"), 6);
  EXPECT_EQ(test::out_channels(m, "6"), 4);
  const int64_t flops = 2 * (9 * 4 * 64) + 2 * (64 * 6) + 2 * (6 * 4);
  const int64_t params = (4 * 9 + 4) + (6 * 64 + 6) + (4 * 6 + 4);
  EXPECT_EQ(dense_flops, 2 * (9 * 8 * 64) + 2 * (128 * 12) + 2 * (12 * 4));
  EXPECT_DOUBLE_EQ(sink.last("prune/flops_ratio"), static_cast<double>(flops) / dense_flops);
  EXPECT_EQ(sink.last("model/params"), params);
  EXPECT_EQ(sink.last("prune/channels/0"), 4);

  // One fine-tuning epoch of 64 / 16 steps.
  EXPECT_EQ(ctx.step, 10 + 4);
  EXPECT_EQ(sink.samples.at("test/accuracy").back().first, 14);
  EXPECT_EQ(sink.samples.at("dense/test_accuracy").back().first, 10);
  EXPECT_NEAR(sink.last("prune/accuracy_drop_pt"),
              100 * (sink.last("dense/test_accuracy") - sink.last("pruned/test_accuracy")), 1e-9);

  // model/bytes: the real serialized size of the pruned model (no run folder: measured, not written).
  const std::string tmp = (std::filesystem::temp_directory_path() / "lathe-structured-stage-test.safetensors").string();
  const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                   {"lathe_model", std::string(enum_name(cfg.model.zoo))},
                                                   {"lathe_run", ""},
                                                   {"lathe_kind", "pruned"},
                                                   {"lathe_pruned_channels", R"({"0":4,"4":6,"6":4})"}};
  const int64_t bytes = save_model(m, *be, tmp, meta);
  std::filesystem::remove(tmp);
  EXPECT_EQ(sink.last("model/bytes"), bytes);
  EXPECT_LT(sink.last("model/bytes"), sink.last("model/dense_bytes"));

  for (const std::string label : {"dense", "pruned"})
    for (const std::string b : {"1", "256"}) {
      EXPECT_GT(sink.last("latency/" + label + "/b" + b + "_ms"), 0) << label << b;
      EXPECT_GT(sink.last("throughput/" + label + "/b" + b + "_samples_per_s"), 0) << label << b;
    }
  EXPECT_NEAR(sink.last("prune/speedup_b256"), sink.last("latency/dense/b256_ms") / sink.last("latency/pruned/b256_ms"),
              1e-9);
  EXPECT_NE(std::find(sink.events.begin(), sink.events.end(), "prune"), sink.events.end());

  // The checkpoint state: a fresh, untrained model of the run's shapes, given the state, is pruned
  // to the same shapes (the weights of a checkpoint then load into it) and keeps the dense one.
  const StageState state = replacement_state(run);
  ASSERT_FALSE(state.empty());
  EXPECT_EQ(state.json.at("file_meta").at("lathe_pruned_channels"), R"({"0":4,"4":6,"6":4})");
  ReplacementRun restored;
  load_replacement_state(state, restored);
  EXPECT_EQ(restored.baseline.eval.accuracy, sink.last("dense/test_accuracy"));
  StageContext fresh{cfg, options, *be, data, small_cnn(), sink};
  Rng other(99);
  fresh.model->create_params(*be, DType::f32, other);
  restore_structured_prune(fresh, restored);
  const std::vector<NamedParam> want = m.named_params(), got = fresh.model->named_params();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].param->value.shape(), want[i].param->value.shape()) << got[i].name;
  }
  EXPECT_FALSE(run.dense) << "the dense model outlived its latency comparison";
  ASSERT_TRUE(restored.dense);
  EXPECT_EQ(restored.dense->param_count(), sink.last("model/dense_params"));
  // Dense weights that do not fit the model are refused, naming the tensor.
  restored.dense_tensors[0].second = Tensor::empty({3}, DType::f32);
  StageContext wrong{cfg, options, *be, data, small_cnn(), sink};
  wrong.model->create_params(*be, DType::f32, other);
  try {
    restore_structured_prune(wrong, restored);
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(restored.dense_tensors[0].first), std::string::npos) << e.what();
  }
}

TEST(StructuredStage, OptionsFromConfig) {
  const ExperimentConfig cfg =
      config_with({"prune.method=l1-structured", "prune.scope=global", "prune.ratio=0.3", "prune.exclude=0,4"});
  const StructuredOptions o = structured_options_from_config(cfg.prune);
  EXPECT_EQ(o.norm, StructuredNorm::l1);
  EXPECT_EQ(o.scope, StructuredScope::global);
  EXPECT_DOUBLE_EQ(o.ratio, 0.3);
  EXPECT_EQ(o.exclude, (std::vector<std::string>{"0", "4"}));
  PruneConfig p = cfg.prune;
  p.method = PruneMethod::l1_unstructured;
  EXPECT_THROW(structured_options_from_config(p), ConfigError);
}

TEST(StructuredStage, PrepareRejectsBadOptionsBeforeTheRun) {
  auto be = make_backend("cpu");
  auto model = small_cnn();
  Rng rng(3);
  model->create_params(*be, DType::f32, rng);
  auto message = [&](const std::vector<std::string>& overrides) -> std::string {
    try {
      prepare_structured_prune_stage(config_with(overrides), *model, *be);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({"prune.exclude=nope"}).find("prune.exclude"), std::string::npos);
  EXPECT_NE(message({"prune.exclude=\"1\""}).find("relu"), std::string::npos);
  EXPECT_NE(message({"prune.ratio=1"}).find("prune.ratio"), std::string::npos);
  EXPECT_EQ(message({"prune.exclude=\"0\""}), "");
  EXPECT_EQ(message({"prune.method=l1-unstructured", "prune.exclude=nope"}), "");  // not this stage's to check
}

}  // namespace
}  // namespace lathe
