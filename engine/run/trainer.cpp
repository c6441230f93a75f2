// run_experiment: set-up (backend, data, model, prices, peak FLOP/s), then the pipeline's stages in
// order on one StageContext (pipeline.h): training, the saved model, and the compression stages.
#include "engine/run/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "engine/backend/backend.h"
#include "engine/core/timing.h"
#include "engine/data/dataset.h"
#include "engine/data/loader.h"
#include "engine/nn/model_io.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/zoo.h"
#include "engine/run/cost_model.h"
#include "engine/run/phase_plan.h"
#include "engine/run/pipeline.h"
#include "engine/run/run_dir.h"
#include "engine/run/stage_distill.h"
#include "engine/run/stage_precision.h"
#include "engine/run/stage_prune.h"
#include "engine/run/stage_prune_structured.h"
#include "engine/run/stage_quantize.h"
#include "engine/run/telemetry.h"
#include "engine/run/train_checkpoint.h"

namespace lathe {

namespace {

TrainTest load_data(const DataConfig& d) {
  TrainTest tt;
  if (d.dataset == DatasetKind::fashion_mnist) {
    tt = load_fashion_mnist(d.path);
  } else {
    tt.train = load_idx_pair(d.train_images, d.train_labels);
    tt.test = load_idx_pair(d.test_images, d.test_labels, tt.train.num_classes);
  }
  require_samples(tt.train, "training set");
  require_samples(tt.test, "test set");
  if (d.train_subset > 0 && d.train_subset < tt.train.count)
    tt.train = subset(tt.train, d.train_subset);
  if (d.test_subset > 0 && d.test_subset < tt.test.count)
    tt.test = subset(tt.test, d.test_subset);
  return tt;
}

std::unique_ptr<Model> build_model(const ModelConfig& m, const Dataset& data) {
  if (m.zoo == ModelZoo::custom) {
    auto model = build_model_from_layers(m.layers, {1, data.rows, data.cols});
    check_model_outputs(*model, data.num_classes);
    return model;
  }
  auto model = build_zoo_model(std::string(enum_name(m.zoo)));
  if (data.rows * data.cols != 784 || data.num_classes > 10)
    throw ConfigError("model.zoo: '" + std::string(enum_name(m.zoo)) +
                      "' is built for 28x28 images and 10 classes; this dataset has " + std::to_string(data.rows) +
                      "x" + std::to_string(data.cols) + " images and " + std::to_string(data.num_classes) +
                      " classes (use model.zoo = \"custom\" with model.layers)");
  return model;
}

/// Records the last value of each metric and forwards to the real sink.
class SummarySink final : public MetricsSink {
 public:
  explicit SummarySink(MetricsSink& next) : m_next(next) {}
  void sample(const std::string& metric, int64_t step, double wall_ms, double value) override {
    last[metric] = value;
    m_next.sample(metric, step, wall_ms, value);
  }
  void event(const std::string& kind, const nlohmann::json& fields) override { m_next.event(kind, fields); }
  void flush() override { m_next.flush(); }
  std::map<std::string, double> last;

