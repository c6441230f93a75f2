// train_phase: the epoch loop with gradient accumulation, hooks, periodic metrics and evaluation,
// shared by the main training and every fine-tuning phase; plus evaluation and model saving.
#include "engine/run/pipeline.h"

#include <chrono>
#include <cmath>

#include "engine/core/timing.h"
#include "engine/nn/model_io.h"
#include "engine/run/nvml.h"
#include "engine/run/telemetry.h"

namespace lathe {

LoaderOptions StageContext::loader_options() const {
  LoaderOptions lo;
  lo.batch_size = cfg.train.batch_size;
  lo.shuffle = true;
  lo.seed = cfg.seed;
  lo.prefetch = cfg.data.prefetch;
  lo.augment = {cfg.data.augment.shift_px, cfg.data.augment.hflip, cfg.data.augment.noise_std,
                cfg.data.augment.strength};
  return lo;
}

int64_t StageContext::steps_per_epoch(const LoaderOptions& lo) const {
  const int64_t micro = (data.train.count + lo.batch_size - 1) / lo.batch_size;
  const int64_t drop = lo.drop_last && data.train.count % lo.batch_size != 0 ? 1 : 0;
  return std::max<int64_t>(1, (micro - drop) / std::max(1, cfg.train.grad_accum));
}

double StageContext::cost_usd_now() const {
  return instance ? cost_usd(*instance, spot, cfg.compute.devices, wall_ms() / 1000.0) : 0.0;
}

LrSchedule make_lr_schedule(const TrainConfig& t, double base_lr, int epochs, int64_t steps_per_epoch) {
  LrSchedule s;
  s.base_lr = base_lr;
  s.type = t.schedule.type == ScheduleType::step     ? LrSchedule::Type::step
           : t.schedule.type == ScheduleType::cosine ? LrSchedule::Type::cosine
                                                     : LrSchedule::Type::constant;
  s.warmup_steps = static_cast<int64_t>(std::llround(t.schedule.warmup_epochs * steps_per_epoch));
  s.step_every = t.schedule.step_epochs * steps_per_epoch;
  s.gamma = t.schedule.gamma;
  s.min_lr = t.schedule.min_lr;
  s.total_steps = steps_per_epoch * epochs;
  return s;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& o) {
  if (o.type == OptimizerType::adamw)
    return std::make_unique<AdamW>(o.beta1, o.beta2, o.eps, o.weight_decay);
  return std::make_unique<Sgd>(o.momentum, o.weight_decay, o.nesterov);
}

TrainPhase main_train_phase(const StageContext& ctx) {
  const TrainConfig& t = ctx.cfg.train;
  TrainPhase p;
  p.name = "train";
  p.epochs = t.epochs;
  p.loader = ctx.loader_options();
  p.optimizer = t.optimizer;
  p.grad_accum = t.grad_accum;
  p.eval_every = t.eval_every;
  p.schedule = make_lr_schedule(t, t.optimizer.lr, t.epochs, ctx.steps_per_epoch(p.loader));
  return p;
}

TrainPhase fine_tuning_phase(const StageContext& ctx, const std::string& name, int epochs, double lr_scale) {
  TrainPhase p = main_train_phase(ctx);
  p.name = name;
  p.epochs = epochs;
  p.optimizer.lr = ctx.cfg.train.optimizer.lr * lr_scale;
  p.schedule = make_lr_schedule(ctx.cfg.train, p.optimizer.lr, epochs, ctx.steps_per_epoch(p.loader));
  return p;
}

void begin_phase(StageContext& ctx, const std::string& name) {
  ctx.sink.event("phase", {{"phase", name}, {"epochs", 0}, {"first_step", ctx.step}, {"steps", 0}});
}

PhaseResult train_phase(StageContext& ctx, const TrainPhase& phase, const TrainHooks& hooks) {
  Backend& be = ctx.be;
  Model& model = *ctx.model;
  MetricsSink& sink = ctx.sink;
  PhaseResult result;

  DataLoader loader(ctx.data.train, phase.loader);
  const int64_t k = std::max(1, phase.grad_accum);
  const int64_t steps_per_epoch = std::max<int64_t>(1, loader.batches_per_epoch() / k);
  const int64_t phase_steps = steps_per_epoch * phase.epochs;
  LrSchedule schedule = phase.schedule;
  if (schedule.total_steps <= 1)
    schedule.total_steps = phase_steps;
  std::unique_ptr<Optimizer> optimizer = make_optimizer(phase.optimizer);
  const PhaseResume* resume = phase.resume;
  if (resume) {
    LATHE_CHECK(
        resume->at.phase == phase.name && resume->at.steps_per_epoch == steps_per_epoch && resume->at.grad_accum == k,
        "resuming phase '", phase.name, "' from a checkpoint of phase '", resume->at.phase, "' with ",
        resume->at.steps_per_epoch, " steps per epoch and grad_accum ", resume->at.grad_accum,
        " (this run: ", steps_per_epoch, ", ", k, ")");
    optimizer->load_state_tensors(be, model.named_params(), resume->optimizer_state, resume->optimizer_steps);
    ctx.step = resume->at.step;
  }
  const int64_t first_step = resume ? resume->at.first_step : ctx.step;
  const int64_t last_step = first_step + phase_steps;  // the global step the phase ends on
  ctx.total_steps = std::max(ctx.total_steps, last_step);
  if (!resume)
    sink.event("phase", {{"phase", phase.name},
                         {"epochs", phase.epochs},
                         {"first_step", first_step},
                         {"steps", phase_steps},
                         {"base_lr", schedule.base_lr}});

  // Training FLOPs per sample: forward + backward-data + backward-weights = 3x forward (the usual
  // MFU convention; the first layer's unneeded backward-data is counted too).
  const double train_flops = 3.0 * static_cast<double>(model.flops_per_sample());
  auto params = model.named_params();
  std::vector<Tensor> accum;
  if (k > 1)
    for (auto& p : params)
      accum.push_back(be.zeros(p.param->grad.shape(), p.param->grad.dtype()));
  const int64_t log_every = std::max<int64_t>(1, steps_per_epoch / 20);
  CpuUtilMeter util;
  double window_loss = 0, window_train_s = 0;
  int64_t window_correct = 0, window_samples = 0;
  Progress& prog = ctx.progress;
  prog.epochs = phase.epochs;
  prog.total_steps = ctx.total_steps;
  Batch batch;
  DeviceBatch db;
  Tensor diff_buf;
  const auto t_phase = Clock::now();
  const int first_epoch = resume ? resume->at.epoch : 0;
  if (resume) {
    window_loss = resume->at.window_loss;
    window_train_s = resume->at.window_train_s;
    window_correct = resume->at.window_correct;
    window_samples = resume->at.window_samples;
    result.train_seconds = resume->at.train_seconds;
  }

  for (int epoch = first_epoch; epoch < phase.epochs && !result.stopped; ++epoch) {
    prog.epoch = epoch + 1;
    const int64_t first_s = resume && epoch == first_epoch ? resume->at.step_in_epoch : 0;
    loader.start_epoch(epoch, first_s * k);
    for (int64_t s = first_s; s < steps_per_epoch; ++s) {
      const auto t_step = Clock::now();
      const int64_t local = ctx.step - first_step;  // step within the phase, for the LR schedule
      const double scale = hooks.loss_scale ? hooks.loss_scale() : 1.0;
      for (int64_t micro = 0; micro < k; ++micro) {
        if (!loader.next(batch))
          break;
        db.load(be, batch);
        const int64_t b = batch.labels.dim(0);
        LayerContext lctx{be, true, static_cast<uint64_t>(ctx.step * k + micro)};
        const double grad_scale = scale / (static_cast<double>(b) * k);
        const LossResult r = hooks.forward_backward
                                 ? hooks.forward_backward(model, lctx, db, grad_scale, diff_buf)
                                 : forward_backward(model, lctx, db.images, db.labels, grad_scale, diff_buf);
        if (k > 1) {
          for (size_t i = 0; i < params.size(); ++i) {
            if (micro == 0)
              be.copy(params[i].param->grad, accum[i]);
            else
              be.axpy(1.0, params[i].param->grad, accum[i]);
          }
        }
        window_loss += r.loss_sum;
        window_correct += r.correct;
        window_samples += b;
      }
      if (k > 1)
        for (size_t i = 0; i < params.size(); ++i)
          std::swap(params[i].param->grad, accum[i]);
      const double lr = schedule.at(local);
      const bool update = !hooks.before_update || hooks.before_update(model, ctx.step);
      if (update)
        optimizer->step(be, params, lr);
      if (k > 1)
        for (size_t i = 0; i < params.size(); ++i)
          std::swap(params[i].param->grad, accum[i]);
      const int64_t done = ctx.step;
      ++ctx.step;
      if (hooks.after_update)
        hooks.after_update(model, *optimizer, done);
      be.synchronize();
      const double dt = seconds_since(t_step);
      window_train_s += dt;
      result.train_seconds += dt;
      ++result.steps;

      const int64_t step = ctx.step;
      const bool last_of_epoch = s + 1 == steps_per_epoch;
      if ((step - first_step) % log_every == 0 || last_of_epoch) {
        const double ms = ctx.wall_ms();
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
        if (ctx.peak_flops_per_s > 0) {
          // The peak cannot be below what the run achieves (a peak measured on a busy machine):
          // raise it to the achieved rate, say so once, and never log an MFU above 1.
          const double achieved = sps * train_flops;
          if (achieved > ctx.peak_flops_per_s) {
            sink.event("note",
                       {{"text", "device/mfu: the run achieved " + std::to_string(achieved / 1e9) +
                                     " GFLOP/s, above the peak of " + std::to_string(ctx.peak_flops_per_s / 1e9) +
                                     " GFLOP/s measured at the start (under load?): the peak is raised to it"},
                        {"kind", "mfu_peak_raised"},
                        {"peak_flops_per_s", ctx.peak_flops_per_s},
                        {"achieved_flops_per_s", achieved}});
            ctx.peak_flops_per_s = achieved;
          }
          sink.sample("device/mfu", step, ms, achieved / ctx.peak_flops_per_s);
        }
        if (hooks.on_log)
          hooks.on_log(sink, step, ms);
        // The run's cost at its very last step is written once, at the end, by run_experiment (a
        // store keeps the first value written for a step).
        if (step != last_step)
          sink.sample("cost/usd", step, ms, ctx.cost_usd_now());
        prog.train_loss = window_loss / std::max<int64_t>(window_samples, 1);
        prog.train_accuracy = static_cast<double>(window_correct) / std::max<int64_t>(window_samples, 1);
        prog.samples_per_s = sps;
        window_loss = window_train_s = 0;
        window_correct = window_samples = 0;
      }
      prog.step = step;
      prog.total_steps = ctx.total_steps;
      prog.elapsed_s = ctx.wall_ms() / 1000.0;
      prog.eta_s = seconds_since(t_phase) / std::max<int64_t>(1, step - first_step) * (ctx.total_steps - step);
      if (ctx.options.on_progress)
        ctx.options.on_progress(prog);
      if (hooks.on_step_end) {
        LoopState st;
        st.phase = phase.name;
        st.epoch = epoch;
        st.step_in_epoch = s + 1;
        st.steps_per_epoch = steps_per_epoch;
        st.grad_accum = k;
        st.first_step = first_step;
        st.step = ctx.step;
        st.window_loss = window_loss;
        st.window_train_s = window_train_s;
        st.window_correct = window_correct;
        st.window_samples = window_samples;
        st.train_seconds = result.train_seconds;
        hooks.on_step_end(st, *optimizer);
      }
      if (ctx.stop_requested()) {
        result.stopped = true;
        break;
      }
    }
    if (!result.stopped && ((epoch + 1) % phase.eval_every == 0 || epoch + 1 == phase.epochs)) {
      result.last_eval = evaluate_and_log(ctx);
      ctx.sink.event("epoch", {{"phase", phase.name},
                               {"epoch", epoch + 1},
                               {"step", ctx.step},
                               {"test_accuracy", result.last_eval.accuracy},
                               {"test_loss", result.last_eval.loss}});
      if (hooks.after_eval)
        hooks.after_eval(result.last_eval, ctx.step);
    }
  }
  return result;
}

EvalResult evaluate_and_log(StageContext& ctx, const std::string& prefix) {
  const EvalResult ev = evaluate(*ctx.model, ctx.be, ctx.data.test, 500);
  const double ms = ctx.wall_ms();
  ctx.sink.sample("test/loss", ctx.step, ms, ev.loss);
  ctx.sink.sample("test/accuracy", ctx.step, ms, ev.accuracy);
  if (!prefix.empty())
    ctx.sink.sample(prefix + "/test_accuracy", ctx.step, ms, ev.accuracy);
  ctx.progress.test_accuracy = ev.accuracy;
  ++ctx.progress.evaluations;
  if (ctx.options.on_progress)
    ctx.options.on_progress(ctx.progress);
  return ev;
}

int64_t save_model_artifact(StageContext& ctx, const std::string& file, const std::string& kind) {
  if (ctx.run_dir.empty())
    return 0;
  const std::string path = ctx.run_dir + "/" + file;
  const int64_t bytes = save_model(*ctx.model, ctx.be, path,
                                   {{"format", "pt"},
                                    {"lathe_model", std::string(enum_name(ctx.cfg.model.zoo))},
                                    {"lathe_run", ctx.run_id},
                                    {"lathe_kind", kind}});
  ctx.sink.event("artifact", {{"kind", kind}, {"path", path}, {"bytes", bytes}});
  return bytes;
}

}  // namespace lathe
