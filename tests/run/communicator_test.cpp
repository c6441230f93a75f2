// The communicator seam and the checkpoint seams of train_phase: the local communicator changes
// nothing, a counting double sees each call once per step at the right point (broadcast at the
// phase start, the gradient reduction between the micro-batches and before_update, the evaluation
// sums, the barrier before a save), on_step_end reports the loop state of every step, and a phase
// stopped mid-epoch and started again at its (epoch, step in epoch) with the same optimizer ends
// with the weights of an uninterrupted phase, bit for bit. run_experiment attaches the run's
// communicator to its backend once, before any collective.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <stdexcept>

#include "engine/nn/zoo.h"
#include "engine/run/pipeline.h"
#include "engine/run/trainer.h"
#include "tests/data/data_test_util.h"
#include "tests/support/config_from.h"
#include "tests/support/quadrant_set.h"

namespace lathe {
namespace {

struct NullSink final : MetricsSink {
  int evaluations = 0;
  std::map<std::string, std::vector<double>> series;  // every sample's value, by metric
  void sample(const std::string& metric, int64_t, double, double value) override {
    evaluations += metric == "test/loss";
    series[metric].push_back(value);
  }
  void event(const std::string&, const nlohmann::json&) override {}
};

/// Records the order of its calls (and the hooks' calls the tests add to the same log).
struct CountingCommunicator final : Communicator {
  std::vector<std::string>* log = nullptr;
  int reduce = 0, broadcast = 0, sums = 0, barriers = 0;
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_gradients(const std::vector<NamedParam>& params) override {
    ++reduce;
    log->push_back("reduce");
  }
  void broadcast_parameters(const std::vector<NamedParam>&, int root) override {
    ++broadcast;
    log->push_back("broadcast" + std::to_string(root));
  }
  void all_reduce_sum(double*, int64_t n) override {
    ++sums;
    log->push_back("sum" + std::to_string(n));
  }
  void barrier() override {
    ++barriers;
    log->push_back("barrier");
  }
  void broadcast_bytes(std::string&, int root) override { log->push_back("bytes" + std::to_string(root)); }
  void attach(Backend& backend) override { log->push_back("attach " + backend.name()); }
};

ExperimentConfig tiny_config(int grad_accum) {
  nlohmann::json j = nlohmann::json::object();
  apply_override(j, "train.batch_size=8");
  apply_override(j, "train.epochs=2");
  apply_override(j, "train.optimizer.lr=0.1");
  apply_override(j, "train.grad_accum=" + std::to_string(grad_accum));
  return parse_experiment(validate_config(j));
}

class LoopSeams : public ::testing::Test {
 protected:
  void make_context(int grad_accum = 1) {
    cfg = tiny_config(grad_accum);
    backend = make_backend("reference");
    data.train = test::quadrant_set(64, 1);
    data.test = test::quadrant_set(32, 2);
    auto model =
        build_model_from_layers(nlohmann::json::parse(R"([{"type":"flatten"},{"type":"linear","out":4}])"), {1, 8, 8});
    Rng rng(3);
    model->create_params(*backend, DType::f32, rng);
    options.stop = &stop;
    ctx = std::make_unique<StageContext>(StageContext{cfg, options, *backend, data, std::move(model), sink});
    ctx->wall_ms = [] { return 0.0; };
  }
  std::vector<float> weights() const {
    std::vector<float> w;
    for (auto& p : ctx->model->named_params()) {
      const Tensor& t = p.param->value;
      w.insert(w.end(), t.data<float>(), t.data<float>() + t.numel());
    }
    return w;
  }
  /// One forward and backward pass of the model outside the training loop.
  void backward_outside_the_loop() {
    LayerContext lctx{*backend, true, 0};
    Tensor x = Tensor::zeros({2, 1, 8, 8}, DType::f32);
    const Tensor& y = ctx->model->forward(lctx, x);
    ctx->model->backward(lctx, Tensor::zeros(y.shape(), DType::f32));
  }