 private:
  MetricsSink& m_next;
};

}  // namespace

RunSummary run_experiment(const ExperimentConfig& cfg, const RunOptions& options) {
  const auto t_start = Clock::now();
  const TrainConfig& tc = cfg.train;
  if (tc.threads > 0)
    omp_set_num_threads(tc.threads);
  const int threads = omp_get_max_threads();

  // ---- set-up: everything that can fail on bad input happens before the run folder exists ----
  std::unique_ptr<Backend> backend = make_backend(std::string(enum_name(cfg.compute.backend)));
  Backend& be = *backend;
  TrainTest data = load_data(cfg.data);
  std::unique_ptr<Model> model = build_model(cfg.model, data.train);
  Rng init_rng(cfg.seed);
  model->create_params(be, DType::f32, init_rng);
  if (!cfg.model.init_from.empty())
    load_model_weights(*model, be, cfg.model.init_from);
  const PriceCatalog catalog = PriceCatalog::load(PriceCatalog::default_path());
  const InstancePrice& instance = catalog.find(cfg.cost.instance);
  const bool spot = cfg.cost.pricing == Pricing::spot;

  PeakFlops peak;
  if (be.device().is_cpu()) {
    peak = cpu_peak_flops(threads);
  } else {
    peak.flops_per_s = instance.peak_flops("fp32");
    peak.how = peak.flops_per_s > 0 ? "datasheet (" + instance.peak_flops_source + ") for " + instance.name
                                    : "unknown: cost.instance has no datasheet peak; device/mfu not reported";
  }

  // STAGE-PREPARE: stages check their inputs here (teacher files, ...), before anything is written.
  prepare_prune_stage(cfg, *model, be);
  prepare_structured_prune_stage(cfg, *model, be);
  prepare_quantize_stage(cfg, *model, be);
  std::unique_ptr<DistillStage> distill = prepare_distill_stage(cfg, be, data, *model, options);

  RunSummary summary;
  summary.run_id = options.run_id.empty() ? make_run_id() : options.run_id;
  summary.backend = be.name();
  summary.device = be.device_name();

  const bool resuming = !options.resume_run_dir.empty();
  if (resuming) {
    LATHE_CHECK(!options.run_id.empty(), "run_experiment: resuming needs the run id");
    if (!std::filesystem::is_directory(options.resume_run_dir))
      throw DataError("resuming run " + summary.run_id + ": its folder " + options.resume_run_dir + " is gone");
    summary.run_dir = options.resume_run_dir;
  } else if (options.write_run_dir) {
    // The folder first: a bad output.dir is bad input and must leave no run in the store either.
    summary.run_dir = create_run_dir(cfg.output.dir, summary.run_id);
  }
  if (options.on_start) {
    try {
      options.on_start(summary.run_id, summary.backend, summary.device);
    } catch (...) {
      if (!summary.run_dir.empty() && !resuming) {
        std::error_code ec;
        std::filesystem::remove(summary.run_dir, ec);  // still empty
      }
      throw;
    }
  }
  std::unique_ptr<JsonlSink> file_sink;
  FanoutSink fanout;
  if (options.write_run_dir || resuming) {
    if (!resuming)
      write_file_atomic(summary.run_dir + "/config.json", cfg.raw.dump(2) + "\n");
    file_sink = std::make_unique<JsonlSink>(summary.run_dir + "/metrics.jsonl");
    // A full disk under metrics.jsonl: the run goes on (the store has every sample), and the store
    // learns that the file is no longer a complete recovery source.
    if (MetricsSink* store_sink = options.extra_sink)
      file_sink->on_failure([store_sink](const std::string& message) {
        store_sink->event("metrics_file_failed", {{"error", message}});
      });
    fanout.add(file_sink.get());
  }
  if (options.extra_sink)
    fanout.add(options.extra_sink);
  SummarySink sink(fanout);

  StageContext ctx{
      .cfg = cfg,
      .options = options,
      .be = be,
      .data = data,
      .model = std::move(model),
      .sink = sink,
      .run_id = summary.run_id,
      .run_dir = summary.run_dir,
      .threads = threads,
      .peak_flops_per_s = peak.flops_per_s,
      .instance = &instance,
      .spot = spot,
      .wall_ms = [t_start, offset = options.resume_wall_ms]() { return offset + seconds_since(t_start) * 1000.0; },
      .progress = {}};
  TrainPhase phase = main_train_phase(ctx);
  ctx.total_steps = ctx.steps_per_epoch(phase.loader) * phase.epochs;
  // Every phase's planned steps (phase_plan.h): progress and ETA count the whole pipeline.
  const std::vector<PlannedPhase> plan = plan_phases(cfg, ctx.steps_per_epoch(phase.loader));

  nlohmann::json metrics_file = nullptr;  // the store's recovery source (lathe-cli repair)
  if (file_sink)
    metrics_file = std::filesystem::absolute(file_sink->path()).string();
  if (!resuming)
    sink.event("started", {{"run_id", summary.run_id},
                           {"metrics_file", metrics_file},
                           {"name", cfg.name},
                           {"run_dir", summary.run_dir},
                           {"backend", be.name()},
                           {"device", be.device_name()},
                           {"threads", threads},
                           {"model", ctx.model->summary()},
                           {"train_samples", data.train.count},
                           {"test_samples", data.test.count},
                           {"dataset", data.train.source},
                           {"peak_flops_per_s", peak.flops_per_s},
                           {"peak_flops_how", peak.how},
                           {"instance", instance.name},
                           {"price_usd_per_hour", instance.usd_per_hour(spot)},
                           {"price_source", spot ? instance.spot_source : instance.source},
                           {"price_date", instance.price_date},
                           {"total_steps", planned_steps(plan)},
                           {"train_steps", ctx.total_steps},
                           {"plan", plan_json(plan)}});
  sink.sample("model/params", 0, ctx.wall_ms(), static_cast<double>(ctx.model->param_count()));
  sink.sample("model/flops_per_sample", 0, ctx.wall_ms(), static_cast<double>(ctx.model->flops_per_sample()));

  // ---- stage 1: training (distillation replaces its loss through hooks) ----
  TrainHooks train_hooks;
  // DISTILL-STAGE: set train_hooks / phase here (engine/run/stage_distill.h).
  if (distill)
    attach_distill_stage(*distill, ctx, phase, train_hooks);
  // PRECISION: combine the mixed-precision hooks here (train.precision).
  const std::unique_ptr<PrecisionStage> precision = attach_precision_stage(ctx, train_hooks);
  // CHECKPOINTS: the main training phase is checkpointed and resumed (train_checkpoint.h).
  LossScaler* scaler = precision ? precision->scaler.get() : nullptr;
  const std::string ckpt_dir = checkpoint_dir(cfg, summary.run_id, summary.run_dir);
  std::optional<RestoredTraining> restored;
  if (resuming) {
    restored = ckpt_dir.empty() ? std::nullopt : restore_training_state(ctx, ckpt_dir, scaler);
    nlohmann::json skipped = nlohmann::json::array();
    if (restored) {
      phase.resume = &restored->resume;
      for (const std::string& m : restored->skipped)
        skipped.push_back(m);
    }
    sink.event("resumed",
               {{"run_id", summary.run_id},
                {"from_step", restored ? restored->info.step : 0},
                {"checkpoint", restored ? nlohmann::json(restored->info.path) : nlohmann::json(nullptr)},
                {"skipped", skipped},
                {"text", restored ? "resumed from the checkpoint of step " + std::to_string(restored->info.step)
                                  : "no valid checkpoint in " + ckpt_dir + ": training restarts at step 0"}});
    sink.flush();  // the resume is on record even if this process is killed at once
  }
  CheckpointScheduler checkpoints(ctx, ckpt_dir, options.stop_reason, scaler);
  train_hooks.on_step_end = [&checkpoints, previous = train_hooks.on_step_end](const LoopState& st, Optimizer& o) {
    if (previous)
      previous(st, o);
    checkpoints.on_step_end(st, o);
  };
  const PhaseResult trained = train_phase(ctx, phase, train_hooks);
  bool stopped = trained.stopped;
  double train_seconds = trained.train_seconds;

  // ---- the trained model on disk: model/bytes is the size of the file really written ----
  if (options.write_run_dir && tc.save_model) {
    const int64_t bytes = save_model_artifact(ctx, "model.safetensors", "model");
    sink.sample("model/bytes", ctx.step, ctx.wall_ms(), static_cast<double>(bytes));
  } else {
    sink.sample("model/bytes", ctx.step, ctx.wall_ms(), static_cast<double>(ctx.model->param_bytes()));
    sink.event("note", {{"text", "model/bytes is the f32 parameter size in memory: no model file was written"}});
  }

  // ---- later stages, in pipeline order; each returns early once a stop is requested ----
  if (!stopped) {
    // PRUNE-STAGE: prune + fine-tune (engine/run/stage_prune.h).
    run_prune_stage(ctx);
    // QUANTIZE-STAGE: INT8 (engine/run/stage_quantize.h).
    if (!ctx.stop_requested())
      run_quantize_stage(ctx);
    stopped = ctx.stop_requested();
  }
  sink.sample("cost/usd", ctx.step, ctx.wall_ms(), ctx.cost_usd_now());

  const bool noticed =
      options.stop_reason && static_cast<StopReason>(options.stop_reason->load()) == StopReason::spot_notice;
  summary.status = !stopped ? "finished" : noticed ? "interrupted" : "cancelled";
  summary.steps = ctx.step;
  summary.elapsed_s = seconds_since(t_start);
  summary.final_metrics = sink.last;
  summary.final_metrics["train/seconds"] = train_seconds;
  sink.event(summary.status, {{"run_id", summary.run_id},
                              {"steps", ctx.step},
                              {"elapsed_s", summary.elapsed_s},
                              {"metrics", summary.final_metrics}});
  sink.flush();
  return summary;
}

}  // namespace lathe
