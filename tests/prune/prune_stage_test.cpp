// The prune stage on a tiny synthetic task: AGP reaches its final sparsity exactly with the masks
// held through fine-tuning, N:M leaves at most N nonzeros per group, sensitivity curves are logged
// per layer at steps 10..90 and the pick reaches the target, the compressed bytes and the dense vs
// pruned latency are reported, the deployed (sparse-kernel) model scores what the masked model
// scores, the dense layers are back afterwards, and bad prune configs are rejected early.
#include <gtest/gtest.h>

#include "engine/compress/prune/mask.h"
#include "engine/nn/zoo.h"
#include "engine/run/stage_prune.h"
#include "tests/support/quadrant_set.h"
#include "tests/support/recording_sink.h"

namespace lathe {
namespace {

using test::RecordingSink;

using test::quadrant_set;

ExperimentConfig config(const std::vector<std::string>& overrides) {
  nlohmann::json j = nlohmann::json::object();
  for (const char* o : {"train.batch_size=16", "train.epochs=1", "train.optimizer.lr=0.1", "compute.backend=cpu"})
    apply_override(j, o);
  for (const std::string& o : overrides)
    apply_override(j, o);
  return parse_experiment(validate_config(j));
}

std::unique_ptr<Model> tiny_model(Backend& be) {
  auto m = build_model_from_layers(
      nlohmann::json::parse(
          R"([{"type":"flatten"},{"type":"linear","out":16},{"type":"relu"},{"type":"linear","out":4}])"),
      {1, 8, 8});
  Rng rng(3);
  m->create_params(be, DType::f32, rng);
  return m;
}

struct StageRun {
  ExperimentConfig cfg;
  RunOptions options;
  std::unique_ptr<Backend> be = make_backend("cpu");
  TrainTest data;
  RecordingSink sink;
  std::unique_ptr<StageContext> ctx;