  ExperimentConfig cfg;
  RunOptions options;
  std::atomic<bool> stop{false};
  std::unique_ptr<Backend> backend;
  TrainTest data;
  NullSink sink;
  std::unique_ptr<StageContext> ctx;
};

TEST(LocalCommunicator, IsRankZeroOfOneAndChangesNothing) {
  LocalCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.world_size(), 1);
  double v[3] = {1.5, -2, 7};
  c.all_reduce_sum(v, 3);
  EXPECT_EQ(v[0], 1.5);
  EXPECT_EQ(v[1], -2);
  EXPECT_EQ(v[2], 7);
  auto be = make_backend("reference");
  auto model =
      build_model_from_layers(nlohmann::json::parse(R"([{"type":"flatten"},{"type":"linear","out":3}])"), {1, 2, 2});
  Rng rng(5);
  model->create_params(*be, DType::f32, rng);
  auto params = model->named_params();
  params[0].param->grad.set({1, 2}, 0.25);
  const double w = params[0].param->value.get({1, 2});
  c.all_reduce_gradients(params);
  c.broadcast_parameters(params, 0);
  c.barrier();
  EXPECT_EQ(params[0].param->grad.get({1, 2}), 0.25);
  EXPECT_EQ(params[0].param->value.get({1, 2}), w);
  // No overlap: the default hook is empty, so the loop installs none; no buckets.
  EXPECT_FALSE(c.grad_ready_hook(params));
  EXPECT_EQ(c.bucket_bytes(), 0);
}

/// Not a Gloo communicator, and it overlaps: its hook logs each parameter the backward pass
/// finishes ("ready <name>"), all_reduce_gradients logs "reduce". It also keeps each gradient as the
/// hook saw it, and counts the ones that differ from what all_reduce_gradients is given: a
/// reduction started from the hook must read the step's final gradient.
struct OverlappingCommunicator final : Communicator {
  std::vector<std::string>* log = nullptr;
  int hooks_made = 0;
  int gradients_changed_after_hook = 0;
  std::map<const Param*, std::string> names;
  std::map<const Param*, std::vector<double>> at_hook;
  static std::vector<double> values(const Tensor& t) {
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i)
      v[static_cast<size_t>(i)] = t.at_flat(i);
    return v;
  }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_gradients(const std::vector<NamedParam>& params) override {
    log->push_back("reduce");
    for (const NamedParam& p : params) {
      const auto it = at_hook.find(p.param);
      if (it != at_hook.end() && it->second != values(p.param->grad))
        ++gradients_changed_after_hook;
    }
    at_hook.clear();
  }
  std::function<void(const Param*)> grad_ready_hook(const std::vector<NamedParam>& params) override {
    ++hooks_made;
    for (const NamedParam& p : params)
      names[p.param] = p.name;
    return [this](const Param* p) {
      log->push_back("ready " + names.at(p));
      at_hook[p] = values(p->grad);
    };
  }
  void broadcast_parameters(const std::vector<NamedParam>&, int) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void barrier() override {}
  void broadcast_bytes(std::string&, int) override {}
};

TEST_F(LoopSeams, TheLoopCallsTheCommunicatorOncePerStepAtItsPoint) {
  make_context(/*grad_accum=*/2);  // 64 / 8 = 8 micro-batches an epoch: 4 optimizer steps
  std::vector<std::string> log;
  auto comm = std::make_shared<CountingCommunicator>();
  comm->log = &log;
  ctx->comm = comm;
  TrainHooks hooks;
  hooks.before_update = [&](Model&, int64_t) {
    log.push_back("before_update");
    return true;
  };
  const PhaseResult r = train_phase(*ctx, main_train_phase(*ctx), hooks);
  save_model_artifact(*ctx, "model.safetensors", "model");  // only rank 0 saves: no collective
  EXPECT_EQ(r.steps, 8);
  EXPECT_EQ(comm->broadcast, 1);
  EXPECT_EQ(comm->reduce, 8);
  EXPECT_EQ(comm->sums, 2);  // one evaluation per epoch
  EXPECT_EQ(sink.evaluations, 2);
  EXPECT_EQ(comm->barriers, 0);
  std::vector<std::string> want{"broadcast0"};
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int s = 0; s < 4; ++s) {
      want.push_back("reduce");
      want.push_back("before_update");
    }
    want.push_back("sum3");
  }
  EXPECT_EQ(log, want);
}

