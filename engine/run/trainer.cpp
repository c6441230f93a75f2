// run_experiment: set-up (backend, data, model, prices, peak FLOP/s, each stage's prepare), the run
// folder and sinks, then on one StageContext (pipeline.h): the stages attached to the main training,
// the training, the saved model, the checkpoint of the finished training (when stages follow it),
// and each stage's run, in the registry's order (stage_registry.h).
#include "engine/run/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "engine/backend/backend.h"
#include "engine/core/timing.h"
#include "engine/data/dataset.h"
#include "engine/data/loader.h"
#include "engine/io/onnx/onnx_export.h"
#include "engine/io/onnx/onnx_import.h"
#include "engine/run/model_graph.h"
#include "engine/nn/model_io.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/zoo.h"
#include "engine/run/cost_model.h"
#include "engine/run/data_setup.h"
#include "engine/run/device_peaks.h"
#include "engine/run/phase_plan.h"
#include "engine/run/pipeline.h"
#include "engine/run/run_dir.h"
#include "engine/run/stage_precision.h"
#include "engine/run/stage_registry.h"
#include "engine/run/telemetry.h"
#include "engine/run/train_checkpoint.h"

namespace lathe {

namespace {

std::unique_ptr<Model> build_model(const ModelConfig& m, const Dataset& data, int zoo_classes,
                                   std::optional<OnnxImport>& onnx) {
  if (m.zoo == ModelZoo::onnx) {
    onnx = import_onnx_for_data(m.onnx, data.sample_shape(), data.num_classes, "model.onnx");
    return std::move(onnx->model);
  }
  if (m.zoo == ModelZoo::custom) {
    auto model = build_model_from_layers(m.layers, data.sample_shape());
    check_model_outputs(*model, data.num_classes);
    return model;
  }
  // The zoo models take the data's shape and classes (zoo_class_count).
  return build_zoo_model(std::string(enum_name(m.zoo)), data.sample_shape(), zoo_classes);
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

/// Everything set up before the run folder exists: what can fail on user input fails here.
struct RunSetup {
  int threads = 1;
  std::unique_ptr<Backend> backend;
  TrainTest data;
  std::unique_ptr<Model> model;
  std::optional<PriceCatalog> catalog;
  const InstancePrice* instance = nullptr;
  bool spot = false;
  std::string cost_projection;  ///< why cost/usd is a projection (cost_projection_reason); "" : measured
  PeakFlops peak;
  std::optional<OnnxImport> onnx;              ///< model.zoo = onnx: the file's provenance and weights
  std::string peak_dtype = "f32";  // the data type the peak (and so device/mfu) is for: f32, tf32, bf16, f16
  std::vector<std::unique_ptr<Stage>> stages;  ///< the enabled stages, in pipeline order, prepared
};

void set_up(const ExperimentConfig& cfg, const RunOptions& options, RunSetup& s) {
  if (cfg.train.threads > 0)
    omp_set_num_threads(cfg.train.threads);
  s.threads = omp_get_max_threads();
  s.backend = make_backend(std::string(enum_name(cfg.compute.backend)), options.device_index);
  Backend& be = *s.backend;
  s.data = load_run_data(cfg.data);
  s.model = build_model(cfg.model, s.data.train, zoo_class_count(cfg.data, s.data.train), s.onnx);
  Rng init_rng(cfg.seed);
  s.model->create_params(be, DType::f32, init_rng);
  if (s.onnx)
    load_onnx_weights(*s.model, be, *s.onnx);
  if (!cfg.model.init_from.empty())
    load_model_weights(*s.model, be, cfg.model.init_from);
  s.catalog.emplace(PriceCatalog::load(PriceCatalog::default_path()));
  s.instance = &s.catalog->find(cfg.cost.instance);
  s.spot = cfg.cost.pricing == Pricing::spot;
  s.cost_projection = cost_projection_reason(*s.instance, be.device_name(), !be.device().is_cpu());

  if (be.device().is_cpu()) {
    // MFU is against the peak of the data type the matmuls run at: bf16 where the CPU computes bf16
    // natively (a bf16 run against the f32 peak would read above 1), else f32.
    const DType peak_type = matmul_dtype(be, compute_dtype(cfg.train.precision));
    s.peak_dtype = std::string(dtype_name(peak_type));
    s.peak = cpu_peak_flops(s.threads, peak_type);
    // The run store's records are f32 runs' peaks.
    const double floor = options.recorded_peak_flops && peak_type == DType::f32
                             ? options.recorded_peak_flops(be.device_name(), s.threads)
                             : 0;
    if (floor > s.peak.flops_per_s)
      s.peak = {floor, s.peak.how + "; using the best recorded in the run store for this CPU and thread count"};
  } else {
    // The device's own datasheet peak (resources/device_peaks.json, by its CUDA name) for the type
    // its matmuls run at: bf16/f16 tensor cores where the backend has native kernels, else f32
    // (emulation rounds values but computes in f32). TF32 stays off in training (CudaContext's
    // default, for parity with the reference), so f32 runs are against the plain fp32 peak. Only a
    // device the table does not know falls back to cost.instance's catalog peak.
    const PeakChoice choice = choose_gpu_peak(DevicePeakTable::load(DevicePeakTable::default_path()),
                                              be.device_name(), matmul_dtype(be, compute_dtype(cfg.train.precision)),
                                              /*tf32=*/false, *s.instance, be.multiprocessors());
    s.peak = choice.peak;
    s.peak_dtype = choice.dtype;
  }

  // Each enabled stage checks its inputs (teacher files, N:M groups, backends) before anything is written.
  for (std::unique_ptr<Stage>& stage : make_stages())
    if (stage->enabled(cfg))
      s.stages.push_back(std::move(stage));
  const StageSetup setup{cfg, be, s.data, *s.model, options};
  for (const std::unique_ptr<Stage>& stage : s.stages)
    stage->prepare(setup);
  // Last, once this rank's inputs are known good: the ranks bind to their devices (NCCL joins here).
  if (options.comm)
    options.comm->attach(be);
}

/// The run folder (config.json, metrics.jsonl) and the sinks every sample goes through.
struct RunOutputs {
  std::unique_ptr<JsonlSink> file_sink;
  FanoutSink fanout;
  std::unique_ptr<SummarySink> sink;
};

void open_outputs(const ExperimentConfig& cfg, const RunOptions& options, RunSummary& summary, RunOutputs& out) {
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
  if (options.write_run_dir || resuming) {
    if (!resuming)  // a resumed run appends to its metrics.jsonl and keeps its config.json
      write_file_atomic(summary.run_dir + "/config.json", cfg.raw.dump(2) + "\n");
    out.file_sink = std::make_unique<JsonlSink>(summary.run_dir + "/metrics.jsonl");
    // A full disk under metrics.jsonl: the run goes on (the store has every sample), and the store
    // learns that the file is no longer a complete recovery source.
    if (MetricsSink* store_sink = options.extra_sink)
      out.file_sink->on_failure([store_sink](const std::string& message) {
        store_sink->event("metrics_file_failed", {{"error", message}});
      });
    out.fanout.add(out.file_sink.get());
  }
  if (options.extra_sink)
    out.fanout.add(options.extra_sink);
  out.sink = std::make_unique<SummarySink>(out.fanout);
}

/// How this process's OpenMP threads wait at barriers (lathe-cli sets passive, app/cli_openmp.h):
/// part of what a measured throughput was measured under.
std::string openmp_wait_policy() {
  if (const char* policy = std::getenv("OMP_WAIT_POLICY"))
    return policy;
  if (const char* spins = std::getenv("GOMP_SPINCOUNT"))
    return std::string("default, GOMP_SPINCOUNT=") + spins;
  return "default";
}

/// The "started" event (the phase plan, the data, the prices) and the model's size.
void log_started(StageContext& ctx, const RunSetup& s, const RunOutputs& out, const std::vector<PlannedPhase>& plan) {
  nlohmann::json metrics_file = nullptr;  // the store's recovery source (lathe-cli repair)
  if (out.file_sink)
    metrics_file = std::filesystem::absolute(out.file_sink->path()).string();
  const Backend& be = ctx.be;
  ctx.sink.event("started", {{"run_id", ctx.run_id},
                             {"metrics_file", metrics_file},
                             {"name", ctx.cfg.name},
                             {"run_dir", ctx.run_dir},
                             {"backend", be.name()},
                             {"device", be.device_name()},
                             {"threads", s.threads},  // per rank
                             {"world_size", ctx.comm->world_size()},
                             {"omp_wait_policy", openmp_wait_policy()},
                             {"model", ctx.model->summary()},
                             {"train_samples", ctx.data.train.count},
                             {"test_samples", ctx.data.test.count},
                             {"dataset", ctx.data.train.source},
                             {"data", data_record(ctx.cfg.data, ctx.data)},
                             {"peak_flops_per_s", s.peak.flops_per_s},
                             {"peak_flops_how", s.peak.how},
                             {"peak_flops_dtype", s.peak_dtype},
                             {"instance", s.instance->name},
                             {"price_usd_per_hour", s.instance->usd_per_hour(s.spot)},
                             {"price_source", s.spot ? s.instance->spot_source : s.instance->source},
                             {"price_date", s.instance->price_date},
                             {"cost_projection", s.cost_projection},  // "" : measured
                             {"total_steps", planned_steps(plan)},
                             {"train_steps", ctx.total_steps},
                             {"plan", plan_json(plan)}});
  if (s.onnx)  // where the model came from: the file and the digest of the bytes that were read
    ctx.sink.event("model_source", {{"format", "onnx"},
                                    {"file", std::filesystem::absolute(s.onnx->path).string()},
                                    {"sha256", s.onnx->sha256},
                                    {"opset", s.onnx->opset},
                                    {"notes", s.onnx->notes}});
  ctx.sink.sample("model/params", 0, ctx.wall_ms(), static_cast<double>(ctx.model->param_count()));
  ctx.sink.sample("model/flops_per_sample", 0, ctx.wall_ms(), static_cast<double>(ctx.model->flops_per_sample()));
}

/// The trained model on disk: model/bytes is the size of the file really written.
void save_trained_model(StageContext& ctx) {
  if (ctx.options.write_run_dir && ctx.cfg.train.save_model) {
    const int64_t bytes = save_model_artifact(ctx, "model.safetensors", "model");
    ctx.sink.sample("model/bytes", ctx.step, ctx.wall_ms(), static_cast<double>(bytes));
  } else {
    ctx.sink.sample("model/bytes", ctx.step, ctx.wall_ms(), static_cast<double>(ctx.model->param_bytes()));
    ctx.sink.event("note", {{"text", "model/bytes is the f32 parameter size in memory: no model file was written"}});
  }
}

/// output.onnx: the model as it stands after every stage (pruned models dense with their zeros, or
/// smaller when pruned structurally), f32, as model.onnx.
void save_onnx_artifact(StageContext& ctx) {
  const std::string path = ctx.run_dir + "/model.onnx";
  const int64_t bytes = export_onnx(*ctx.model, ctx.be, path, {.metadata = {{"lathe_run", ctx.run_id}}});
  ctx.sink.event("artifact", {{"kind", "onnx"}, {"path", path}, {"bytes", bytes}, {"precision", "f32"}});
}

}  // namespace

RunSummary run_experiment(const ExperimentConfig& cfg, const RunOptions& options) {
  const auto t_start = Clock::now();
  RunSetup setup;
  set_up(cfg, options, setup);
  Backend& be = *setup.backend;

  RunSummary summary;
  summary.run_id = options.run_id.empty() ? make_run_id() : options.run_id;
  summary.backend = be.name();
  summary.device = be.device_name();
  summary.cost_projection = setup.cost_projection;
  RunOutputs outputs;
  open_outputs(cfg, options, summary, outputs);
  SummarySink& sink = *outputs.sink;

  StageContext ctx{
      .cfg = cfg,
      .options = options,
      .be = be,
      .data = setup.data,
      .model = std::move(setup.model),
      .sink = sink,
      .run_id = summary.run_id,
      .run_dir = summary.run_dir,
      .threads = setup.threads,
      .peak_flops_per_s = setup.peak.flops_per_s,
      .instance = setup.instance,
      .spot = setup.spot,
      .wall_ms = [t_start, offset = options.resume_wall_ms]() { return offset + seconds_since(t_start) * 1000.0; },
      .progress = {},
      .comm = options.comm ? options.comm : std::make_shared<LocalCommunicator>()};
  TrainPhase phase = main_train_phase(ctx);
  ctx.total_steps = ctx.steps_per_epoch(phase.loader) * phase.epochs;
  // Every phase's planned steps (phase_plan.h): progress and ETA count the whole pipeline.
  const bool resuming = !options.resume_run_dir.empty();
  if (!resuming)
    log_started(ctx, setup, outputs, plan_phases(cfg, ctx.steps_per_epoch(phase.loader), ctx.data.test.count));

  // ---- checkpoints of the main training; a resumed run starts from the newest valid one ----
  // Data parallel: rank 0 writes them (every rank holds the same weights; a sharded optimizer's
  // state is gathered to it), and every rank resumes from the same one, read before the stages
  // attach (a zoo teacher's trained weights come from it).
  const std::string ckpt_dir = ctx.comm->rank() == 0 ? checkpoint_dir(cfg, summary.run_id, summary.run_dir) : "";
  const std::string resume_dir = resuming ? ckpt_dir : options.resume_checkpoint_dir;
  std::optional<ResumeCheckpoint> resume_from;
  if (resuming || !resume_dir.empty()) {
    resume_from = read_resume_checkpoint(ctx, resume_dir);
    resume_stages_before_attach(*resume_from, setup.stages);
  }

  // ---- the main training, with the hooks of the stages that attach to it ----
  TrainHooks train_hooks;
  for (const std::unique_ptr<Stage>& stage : setup.stages)
    stage->attach(ctx, phase, train_hooks);
  // A stop cut short a phase a stage ran before the main training (a zoo teacher's training): the
  // run ends now, with no checkpoint of a student trained by a half-trained teacher.
  const bool stopped_attaching = std::any_of(setup.stages.begin(), setup.stages.end(),
                                             [](const std::unique_ptr<Stage>& s) { return s->stopped_in_attach(); });
  // A checkpoint of the finished training or of a stage's fine-tuning: the main training (and the
  // stages before that stage) are done.
  ResumedAt resumed_at;
  if (resume_from) {
    resumed_at = resume_training(ctx, *resume_from, phase, setup.stages);
    summary.resumed_from_step = ctx.step;
    resume_from.reset();  // its tensors are loaded: not held for the rest of the run
  }
  CheckpointScheduler checkpoints(ctx, ckpt_dir, options.stop_reason, setup.stages);
  train_hooks.on_step_end = [&checkpoints, previous = train_hooks.on_step_end](const TrainLoopState& st) {
    if (previous)
      previous(st);
    checkpoints.on_step_end(st);
  };
  ctx.checkpoint = [&checkpoints](const TrainLoopState& st) { checkpoints.on_step_end(st); };
  PhaseResult trained;
  if (!resumed_at.training_done && !stopped_attaching) {
    trained = train_phase(ctx, phase, train_hooks);
    save_trained_model(ctx);
    // The finished training, checkpointed before the stages after it (a stop request arriving now
    // ends the run at the first stage, and its resume starts there, like one after a kill).
    const bool stages_follow = std::any_of(setup.stages.begin(), setup.stages.end(),
                                           [](const std::unique_ptr<Stage>& s) { return s->runs_after_training(); });
    if (!trained.stopped && stages_follow)
      checkpoints.after_training(phase);
  }
  bool stopped = trained.stopped || stopped_attaching;

  // ---- the stages that run after training, in pipeline order; a stop request skips the rest ----
  bool reached = resumed_at.stage.empty(), stage_ran = false;
  for (const std::unique_ptr<Stage>& stage : setup.stages) {
    if (stopped || ctx.stop_agreed_by_all()) {  // every rank enters the next stage, or none does
      stopped = true;
      break;
    }
    reached = reached || stage->section() == resumed_at.stage;
    if (reached) {
      stage->run(ctx);
      stage_ran = true;
    }
  }
  ctx.checkpoint = nullptr;
  // A stage returns early on a stop request without saying so: after one ran, a stop request means
  // it may have been cut short. A stop that arrives once the training loop has taken its last step
  // (its stop decision made, the final evaluation or the model's saving under way) with no stage
  // after it cuts nothing short: the run is finished. Ending it `interrupted` would make the resume
  // train again every step after the newest periodic checkpoint, none of them lost.
  if (stage_ran)
    stopped = stopped || ctx.stop_requested();
  if (cfg.output.onnx && !stopped && !ctx.run_dir.empty())
    save_onnx_artifact(ctx);
  sink.sample("cost/usd", ctx.step, ctx.wall_ms(), ctx.cost_usd_now());

  const bool noticed =
      ctx.notice_agreed ||
      (options.stop_reason && static_cast<StopReason>(options.stop_reason->load()) == StopReason::spot_notice);
  summary.status = !stopped ? "finished" : noticed ? "interrupted" : "cancelled";
  summary.steps = ctx.step;
  summary.elapsed_s = seconds_since(t_start);
  summary.final_metrics = sink.last;
  summary.final_metrics["train/seconds"] = trained.train_seconds;
  // The training phase as a whole (the samples/s and MFU samples above are the last window's).
  if (trained.train_seconds > 0 && trained.samples > 0) {
    summary.final_metrics["train/samples_per_s_mean"] = trained.samples / trained.train_seconds;
    if (ctx.peak_flops_per_s > 0)
      summary.final_metrics["device/mfu_mean"] =  // per rank, as device/mfu (trained.flops counts every rank)
          mfu_fraction(trained.flops / trained.train_seconds / ctx.comm->world_size(), ctx.peak_flops_per_s);
  }
  sink.event(summary.status, {{"run_id", summary.run_id},
                              {"steps", ctx.step},
                              {"elapsed_s", summary.elapsed_s},
                              {"metrics", summary.final_metrics}});
  sink.flush();
  return summary;
}

}  // namespace lathe
