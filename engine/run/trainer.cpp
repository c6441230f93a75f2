// run_experiment: set-up (backend, data, model, prices, peak FLOP/s), the epoch loop with gradient
// accumulation, periodic metrics, evaluation, and the saved model.
#include "engine/run/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "engine/backend/backend.h"
#include "engine/data/dataset.h"
#include "engine/data/loader.h"
#include "engine/nn/model_io.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/zoo.h"
#include "engine/run/cost_model.h"
#include "engine/run/nvml.h"
#include "engine/run/run_dir.h"
#include "engine/run/telemetry.h"
#include "engine/run/train_step.h"

namespace lathe {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TrainTest load_data(const DataConfig& d) {
  TrainTest tt;
  if (d.dataset == DatasetKind::fashion_mnist) {
    tt = load_fashion_mnist(d.path);
  } else {
    tt.train = load_idx_pair(d.train_images, d.train_labels);
    tt.test = load_idx_pair(d.test_images, d.test_labels, tt.train.num_classes);
  }
  if (d.train_subset > 0 && d.train_subset < tt.train.count)
    tt.train = subset(tt.train, d.train_subset);
  if (d.test_subset > 0 && d.test_subset < tt.test.count)
    tt.test = subset(tt.test, d.test_subset);
  return tt;
}

std::unique_ptr<Model> build_model(const ModelConfig& m, const Dataset& data) {
  if (m.zoo == ModelZoo::custom)
    return build_model_from_layers(m.layers, {1, data.rows, data.cols});
  auto model = build_zoo_model(std::string(enum_name(m.zoo)));
  if (data.rows * data.cols != 784 || data.num_classes > 10)
    throw ConfigError("model.zoo: '" + std::string(enum_name(m.zoo)) +
                      "' is built for 28x28 images and 10 classes; this dataset has " + std::to_string(data.rows) +
                      "x" + std::to_string(data.cols) + " images and " + std::to_string(data.num_classes) +
                      " classes (use model.zoo = \"custom\" with model.layers)");
  return model;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& o) {
  if (o.type == OptimizerType::adamw)
    return std::make_unique<AdamW>(o.beta1, o.beta2, o.eps, o.weight_decay);
  return std::make_unique<Sgd>(o.momentum, o.weight_decay, o.nesterov);
}

LrSchedule make_schedule(const TrainConfig& t, int64_t steps_per_epoch) {
  LrSchedule s;
  s.base_lr = t.optimizer.lr;
  s.type = t.schedule.type == ScheduleType::step     ? LrSchedule::Type::step
           : t.schedule.type == ScheduleType::cosine ? LrSchedule::Type::cosine
                                                     : LrSchedule::Type::constant;
  s.warmup_steps = static_cast<int64_t>(std::llround(t.schedule.warmup_epochs * steps_per_epoch));
  s.step_every = t.schedule.step_epochs * steps_per_epoch;
  s.gamma = t.schedule.gamma;
  s.min_lr = t.schedule.min_lr;
  s.total_steps = steps_per_epoch * t.epochs;
  return s;
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

  LoaderOptions lo;
  lo.batch_size = tc.batch_size;
  lo.shuffle = true;
  lo.seed = cfg.seed;
  lo.prefetch = cfg.data.prefetch;
  lo.augment = {cfg.data.augment.shift_px, cfg.data.augment.hflip, cfg.data.augment.noise_std,
                cfg.data.augment.strength};
  DataLoader loader(data.train, lo);
  const int64_t micro_per_epoch = loader.batches_per_epoch();
  const int64_t k = tc.grad_accum;
  const int64_t steps_per_epoch = std::max<int64_t>(1, micro_per_epoch / k);
  const int64_t total_steps = steps_per_epoch * tc.epochs;
  const LrSchedule schedule = make_schedule(tc, steps_per_epoch);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(tc.optimizer);

  RunSummary summary;
  summary.run_id = options.run_id.empty() ? make_run_id() : options.run_id;
  summary.backend = be.name();
  summary.device = be.device_name();

  if (options.on_start)
    options.on_start(summary.run_id, summary.backend, summary.device);
  std::unique_ptr<JsonlSink> file_sink;
  FanoutSink fanout;
  if (options.write_run_dir) {
    summary.run_dir = create_run_dir(cfg.output.dir, summary.run_id);
    write_file_atomic(summary.run_dir + "/config.json", cfg.raw.dump(2) + "\n");
    file_sink = std::make_unique<JsonlSink>(summary.run_dir + "/metrics.jsonl");
    fanout.add(file_sink.get());
  }
  if (options.extra_sink)
    fanout.add(options.extra_sink);
  SummarySink sink(fanout);

  const double fwd_flops = static_cast<double>(model->flops_per_sample());
  // Training FLOPs per sample: forward + backward-data + backward-weights = 3x forward (the usual
  // MFU convention; the first layer's unneeded backward-data is counted too).
  const double train_flops = 3.0 * fwd_flops;
  sink.event("started", {{"run_id", summary.run_id},
                         {"name", cfg.name},
                         {"backend", be.name()},
                         {"device", be.device_name()},
                         {"threads", threads},
                         {"model", model->summary()},
                         {"train_samples", data.train.count},
                         {"test_samples", data.test.count},
                         {"dataset", data.train.source},
                         {"peak_flops_per_s", peak.flops_per_s},
                         {"peak_flops_how", peak.how},
                         {"instance", instance.name},
                         {"price_usd_per_hour", instance.usd_per_hour(spot)},
                         {"price_source", spot ? instance.spot_source : instance.source},
                         {"price_date", instance.price_date},
                         {"total_steps", total_steps}});
  const auto wall_ms = [&]() { return seconds_since(t_start) * 1000.0; };
  sink.sample("model/params", 0, wall_ms(), static_cast<double>(model->param_count()));
  sink.sample("model/flops_per_sample", 0, wall_ms(), fwd_flops);

  // ---- training ----
  auto params = model->named_params();
  std::vector<Tensor> accum;
  if (k > 1)
    for (auto& p : params)
      accum.push_back(be.zeros(p.param->grad.shape(), p.param->grad.dtype()));
  const int64_t log_every = std::max<int64_t>(1, steps_per_epoch / 20);
  CpuUtilMeter util;
  int64_t step = 0;
  bool stopped = false;
  double window_loss = 0, window_train_s = 0;
  int64_t window_correct = 0, window_samples = 0;
  double train_seconds = 0;
  Progress prog;
  prog.epochs = tc.epochs;
  prog.total_steps = total_steps;
  Batch batch;
  DeviceBatch db;
  Tensor diff_buf;
  const auto t_train = Clock::now();

  for (int epoch = 0; epoch < tc.epochs && !stopped; ++epoch) {
    prog.epoch = epoch + 1;
    loader.start_epoch(epoch);
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      const auto t_step = Clock::now();
      for (int64_t micro = 0; micro < k; ++micro) {
        if (!loader.next(batch))
          break;
        db.load(be, batch);
        const int64_t b = batch.labels.dim(0);
        LayerContext ctx{be, true, static_cast<uint64_t>(step * k + micro)};
        const LossResult r =
            forward_backward(*model, ctx, db.images, db.labels, 1.0 / (static_cast<double>(b) * k), diff_buf);
        if (k > 1) {
          for (size_t i = 0; i < params.size(); ++i) {
            if (micro == 0) {
              be.copy(params[i].param->grad, accum[i]);
            } else {
              be.axpy(1.0, params[i].param->grad, accum[i]);
            }
          }
        }
        window_loss += r.loss_sum;
        window_correct += r.correct;
        window_samples += b;
      }
      if (k > 1)
        for (size_t i = 0; i < params.size(); ++i)
          std::swap(params[i].param->grad, accum[i]);
      const double lr = schedule.at(step);
      optimizer->step(be, params, lr);
      if (k > 1)
        for (size_t i = 0; i < params.size(); ++i)
          std::swap(params[i].param->grad, accum[i]);
      be.synchronize();
      const double dt = seconds_since(t_step);
      window_train_s += dt;
      train_seconds += dt;
      ++step;

      const bool last_of_epoch = s + 1 == steps_per_epoch;
      if (step % log_every == 0 || last_of_epoch) {
        const double ms = wall_ms();
        const double sps = window_samples / std::max(window_train_s, 1e-9);
        sink.sample("train/loss", step, ms, window_loss / std::max<int64_t>(window_samples, 1));
        sink.sample("train/accuracy", step, ms,
                    static_cast<double>(window_correct) / std::max<int64_t>(window_samples, 1));
        sink.sample("train/samples_per_s", step, ms, sps);
        sink.sample("train/lr", step, ms, lr);
        if (be.device().is_cpu()) {
          sink.sample("device/util", step, ms, util.sample());
          sink.sample("mem/peak_bytes", step, ms, static_cast<double>(process_peak_rss_bytes()));
        } else if (auto g = Nvml::instance().sample(be.device().index)) {
          sink.sample("device/util", step, ms, g->util_percent / 100.0);
          sink.sample("mem/peak_bytes", step, ms, static_cast<double>(allocator_for(be.device()).peak_bytes()));
        }
        if (peak.flops_per_s > 0)
          sink.sample("device/mfu", step, ms, sps * train_flops / peak.flops_per_s);
        // The run's last step gets its cost after evaluation and saving (a store keeps the first
        // value written for a step, so it must be written once, at the end).
        if (step != total_steps)
          sink.sample("cost/usd", step, ms, cost_usd(instance, spot, cfg.compute.devices, seconds_since(t_start)));
        prog.train_loss = window_loss / std::max<int64_t>(window_samples, 1);
        prog.train_accuracy = static_cast<double>(window_correct) / std::max<int64_t>(window_samples, 1);
        prog.samples_per_s = sps;
        window_loss = window_train_s = 0;
        window_correct = window_samples = 0;
      }
      prog.step = step;
      prog.elapsed_s = seconds_since(t_start);
      prog.eta_s = step > 0 ? seconds_since(t_train) / step * (total_steps - step) : 0;
      if (options.on_progress)
        options.on_progress(prog);
      if (options.stop && options.stop->load()) {
        stopped = true;
        break;
      }
    }
    if (!stopped && ((epoch + 1) % tc.eval_every == 0 || epoch + 1 == tc.epochs)) {
      const EvalResult ev = evaluate(*model, be, data.test, 500);
      sink.sample("test/loss", step, wall_ms(), ev.loss);
      sink.sample("test/accuracy", step, wall_ms(), ev.accuracy);
      sink.event("epoch",
                 {{"epoch", epoch + 1}, {"step", step}, {"test_accuracy", ev.accuracy}, {"test_loss", ev.loss}});
      prog.test_accuracy = ev.accuracy;
      ++prog.evaluations;
      if (options.on_progress)
        options.on_progress(prog);
    }
  }