// The loop asks the Communicator for the overlap hook (whatever its type): installed for each
// step's last backward pass, so every gradient is reported before the step's reduction, and removed
// after it. With grad_accum = 2 the hook sees each gradient once the earlier micro-batch's sum has
// been added: what it sees is what the reduction gets.
TEST_F(LoopSeams, AnyCommunicatorsOverlapHookSeesEveryGradientBeforeTheReduction) {
  make_context(/*grad_accum=*/1);
  std::vector<std::string> log;
  auto comm = std::make_shared<OverlappingCommunicator>();
  comm->log = &log;
  ctx->comm = comm;
  const PhaseResult r = train_phase(*ctx, main_train_phase(*ctx), {});
  EXPECT_EQ(r.steps, 16);
  EXPECT_EQ(comm->hooks_made, 16);
  std::vector<std::string> want;
  for (int s = 0; s < 16; ++s)
    want.insert(want.end(), {"ready 1.weight", "ready 1.bias", "reduce"});
  EXPECT_EQ(log, want);
  EXPECT_EQ(comm->gradients_changed_after_hook, 0);
  // The hook is off the model after the step: a backward pass outside the loop reports nothing.
  log.clear();
  backward_outside_the_loop();
  EXPECT_TRUE(log.empty());

  make_context(/*grad_accum=*/2);
  auto accum = std::make_shared<OverlappingCommunicator>();
  accum->log = &log;
  ctx->comm = accum;
  const std::vector<float> before = weights();
  train_phase(*ctx, main_train_phase(*ctx), {});
  EXPECT_EQ(accum->hooks_made, 8);  // one per optimizer step, for its second micro-batch
  want.clear();
  for (int s = 0; s < 8; ++s)
    want.insert(want.end(), {"ready 1.weight", "ready 1.bias", "reduce"});
  EXPECT_EQ(log, want);
  EXPECT_EQ(accum->gradients_changed_after_hook, 0);
  // The same steps as a loop without any hook (whose gradients are summed after the backward pass).
  const std::vector<float> with_hook = weights();
  make_context(/*grad_accum=*/2);
  ctx->comm = std::make_shared<LocalCommunicator>();
  ASSERT_EQ(weights(), before);
  train_phase(*ctx, main_train_phase(*ctx), {});
  EXPECT_EQ(weights(), with_hook);
}

/// Rank 0 of two whose peer is its mirror image: every sum is twice this rank's value. Its
/// exposed_comm_seconds() is what a device-timed communicator would report.
struct MirroredPeerCommunicator final : Communicator {
  double exposed = -1;
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void all_reduce_gradients(const std::vector<NamedParam>&) override {}
  void broadcast_parameters(const std::vector<NamedParam>&, int) override {}
  void all_reduce_sum(double* values, int64_t n) override {
    for (int64_t i = 0; i < n; ++i)
      values[i] *= 2;
  }
  void barrier() override {}
  void broadcast_bytes(std::string&, int) override {}
  double exposed_comm_seconds() override { return exposed; }
};