  explicit StageRun(const std::vector<std::string>& overrides) : cfg(config(overrides)) {
    data.train = quadrant_set(96, 1);
    data.test = quadrant_set(48, 2);
    auto model = tiny_model(*be);
    prepare_prune_stage(cfg, *model, *be);
    ctx = std::make_unique<StageContext>(StageContext{cfg, options, *be, data, std::move(model), sink});
    ctx->wall_ms = [] { return 0.0; };
    train_phase(*ctx, main_train_phase(*ctx));
  }
};

TEST(PruneStage, AgpReachesTheTargetAndReportsBytesLatencyAndDeployedAccuracy) {
  StageRun r({"prune.method=l1-unstructured", "prune.ratio=0.75", "prune.schedule=agp", "prune.finetune_epochs=2",
              "prune.agp.frequency=1", "prune.scope=layer"});
  const int64_t before = r.ctx->step;
  run_prune_stage(*r.ctx);
  EXPECT_EQ(r.ctx->step - before, 2 * 6) << "two fine-tuning epochs of 96 / 16 steps";
  EXPECT_DOUBLE_EQ(r.sink.last("prune/sparsity"), 0.75);
  EXPECT_DOUBLE_EQ(r.sink.last("prune/sparsity/1"), 0.75);
  EXPECT_DOUBLE_EQ(r.sink.last("prune/sparsity/3"), 0.75);
  EXPECT_NEAR(r.sink.last("prune/flops_ratio"), 0.25, 1e-12);
  // AGP: the logged sparsity never falls and starts below the target.
  const auto& s = r.sink.samples.at("prune/sparsity");
  EXPECT_LT(s.front().second, 0.75);
  for (size_t i = 1; i < s.size(); ++i)
    EXPECT_GE(s[i].second + 1e-12, s[i - 1].second) << "at step " << s[i].first;
  // The weights are exactly that sparse at the end (masks held through fine-tuning).
  EXPECT_DOUBLE_EQ(sparsity_report(*r.ctx->model).overall(), 0.75);
  EXPECT_LT(r.sink.last("model/bytes"), r.sink.last("model/dense_bytes"));
  for (const char* m : {"latency/dense/b1_ms", "latency/dense/b256_ms", "latency/pruned/b1_ms",
                        "latency/pruned/b256_ms", "throughput/pruned/b256_samples_per_s"})
    EXPECT_GT(r.sink.last(m), 0) << m;
  EXPECT_DOUBLE_EQ(r.sink.last("pruned/deployed_test_accuracy"), r.sink.last("pruned/test_accuracy"));
  EXPECT_EQ(r.ctx->model->layer(1).kind(), "linear") << "the dense layers are restored after deployment";
  EXPECT_NE(std::find(r.sink.events.begin(), r.sink.events.end(), "sparse_kernels"), r.sink.events.end());
}

TEST(PruneStage, NmKeepsAtMostNPerGroup) {
  StageRun r({"prune.method=nm", "prune.nm_n=1", "prune.nm_m=4", "prune.finetune_epochs=1"});
  run_prune_stage(*r.ctx);
  for (const NamedParam& np : prunable_weights(*r.ctx->model)) {
    const Tensor& w = np.param->value;
    for (int64_t o = 0; o < w.dim(0); ++o)
      for (int64_t g = 0; g < w.dim(1); g += 4) {
        int nonzero = 0;
        for (int j = 0; j < 4; ++j)
          nonzero += w.at_flat(o * w.dim(1) + g + j) != 0.0;
        ASSERT_LE(nonzero, 1) << np.name << " row " << o << " group " << g;
      }
  }
  EXPECT_DOUBLE_EQ(r.sink.last("prune/sparsity"), 0.75);
}

TEST(PruneStage, SensitivityCurvesPerLayerAndPick) {
  StageRun r({"prune.method=l1-unstructured", "prune.ratio=0.6", "prune.sensitivity=true",
              "prune.sensitivity_pick=true", "prune.sensitivity_samples=32", "prune.finetune_epochs=0"});
  run_prune_stage(*r.ctx);
  for (const char* layer : {"1", "3"}) {
    const auto& curve = r.sink.samples.at(std::string("sensitivity/") + layer + "/accuracy");
    ASSERT_EQ(curve.size(), 10u) << layer;
    for (int i = 0; i < 10; ++i)
      EXPECT_EQ(curve[i].first, i * 10);
    for (const auto& [step, acc] : curve)
      EXPECT_TRUE(acc >= 0 && acc <= 1);
  }
  EXPECT_NEAR(r.sink.last("prune/sparsity"), 0.6, 0.01) << "the picked per-layer ratios reach the target";
}

TEST(PruneStage, RejectsBadConfigsEarly) {
  auto be = make_backend("cpu");
  auto model = tiny_model(*be);
  auto rejects = [&](const std::vector<std::string>& o, const std::string& field) {
    try {
      prepare_prune_stage(config(o), *model, *be);
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted a bad " << field;
  };
  rejects({"prune.method=nm", "prune.nm_n=3", "prune.nm_m=2"}, "prune.nm_n");
  rejects({"prune.method=l1-unstructured", "prune.schedule=agp", "prune.ratio=0.5", "prune.agp.initial=0.7"},
          "prune.agp.initial");
  rejects({"prune.method=l1-unstructured", "prune.sensitivity_pick=true"}, "prune.sensitivity_pick");
  rejects({"prune.method=l1-unstructured", "prune.exclude=1,,3"}, "prune.exclude");
  rejects({"prune.method=l1-unstructured", "prune.exclude=7"}, "prune.exclude");
  rejects({"prune.method=nm", "prune.nm_n=2", "prune.nm_m=5"}, "prune.nm");  // 64 inputs: not a multiple of 5
  rejects({"prune.method=l1-unstructured", "prune.schedule=agp", "prune.finetune_epochs=0"}, "prune.finetune_epochs");
  rejects({"prune.method=l1-unstructured", "prune.agp.start_step=10", "prune.agp.end_step=5"}, "prune.agp.end_step");
  EXPECT_THROW(config({"prune.method=magnitude"}), ConfigError);
  EXPECT_THROW(config({"prune.ratio=1"}), ConfigError);
  EXPECT_NO_THROW(prepare_prune_stage(config({"prune.method=l1-unstructured", "prune.exclude= 1 , 3"}), *model, *be));
}

}  // namespace
}  // namespace lathe
