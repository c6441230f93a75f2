// The pipeline's training loop and latency helper on a tiny synthetic dataset: hooks are called at
// the right steps, a skipped update leaves the weights alone, the loss scale multiplies the
// gradients exactly, a later phase continues the global step, and latency inputs are checked.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/nn/zoo.h"
#include "engine/run/latency.h"
#include "engine/run/pipeline.h"
#include "tests/support/quadrant_set.h"
#include "tests/support/recording_sink.h"

namespace lathe {
namespace {

// Records every sample; last value and count per metric.
using test::RecordingSink;

using test::quadrant_set;

ExperimentConfig tiny_config() {
  nlohmann::json j = nlohmann::json::object();
  apply_override(j, "train.batch_size=16");
  apply_override(j, "train.epochs=2");
  apply_override(j, "train.optimizer.lr=0.1");
  return parse_experiment(validate_config(j));
}

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend = make_backend("reference");
    data.train = quadrant_set(64, 1);
    data.test = quadrant_set(32, 2);
    auto model =
        build_model_from_layers(nlohmann::json::parse(R"([{"type":"flatten"},{"type":"linear","out":4}])"), {1, 8, 8});
    Rng rng(3);
    model->create_params(*backend, DType::f32, rng);
    ctx = std::make_unique<StageContext>(StageContext{cfg, options, *backend, data, std::move(model), sink});
    ctx->wall_ms = [] { return 0.0; };
  }
  std::vector<float> weights() {
    std::vector<float> w;
    for (auto& p : ctx->model->named_params()) {
      const Tensor& t = p.param->value;
      w.insert(w.end(), t.data<float>(), t.data<float>() + t.numel());
    }
    return w;
  }

  ExperimentConfig cfg = tiny_config();
  RunOptions options;
  std::unique_ptr<Backend> backend;
  TrainTest data;
  RecordingSink sink;
  std::unique_ptr<StageContext> ctx;
};

TEST_F(PipelineTest, MainPhaseTrainsAdvancesTheStepAndEvaluates) {
  const TrainPhase phase = main_train_phase(*ctx);
  EXPECT_EQ(ctx->steps_per_epoch(phase.loader), 4);  // 64 samples / batch 16
  std::vector<int64_t> seen;
  TrainHooks hooks;
  hooks.after_update = [&](Model&, Optimizer&, int64_t step) { seen.push_back(step); };
  const PhaseResult r = train_phase(*ctx, phase, hooks);
  EXPECT_EQ(r.steps, 8);
  EXPECT_EQ(ctx->step, 8);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  ASSERT_EQ(sink.samples["test/accuracy"].size(), 2u);  // after each epoch
  EXPECT_EQ(sink.samples["test/accuracy"].back().first, 8);
  EXPECT_GT(r.last_eval.accuracy, 0.9);  // the quadrant task is easy
  EXPECT_EQ(r.last_eval.samples, 32);
}

TEST_F(PipelineTest, SkippedUpdatesLeaveTheWeightsUnchanged) {
  const std::vector<float> before = weights();
  TrainHooks hooks;
  int calls = 0;
  hooks.before_update = [&](Model&, int64_t) {
    ++calls;
    return false;
  };
  train_phase(*ctx, main_train_phase(*ctx), hooks);
  EXPECT_EQ(calls, 8);
  EXPECT_EQ(weights(), before);
  EXPECT_FALSE(sink.samples["train/loss"].empty());
}

TEST_F(PipelineTest, LossScaleMultipliesTheGradientsExactly) {
  auto grads_of_first_step = [&](double scale) {
    SetUp();
    std::vector<float> g;
    TrainHooks hooks;
    hooks.loss_scale = [scale] { return scale; };
    hooks.before_update = [&](Model& m, int64_t step) {
      if (step == 0)
        for (auto& p : m.named_params())
          g.insert(g.end(), p.param->grad.data<float>(), p.param->grad.data<float>() + p.param->grad.numel());
      return false;
    };
    TrainPhase phase = main_train_phase(*ctx);
    phase.epochs = 1;
    train_phase(*ctx, phase, hooks);
    return g;
  };
  const std::vector<float> g1 = grads_of_first_step(1.0), g8 = grads_of_first_step(8.0);
  ASSERT_EQ(g1.size(), g8.size());
  ASSERT_FALSE(g1.empty());
  double nonzero = 0;
  for (size_t i = 0; i < g1.size(); ++i) {
    EXPECT_EQ(g8[i], 8.0f * g1[i]) << i;  // a power of two scales exactly
    nonzero += g1[i] != 0;
  }
  EXPECT_GT(nonzero, 0);
}

TEST_F(PipelineTest, ALaterPhaseContinuesTheGlobalStep) {
  train_phase(*ctx, main_train_phase(*ctx), {});
  TrainPhase finetune = main_train_phase(*ctx);
  finetune.name = "finetune";
  finetune.epochs = 1;
  finetune.schedule = make_lr_schedule(cfg.train, 0.01, 1, ctx->steps_per_epoch(finetune.loader));
  const PhaseResult r = train_phase(*ctx, finetune, {});
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(ctx->step, 12);
  EXPECT_EQ(ctx->total_steps, 12);
  const auto& loss = sink.samples["train/loss"];
  for (size_t i = 1; i < loss.size(); ++i)
    EXPECT_GT(loss[i].first, loss[i - 1].first);  // steps strictly increase across phases
  EXPECT_EQ(std::count(sink.events.begin(), sink.events.end(), "phase"), 2);
  const EvalResult ev = evaluate_and_log(*ctx, "pruned");
  ASSERT_EQ(sink.samples["pruned/test_accuracy"].size(), 1u);
  EXPECT_EQ(sink.samples["pruned/test_accuracy"][0], std::make_pair(int64_t{12}, ev.accuracy));
}