// dist/comm_s is the communicator's device-side measurement where it has one (a GPU's collectives
// run on streams; the host's clock around all_reduce_gradients reads only the enqueueing), and the
// loop's own clock otherwise.
TEST_F(LoopSeams, DistCommSecondsIsTheCommunicatorsOwnMeasurementWhereItHasOne) {
  make_context();
  auto timed = std::make_shared<MirroredPeerCommunicator>();
  timed->exposed = 0.25;
  ctx->comm = timed;
  sink.series.clear();
  train_phase(*ctx, main_train_phase(*ctx), {});
  ASSERT_FALSE(sink.series["dist/comm_s"].empty());
  for (double v : sink.series["dist/comm_s"])
    EXPECT_DOUBLE_EQ(v, 0.25);
  make_context();
  ctx->comm = std::make_shared<MirroredPeerCommunicator>();  // -1: not measured on a device
  sink.series.clear();
  train_phase(*ctx, main_train_phase(*ctx), {});
  ASSERT_FALSE(sink.series["dist/comm_s"].empty());
  for (double v : sink.series["dist/comm_s"]) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 0.05);  // an empty all_reduce_gradients, timed by the loop
  }
}

/// Rank 0 of two whose peer spent its whole window (1 s) waiting in the gradient all-reduce, as a
/// rank does while rank 0 writes a checkpoint between steps. It knows log_dist's slots for two
/// ranks (10 values: comm seconds at 3w = 6, train seconds at 4w + 1 = 9); other sums mirror.
struct WaitingPeerCommunicator final : Communicator {
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void all_reduce_gradients(const std::vector<NamedParam>&) override {}
  void broadcast_parameters(const std::vector<NamedParam>&, int) override {}
  void all_reduce_sum(double* values, int64_t n) override {
    for (int64_t i = 0; i < n; ++i)
      values[i] *= 2;
    if (n == 10) {
      values[6] = values[6] / 2 + 1.0;
      values[9] = values[9] / 2 + 1.0;
    }
  }
  void barrier() override {}
  void broadcast_bytes(std::string&, int) override {}
};

// dist/comm_fraction is every rank's communication over every rank's step time: a peer's long wait
// is not divided by rank 0's short steps (a README screenshot's 2-rank spot run read 2.44).
TEST_F(LoopSeams, DistCommFractionIsAShareOfTheRanksOwnStepTime) {
  make_context();
  ctx->comm = std::make_shared<WaitingPeerCommunicator>();
  sink.series.clear();
  train_phase(*ctx, main_train_phase(*ctx), {});
  ASSERT_FALSE(sink.series["dist/comm_fraction"].empty());
  for (double v : sink.series["dist/comm_fraction"]) {
    EXPECT_LE(v, 1.0);
    EXPECT_GT(v, 0.4);  // the peer's 1 s of waiting in 1 s, beside rank 0's short window
  }
}

// device/mfu is per rank: the peak is one rank's (its threads or its GPU) and train/samples_per_s
// counts every rank's samples, so a 2-rank run's MFU is the global rate over two peaks (it read
// twice that, capped at 1 by raising the peak, before).
TEST_F(LoopSeams, DeviceMfuOfSeveralRanksIsTheGlobalRateOverEveryRanksPeak) {
  for (const int world : {1, 2}) {
    make_context();
    if (world == 2)
      ctx->comm = std::make_shared<MirroredPeerCommunicator>();
    ctx->peak_flops_per_s = 1e12;  // far above what the tiny model reaches: never raised
    sink.series.clear();
    train_phase(*ctx, main_train_phase(*ctx), {});
    const std::vector<double>& mfu = sink.series["device/mfu"];
    const std::vector<double>& sps = sink.series["train/samples_per_s"];
    ASSERT_FALSE(mfu.empty());
    ASSERT_EQ(mfu.size(), sps.size());
    const double train_flops = 3.0 * static_cast<double>(ctx->model->flops_per_sample());
    for (size_t i = 0; i < mfu.size(); ++i) {
      ASSERT_GT(sps[i], 0);
      EXPECT_NEAR(mfu[i], sps[i] * train_flops / world / 1e12, 1e-12 * mfu[i] + 1e-300) << "world " << world;
    }
  }
}

