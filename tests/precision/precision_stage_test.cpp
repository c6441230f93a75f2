// The mixed-precision stage in the real training loop (train_phase on a tiny synthetic task):
// f16 with loss scaling and bf16 train to the f32 result, the precision event and metrics say
// "emulated" on the CPU backends, an overflowing scale is backed off with skipped steps in the
// exact GradScaler relation, hooks set before are still called; and the config rows.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/nn/zoo.h"
#include "engine/run/stage_precision.h"
#include "tests/support/quadrant_set.h"

namespace lathe {
namespace {

struct RecordingSink final : MetricsSink {
  std::map<std::string, std::vector<std::pair<int64_t, double>>> samples;
  std::vector<std::pair<std::string, nlohmann::json>> events;
  void sample(const std::string& metric, int64_t step, double, double value) override {
    samples[metric].push_back({step, value});
  }
  void event(const std::string& kind, const nlohmann::json& f) override { events.push_back({kind, f}); }
};

using test::quadrant_set;

struct Run {
  RecordingSink sink;
  std::vector<float> weights;
  PhaseResult result;
  int prev_before_update = 0, prev_on_log = 0;
};

std::unique_ptr<Run> train(const std::vector<std::string>& overrides, const std::string& backend_name,
                           bool with_previous_hooks = false) {
  nlohmann::json j = nlohmann::json::object();
  for (const char* o : {"train.batch_size=16", "train.epochs=3", "train.optimizer.lr=0.05"})
    apply_override(j, o);
  for (const std::string& o : overrides)
    apply_override(j, o);
  const ExperimentConfig cfg = parse_experiment(validate_config(j));
  RunOptions options;
  auto be = make_backend(backend_name);
  TrainTest data;
  data.train = quadrant_set(96, 1);
  data.test = quadrant_set(48, 2);
  auto model = build_model_from_layers(
      nlohmann::json::parse(
          R"([{"type":"conv2d","out":4,"kernel":3,"padding":1},{"type":"relu"},{"type":"flatten"},{"type":"linear","out":4}])"),
      {1, 8, 8});
  Rng rng(3);
  model->create_params(*be, DType::f32, rng);
  auto run = std::make_unique<Run>();
  StageContext ctx{cfg, options, *be, data, std::move(model), run->sink};
  ctx.wall_ms = [] { return 0.0; };
  TrainHooks hooks;
  if (with_previous_hooks) {
    hooks.before_update = [r = run.get()](Model&, int64_t) {
      ++r->prev_before_update;
      return true;
    };
    hooks.on_log = [r = run.get()](MetricsSink&, int64_t, double) { ++r->prev_on_log; };
  }
  const auto stage = attach_precision_stage(ctx, hooks);
  run->result = train_phase(ctx, main_train_phase(ctx), hooks);
  for (auto& p : ctx.model->named_params()) {
    const Tensor& t = p.param->value;
    EXPECT_EQ(t.dtype(), DType::f32);
    run->weights.insert(run->weights.end(), t.data<float>(), t.data<float>() + t.numel());
  }
  return run;
}

double relative_distance(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    n += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d / n);
}

TEST(PrecisionStage, Fp32AttachesNothing) {
  auto run = train({}, "cpu");
  for (const auto& [kind, f] : run->sink.events)
    EXPECT_NE(kind, "precision");
  EXPECT_EQ(run->sink.samples.count("train/loss_scale"), 0u);
}

TEST(PrecisionStage, LowPrecisionTrainsLikeF32AndSaysEmulated) {
  const auto f32 = train({}, "cpu");
  for (const std::string p : {"bf16", "f16"}) {
    SCOPED_TRACE(p);
    const auto low = train({"train.precision=" + p}, "cpu");
    EXPECT_GT(low->result.last_eval.accuracy, 0.9);
    const double dist = relative_distance(low->weights, f32->weights);
    EXPECT_LT(dist, p == "bf16" ? 0.05 : 0.01);  // rounding noise only
    EXPECT_GT(dist, 0.0);                        // but the rounding did happen
    bool found = false;
    for (const auto& [kind, f] : low->sink.events)
      if (kind == "precision") {
        found = true;
        EXPECT_EQ(f["precision"], p);
        EXPECT_NE(f["note"].get<std::string>().find(f["linear"] == "native" ? "native" : "EMULATED"),
                  std::string::npos);
      }
    EXPECT_TRUE(found);
    ASSERT_FALSE(low->sink.samples["train/precision_emulated"].empty());
    EXPECT_EQ(low->sink.samples.count("train/loss_scale"), p == "f16" ? 1u : 0u);
  }
}

TEST(PrecisionStage, F16ScaleMetricAndExactBackoff) {
  // 2^24 overflows f16 at once (the scaled loss gradient alone exceeds 65504); each skipped step
  // halves it (growth is off for the run's length): the final scale is exactly 2^24 / 2^skipped,
  // and the model still trains on the steps taken.
  const auto run = train({"train.precision=f16", "train.epochs=6", "train.loss_scale.init=16777216",
                          "train.loss_scale.growth_interval=100000"},
                         "reference");
  const auto& scale = run->sink.samples["train/loss_scale"];
  const auto& skipped = run->sink.samples["train/skipped_steps"];
  ASSERT_FALSE(scale.empty());
  ASSERT_EQ(scale.size(), skipped.size());
  const double k = skipped.back().second;
  EXPECT_GE(k, 4);  // 2^24 / 16 samples = 2^20 per logit gradient: several halvings before it fits
  EXPECT_LT(k, run->result.steps);
  EXPECT_EQ(scale.back().second, std::ldexp(1.0, 24 - static_cast<int>(k)));
  for (size_t i = 1; i < skipped.size(); ++i)
    EXPECT_GE(skipped[i].second, skipped[i - 1].second);
  EXPECT_GT(run->result.last_eval.accuracy, 0.9);
}

TEST(PrecisionStage, GrowthAfterTheInterval) {
  const auto run =
      train({"train.precision=f16", "train.loss_scale.init=1", "train.loss_scale.growth_interval=3"}, "cpu");
  // 18 steps, no overflow at these small scales: grows x2 after steps 3, 6, ..., 18.
  EXPECT_EQ(run->result.steps, 18);
  EXPECT_EQ(run->sink.samples["train/skipped_steps"].back().second, 0.0);
  EXPECT_EQ(run->sink.samples["train/loss_scale"].back().second, 64.0);
}

TEST(PrecisionStage, EarlierHooksStillRun) {
  const auto run = train({"train.precision=f16"}, "cpu", true);
  EXPECT_EQ(run->prev_before_update, run->result.steps - run->sink.samples["train/skipped_steps"].back().second);
  EXPECT_GT(run->prev_on_log, 0);
}

std::string problems_of(const nlohmann::json& cfg) {
  try {
    validate_config(cfg);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PrecisionConfig, RowsParseAndBadValuesNameTheField) {
  using nlohmann::json;
  EXPECT_EQ(problems_of({{"train", {{"precision", "bf16"}}}}), "");
  const ExperimentConfig c = parse_experiment(
      validate_config({{"train", {{"precision", "f16"}, {"loss_scale", {{"init", 1024}, {"growth_interval", 7}}}}}}));
  EXPECT_EQ(c.train.precision, Precision::f16);
  EXPECT_EQ(c.train.loss_scale.init, 1024.0);
  EXPECT_EQ(c.train.loss_scale.growth_interval, 7);
  EXPECT_EQ(c.train.loss_scale.growth_factor, 2.0);
  EXPECT_EQ(c.train.loss_scale.backoff_factor, 0.5);
  EXPECT_NE(problems_of({{"train", {{"precision", "fp8"}}}}).find("train.precision: \"fp8\" is not one of"),
            std::string::npos);
  for (const auto& [field, bad] : std::vector<std::pair<std::string, json>>{
           {"init", 0}, {"growth_factor", 0.5}, {"backoff_factor", 1}, {"growth_interval", 0}}) {
    const std::string msg = problems_of({{"train", {{"loss_scale", {{field, bad}}}}}});
    EXPECT_NE(msg.find("train.loss_scale." + field), std::string::npos) << field << ": " << msg;
  }
}

}  // namespace
}  // namespace lathe