TEST_F(PipelineTest, LatencyIsMeasuredPerBatchAndBadShapesAreRejected) {
  LatencyOptions lo;
  lo.batches = {1, 8};
  lo.min_seconds = 0.0;
  lo.min_reps = 3;
  int calls = 0;
  std::vector<int64_t> batch_seen;
  const auto results = measure_latency(
      *backend, {1, 8, 8},
      [&](const Tensor& x) {
        ++calls;
        batch_seen.push_back(x.dim(0));
      },
      lo);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].batch, 1);
  EXPECT_EQ(results[1].batch, 8);
  EXPECT_EQ(results[1].repetitions, 3);
  EXPECT_EQ(calls, 2 * (lo.warmup + 3));
  EXPECT_GT(results[1].samples_per_s, 0);
  EXPECT_THROW(measure_latency(
                   *backend, {8, 8}, [](const Tensor&) {}, lo),
               Error);
  log_latency(sink, 5, 0, "dense", results, backend->device_name());
  ASSERT_EQ(sink.samples["latency/dense/b8_ms"].size(), 1u);
  EXPECT_EQ(sink.samples["throughput/dense/b1_samples_per_s"][0].second, results[0].samples_per_s);
}

TEST_F(PipelineTest, LatencyReportsTheSpreadOfItsRepetitions) {
  LatencyOptions lo;
  lo.batches = {1};
  lo.min_seconds = 0.0;
  lo.min_reps = 20;
  lo.warmup = 0;
  int call = 0;
  std::vector<double> took_ms;  // what each call's sleep really took (a loaded machine stretches it)
  const auto results = measure_latency(
      *backend, {1, 8, 8},
      [&](const Tensor&) {  // 1 ms, and every fourth call 4 ms: a spread the percentiles must show
        const auto t0 = std::chrono::steady_clock::now();
        std::this_thread::sleep_for(std::chrono::microseconds(++call % 4 == 0 ? 4000 : 1000));
        took_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      },
      lo);
  ASSERT_EQ(results.size(), 1u);
  const LatencyResult& r = results[0];
  ASSERT_GE(took_ms.size(), 20u);
  std::sort(took_ms.begin(), took_ms.end());
  const double common_ms = took_ms[took_ms.size() / 2 - 1];  // the calls' own median, from below
  EXPECT_LE(r.p10_ms, r.ms_per_batch);
  EXPECT_GE(r.p90_ms, 3.9);                // the 4 ms calls are the tail
  EXPECT_GE(r.ms_per_batch, common_ms);    // each repetition's time holds its call's
  EXPECT_LT(r.ms_per_batch, r.p90_ms);     // the median is the common short call, not the tail
  EXPECT_GT(r.spread_pct(), 100.0 * (3.9 - r.ms_per_batch) / r.ms_per_batch);
  log_latency(sink, 5, 0, "dense", results, backend->device_name());
  ASSERT_EQ(sink.samples["latency/dense/b1_spread_pct"].size(), 1u);
  EXPECT_DOUBLE_EQ(sink.samples["latency/dense/b1_spread_pct"][0].second, r.spread_pct());
}

TEST_F(PipelineTest, LatencyUnderAnotherProcesssLoadIsMarkedContended) {
  // A child process spins on every core while the latency is timed.
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<pid_t> children;
  for (long i = 0; i < cores; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      volatile double x = 0;
      while (std::chrono::steady_clock::now() < until)
        x = x + 1;
      _exit(0);
    }
    children.push_back(pid);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  LatencyOptions lo;
  lo.batches = {1};
  lo.min_seconds = 0.5;
  const auto results = measure_latency(
      *backend, {1, 8, 8}, [](const Tensor&) { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }, lo);
  for (pid_t pid : children) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  ASSERT_EQ(results.size(), 1u);
  if (std::isnan(results[0].others_cpu_share))
    GTEST_SKIP() << "/proc/stat is not readable here";
  EXPECT_GT(results[0].others_cpu_share, kContendedShare);
  EXPECT_TRUE(results[0].contended());
}

TEST_F(PipelineTest, MfuIsNeverAboveOneWhenThePeakWasMeasuredLow) {
  ctx->peak_flops_per_s = 1.0;  // far below anything the run achieves (a peak taken on a busy machine)
  train_phase(*ctx, main_train_phase(*ctx), {});
  const auto& mfu = sink.samples["device/mfu"];
  ASSERT_FALSE(mfu.empty());
  for (const auto& [step, v] : mfu)
    EXPECT_LE(v, 1.0) << "step " << step;
  EXPECT_GT(ctx->peak_flops_per_s, 1.0);  // raised to the achieved rate
  EXPECT_NE(std::find(sink.events.begin(), sink.events.end(), "note"), sink.events.end());
}

}  // namespace
}  // namespace lathe