// A backward pass that fails does not leave the hook (which refers to the communicator's step) on
// the model.
TEST_F(LoopSeams, AFailingBackwardPassTakesTheOverlapHookOffTheModel) {
  make_context(/*grad_accum=*/1);
  std::vector<std::string> log;
  auto comm = std::make_shared<OverlappingCommunicator>();
  comm->log = &log;
  ctx->comm = comm;
  TrainHooks hooks;
  hooks.forward_backward = [](Model& model, LayerContext& lctx, const DeviceBatch& batch, double,
                              Tensor&) -> LossResult {
    const Tensor& y = model.forward(lctx, batch.images);
    model.backward(lctx, Tensor::zeros(y.shape(), DType::f32));
    throw std::runtime_error("backward failed");
  };
  EXPECT_THROW(train_phase(*ctx, main_train_phase(*ctx), hooks), std::runtime_error);
  EXPECT_EQ(log, (std::vector<std::string>{"ready 1.weight", "ready 1.bias"}));
  log.clear();
  backward_outside_the_loop();
  EXPECT_TRUE(log.empty());
}

TEST_F(LoopSeams, OnStepEndReportsTheLoopStateOfEveryStep) {
  make_context();
  std::vector<std::tuple<std::string, int, int64_t, int64_t, int64_t>> seen;
  TrainHooks hooks;
  const Optimizer* optimizer = nullptr;
  hooks.on_step_end = [&](const TrainLoopState& s) {
    seen.emplace_back(s.phase, s.epoch, s.step_in_epoch, s.global_step, s.phase_step);
    EXPECT_EQ(s.steps_per_epoch, 8);
    EXPECT_EQ(s.schedule.total_steps, 16);
    if (optimizer)
      EXPECT_EQ(&s.optimizer, optimizer);  // one optimizer for the phase
    optimizer = &s.optimizer;
  };
  ctx->step = 100;  // a later phase: the global step runs on
  train_phase(*ctx, main_train_phase(*ctx), hooks);
  ASSERT_EQ(seen.size(), 16u);
  EXPECT_EQ(seen[0], std::make_tuple(std::string("train"), 0, int64_t{1}, int64_t{101}, int64_t{1}));
  EXPECT_EQ(seen[7], std::make_tuple(std::string("train"), 0, int64_t{8}, int64_t{108}, int64_t{8}));
  EXPECT_EQ(seen[8], std::make_tuple(std::string("train"), 1, int64_t{1}, int64_t{109}, int64_t{9}));
  EXPECT_EQ(seen[15], std::make_tuple(std::string("train"), 1, int64_t{8}, int64_t{116}, int64_t{16}));
}

TEST_F(LoopSeams, APhaseStartedMidEpochContinuesBitForBit) {
  make_context();
  train_phase(*ctx, main_train_phase(*ctx), {});
  const std::vector<float> uninterrupted = weights();
  ASSERT_EQ(ctx->step, 16);

  // The same phase stopped after global step 11 (epoch 1, 3 steps into it) ...
  make_context();
  TrainPhase phase = main_train_phase(*ctx);
  phase.start.optimizer = make_optimizer(phase.optimizer);
  int stopped_epoch = -1;
  int64_t stopped_in_epoch = -1;
  TrainHooks hooks;
  hooks.on_step_end = [&](const TrainLoopState& s) {
    // The loop decides on a stop before a step's end hooks run (so that the checkpoint hook sees
    // the same decision): a stop requested in step 10's hooks ends the loop after step 11.
    if (s.global_step == 10)
      stop = true;
    if (s.global_step == 11) {
      stopped_epoch = s.epoch;
      stopped_in_epoch = s.step_in_epoch;
    }
  };
  const PhaseResult first = train_phase(*ctx, phase, hooks);
  EXPECT_TRUE(first.stopped);
  ASSERT_EQ(ctx->step, 11);
  EXPECT_EQ(stopped_epoch, 1);
  EXPECT_EQ(stopped_in_epoch, 3);
  EXPECT_NE(weights(), uninterrupted);

  // ... then started again there with the same optimizer (its momentum) and global step.
  stop = false;
  ctx->stop_agreed = false;  // the decision of the stopped process (a resumed run is a new one)
  phase.start.epoch = stopped_epoch;
  phase.start.step_in_epoch = stopped_in_epoch;
  std::vector<int64_t> steps;
  TrainHooks resumed;
  resumed.on_step_end = [&](const TrainLoopState& s) { steps.push_back(s.global_step); };
  const PhaseResult second = train_phase(*ctx, phase, resumed);
  EXPECT_EQ(second.steps, 5);
  EXPECT_EQ(steps, (std::vector<int64_t>{12, 13, 14, 15, 16}));
  EXPECT_EQ(ctx->step, 16);
  EXPECT_EQ(weights(), uninterrupted);
}