  // ---- the model on disk: model/bytes is the size of the file really written ----
  if (options.write_run_dir && tc.save_model) {
    const std::string path = summary.run_dir + "/model.safetensors";
    const int64_t bytes = save_model(
        *model, be, path,
        {{"format", "pt"}, {"lathe_model", std::string(enum_name(cfg.model.zoo))}, {"lathe_run", summary.run_id}});
    sink.sample("model/bytes", step, wall_ms(), static_cast<double>(bytes));
    sink.event("artifact", {{"kind", "model"}, {"path", path}, {"bytes", bytes}});
  } else {
    sink.sample("model/bytes", step, wall_ms(), static_cast<double>(model->param_bytes()));
    sink.event("note", {{"text", "model/bytes is the f32 parameter size in memory: no model file was written"}});
  }
  sink.sample("cost/usd", step, wall_ms(), cost_usd(instance, spot, cfg.compute.devices, seconds_since(t_start)));

  summary.status = stopped ? "cancelled" : "finished";
  summary.steps = step;
  summary.elapsed_s = seconds_since(t_start);
  summary.final_metrics = sink.last;
  summary.final_metrics["train/seconds"] = train_seconds;
  sink.event(summary.status, {{"run_id", summary.run_id},
                              {"steps", step},
                              {"elapsed_s", summary.elapsed_s},
                              {"metrics", summary.final_metrics}});
  sink.flush();
  return summary;
}

}  // namespace lathe