TEST(RunExperiment, AttachesTheCommunicatorToItsBackendOnceBeforeAnyCollective) {
  test::TempDir dir;
  for (const char* split : {"train", "test"}) {
    std::vector<uint8_t> pixels(16 * 16), labels(16);
    for (size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = static_cast<uint8_t>(i * 37);
    for (size_t i = 0; i < labels.size(); ++i)
      labels[i] = static_cast<uint8_t>(i % 2);
    test::write_bytes(dir.file(std::string(split) + "-images"), test::idx_bytes({16, 4, 4}, pixels));
    test::write_bytes(dir.file(std::string(split) + "-labels"), test::idx_bytes({16}, labels));
  }
  const ExperimentConfig cfg =
      test::config_from({"data.dataset=idx", "data.train_images=" + dir.file("train-images"),
                         "data.train_labels=" + dir.file("train-labels"), "data.test_images=" + dir.file("test-images"),
                         "data.test_labels=" + dir.file("test-labels"), "model.zoo=custom",
                         R"(model.layers=[{"type":"flatten"},{"type":"linear","out":2}])", "train.epochs=1",
                         "train.batch_size=4", "compute.backend=reference", "checkpoint.every_min=0"});
  std::vector<std::string> log;
  auto comm = std::make_shared<CountingCommunicator>();
  comm->log = &log;
  RunOptions options;
  options.write_run_dir = false;
  options.comm = comm;
  run_experiment(cfg, options);
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.front(), "attach reference");
  EXPECT_EQ(std::count(log.begin(), log.end(), "attach reference"), 1);
  EXPECT_EQ(comm->broadcast, 1);  // the training phase's start, after the attach
  EXPECT_EQ(comm->reduce, 4);     // 16 / 4 steps
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

/// Rank 0 of 2 whose peer's value is `peer` in every sum (the peer's side of all_reduce_sum).
struct PeerOfTwo final : Communicator {
  double peer = 0;
  int sums = 0;
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void all_reduce_gradients(const std::vector<NamedParam>&) override {}
  void broadcast_parameters(const std::vector<NamedParam>&, int) override {}
  void all_reduce_sum(double* v, int64_t n) override {
    ++sums;
    for (int64_t i = 0; i < n; ++i)
      v[i] += peer;
  }
  void barrier() override {}
  void broadcast_bytes(std::string&, int) override {}
};

// A stop seen by one rank between stages stops every rank there: the decision is summed.
TEST_F(LoopSeams, AStopBetweenStagesIsAgreedByEveryRank) {
  make_context();
  auto comm = std::make_shared<PeerOfTwo>();
  ctx->comm = comm;
  EXPECT_FALSE(ctx->stop_agreed_by_all());  // nobody asked
  EXPECT_FALSE(ctx->stop_agreed);
  comm->peer = 1;  // the other rank got SIGTERM
  EXPECT_FALSE(ctx->stop_requested());
  EXPECT_TRUE(ctx->stop_agreed_by_all());
  EXPECT_TRUE(ctx->stop_agreed);
  EXPECT_TRUE(ctx->stop_requested());  // the remaining stages' own checks see it too
  EXPECT_EQ(comm->sums, 2);
  ctx->comm = std::make_shared<LocalCommunicator>();  // one rank: no collective, its own flag
  ctx->stop_agreed = false;
  stop = true;
  EXPECT_TRUE(ctx->stop_agreed_by_all());
}

}  // namespace
}  // namespace lathe
