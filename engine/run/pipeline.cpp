// train_phase: the epoch loop with gradient accumulation, hooks, the communicator's calls, periodic
// metrics and evaluation, shared by the main training and every fine-tuning phase (a TrainLoop with
// one method per seam: optimizer step, logging point, epoch end); plus evaluation and model saving.
#include "engine/run/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_map>

#include "engine/core/error.h"
#include "engine/core/timing.h"
#include "engine/dist/sharded_optimizer.h"
#include "engine/nn/model_io.h"
#include "engine/run/gpu_sampler.h"
#include "engine/run/nvml.h"
#include "engine/run/spot_notice.h"
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
  lo.rank = comm->rank();  // each rank takes its share of every global batch
  lo.world_size = comm->world_size();
  return lo;
}

int64_t StageContext::steps_per_epoch(const LoaderOptions& lo) const {
  return std::max<int64_t>(1, loader_batches_per_epoch(data.train.count, lo) / std::max(1, cfg.train.grad_accum));
}

const Dataset& StageContext::test_share() {
  const int world = comm->world_size(), rank = comm->rank();
  if (world == 1)
    return data.test;
  if (!test_share_cache) {  // rank r scores the r-th of `world` even, contiguous parts of the test set
    const Dataset& t = data.test;
    const int64_t begin = t.count * rank / world, end = t.count * (rank + 1) / world;
    std::vector<int64_t> part;
    for (int64_t i = begin; i < end; ++i)
      part.push_back(i);
    auto share = std::make_shared<Dataset>(
        select_samples(t, part, " (rank " + std::to_string(rank) + " of " + std::to_string(world) + ")"));
    test_share_cache = std::move(share);
  }
  return *test_share_cache;
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

bool StageContext::stop_agreed_by_all() {
  double v = stop_requested() ? 1.0 : 0.0;
  if (comm->world_size() > 1)
    comm->all_reduce_sum(&v, 1);
  if (v > 0)
    stop_agreed = true;
  return v > 0;
}

void begin_phase(StageContext& ctx, const std::string& name) {
  ctx.sink.event("phase", {{"phase", name}, {"epochs", 0}, {"first_step", ctx.step}, {"steps", 0}});
}

namespace {

/// One training phase's loop state and its three seams: one optimizer step, a logging point, the
/// epoch-end evaluation (train_phase strings them together).
class TrainLoop {
 public:
  TrainLoop(StageContext& ctx, const TrainPhase& phase, const TrainHooks& hooks)
      : m_ctx(ctx),
        m_phase(phase),
        m_hooks(hooks),
        m_be(ctx.be),
        m_model(*ctx.model),
        m_loader(ctx.data.train, phase.loader),
        m_k(std::max(1, phase.grad_accum)),
        m_steps_per_epoch(std::max<int64_t>(1, m_loader.batches_per_epoch() / m_k)),
        m_phase_steps(m_steps_per_epoch * phase.epochs),
        m_schedule(phase.schedule),
        m_optimizer(phase.start.optimizer ? phase.start.optimizer : make_optimizer(phase.optimizer)),
        m_first_step(ctx.step - (phase.start.epoch * m_steps_per_epoch + phase.start.step_in_epoch)),
        m_last_step(m_first_step + m_phase_steps),
        // Training FLOPs per sample: forward + backward-data + backward-weights = 3x forward (the
        // usual MFU convention; the first layer's unneeded backward-data is counted too).
        m_train_flops(3.0 * static_cast<double>(m_model.flops_per_sample())),
        m_params(m_model.named_params()),
        m_log_every(std::max<int64_t>(1, m_steps_per_epoch / 20)) {
    // ZeRO-1 (a resumed phase's optimizer is sharded already: train_checkpoint.cpp)
    if (ctx.cfg.compute.shard_optimizer && ctx.comm->world_size() > 1 &&
        !dynamic_cast<ShardedOptimizer*>(m_optimizer.get()))
      m_optimizer = std::make_shared<ShardedOptimizer>(m_optimizer, ctx.comm);
    if (!m_be.device().is_cpu()) {
      m_gpu = std::make_unique<GpuSampler>(m_be.device().index, ctx.cfg.compute.telemetry_s);
      if (!Nvml::instance().available())
        ctx.sink.event("note", {{"text", "no GPU telemetry: " + Nvml::instance().why_unavailable()}});
    }
    if (m_schedule.total_steps <= 1)
      m_schedule.total_steps = m_phase_steps;
    ctx.total_steps = std::max(ctx.total_steps, m_last_step);
    nlohmann::json event{{"phase", phase.name},
                         {"epochs", phase.epochs},
                         {"first_step", m_first_step},
                         {"steps", m_phase_steps},
                         {"base_lr", m_schedule.base_lr}};
    if (resumed())
      event["start"] = {{"epoch", phase.start.epoch}, {"step_in_epoch", phase.start.step_in_epoch}};
    ctx.sink.event("phase", event);
    if (m_k > 1) {
      for (size_t i = 0; i < m_params.size(); ++i) {
        m_accum.push_back(m_be.zeros(m_params[i].param->grad.shape(), m_params[i].param->grad.dtype()));
        m_param_index[m_params[i].param] = i;
      }
      m_accum_added.assign(m_params.size(), 0);
    }
    Progress& prog = ctx.progress;
    prog.epochs = phase.epochs;
    prog.total_steps = ctx.total_steps;
    // Every rank starts the phase from rank 0's weights.
    ctx.comm->broadcast_parameters(m_params, 0);
  }

  PhaseResult run() {
    for (int epoch = m_phase.start.epoch; epoch < m_phase.epochs && !m_result.stopped; ++epoch) {
      m_ctx.progress.epoch = epoch + 1;
      // A resumed phase's first epoch starts at its step: the loader prepares the very batches
      // that come next (its order depends on (seed, epoch) only), none before.
      int64_t s = epoch == m_phase.start.epoch ? m_phase.start.step_in_epoch : 0;
      m_loader.start_epoch(epoch, s * m_k);
      for (; s < m_steps_per_epoch; ++s) {
        const double lr = optimizer_step();
        const bool last_of_epoch = s + 1 == m_steps_per_epoch;
        if ((m_ctx.step - m_first_step) % m_log_every == 0 || last_of_epoch)
          log_point(lr);
        report_progress();
        // One stop decision per step, taken before the checkpoint hook so that a stop arriving
        // between the two cannot end the loop without its emergency checkpoint.
        const bool stop = stop_agreed();
        if (m_hooks.on_step_end)
          m_hooks.on_step_end(loop_state(epoch, s));
        if (m_phase.checkpointed && m_ctx.checkpoint)
          m_ctx.checkpoint(loop_state(epoch, s));
        if (stop) {
          m_result.stopped = true;
          break;
        }
      }
      if (!m_result.stopped && ((epoch + 1) % m_phase.eval_every == 0 || epoch + 1 == m_phase.epochs))
        end_of_epoch(epoch);
    }
    m_result.flops = m_result.samples * m_train_flops;  // one model for the whole phase
    return m_result;
  }

 private:
  /// This rank's vote: {stop, stop for a spot notice, stop for a signal}, each 0 or 1.
  void stop_vote(double v[3]) const {
    // The stop flag first: lathe-cli sets the reason before the flag, so a stop seen has its reason.
    const bool stop = m_ctx.stop_requested();
    const std::atomic<int>* reason = m_ctx.options.stop_reason;
    const StopReason why = stop && reason ? static_cast<StopReason>(reason->load()) : StopReason::none;
    v[0] = stop ? 1.0 : 0.0;
    v[1] = why == StopReason::spot_notice ? 1.0 : 0.0;
    v[2] = why == StopReason::signal ? 1.0 : 0.0;
  }

  /// A stop request on any rank stops every rank after this same step (a signal reaches them at
  /// different moments), and a spot notice or a signal on any rank is the reason for all
  /// (notice_agreed, signal_agreed). With several ranks the votes were summed with the step's
  /// gradients (optimizer_step, which runs before every call: no synchronisation of their own).
  bool stop_agreed() {
    double v[3] = {0, 0, 0};
    if (m_ctx.comm->world_size() > 1)
      std::copy(m_vote, m_vote + 3, v);
    else
      stop_vote(v);
    if (v[0] > 0)
      m_ctx.stop_agreed = true;
    if (v[1] > 0)
      m_ctx.notice_agreed = true;
    if (v[2] > 0)
      m_ctx.signal_agreed = true;
    return v[0] > 0;
  }

  bool resumed() const { return m_phase.start.epoch > 0 || m_phase.start.step_in_epoch > 0; }

  TrainLoopState loop_state(int epoch, int64_t s) const {
    return {.phase = m_phase.name,
            .stage = m_phase.stage,
            .epoch = epoch,
            .step_in_epoch = s + 1,
            .steps_per_epoch = m_steps_per_epoch,
            .global_step = m_ctx.step,
            .phase_step = m_ctx.step - m_first_step,
            .optimizer = *m_optimizer,
            .schedule = m_schedule};
  }

  /// One optimizer step: the micro-batches, the gradient reduction, the hooks and the update.
  /// Returns the learning rate it used.
  double optimizer_step() {
    const auto t_step = Clock::now();
    const int64_t local = m_ctx.step - m_first_step;  // step within the phase, for the LR schedule
    const double scale = m_hooks.loss_scale ? m_hooks.loss_scale() : 1.0;
    int64_t micro_batches = 0;
    for (int64_t micro = 0; micro < m_k; ++micro) {
      if (!m_loader.next(m_batch))
        break;
      ++micro_batches;
      m_db.load(m_be, m_batch);
      const int64_t b = m_batch.labels.dim(0);
      LayerContext lctx{m_be, true, static_cast<uint64_t>(m_ctx.step * m_k + micro)};
      // The mean over the global batch: each rank scales its sum by world / global size, and the
      // all-reduce averages over the world (one rank: 1 / b, as always).
      const double world = m_ctx.comm->world_size();
      const double grad_scale = scale * world / (static_cast<double>(m_batch.global_size) * m_k);
      // Gradient accumulation: the first k - 1 micro-batches' gradients are summed into m_accum; the
      // last one's backward pass adds that sum into each gradient as soon as it is produced (the
      // same additions in the same order as summing it into m_accum, and addition commutes), so its
      // gradients are the step's and the reduction can start during it.
      const bool last = micro == m_k - 1;
      // Overlap: buckets start during the step's last backward pass, where the communicator has a
      // hook (Gloo's thread, NCCL's communication stream).
      auto hook = last ? m_ctx.comm->grad_ready_hook(m_params) : std::function<void(const Param*)>();
      if (last && m_k > 1) {
        std::fill(m_accum_added.begin(), m_accum_added.end(), 0);
        hook = [this, reduce = std::move(hook)](const Param* p) {
          const auto it = m_param_index.find(p);
          if (it != m_param_index.end() && !m_accum_added[it->second]) {
            m_be.axpy(1.0, m_accum[it->second], m_params[it->second].param->grad);
            m_accum_added[it->second] = 1;
          }
          if (reduce)
            reduce(p);
        };
      }
      const bool hooked = static_cast<bool>(hook);
      if (hooked)
        m_model.set_grad_ready_hook(std::move(hook));
      LossResult r;
      try {
        r = m_hooks.forward_backward
                ? m_hooks.forward_backward(m_model, lctx, m_db, grad_scale, m_diff_buf)
                : forward_backward(m_model, lctx, m_db.images, m_db.labels, grad_scale, m_diff_buf);
      } catch (...) {
        if (hooked)  // the hook refers to the communicator's step state: never left on the model
          m_model.set_grad_ready_hook({});
        throw;
      }
      if (hooked)
        m_model.set_grad_ready_hook({});
      if (m_k > 1) {
        for (size_t i = 0; i < m_params.size(); ++i) {
          Tensor& grad = m_params[i].param->grad;
          if (last) {  // the gradients the hook did not see get the earlier micro-batches' sum now
            if (!m_accum_added[i])
              m_be.axpy(1.0, m_accum[i], grad);
          } else if (micro == 0) {
            m_be.copy(grad, m_accum[i]);
          } else {
            m_be.axpy(1.0, grad, m_accum[i]);
          }
        }
      }
      m_window_loss += r.loss_sum;
      m_window_correct += r.correct;
      m_window_samples += b;
      m_window_global_samples += m_batch.global_size;
      m_result.samples += static_cast<double>(m_batch.global_size);
    }
    if (m_k > 1 && micro_batches > 0 && micro_batches < m_k)  // the data ran out before the last one
      for (size_t i = 0; i < m_params.size(); ++i)
        m_be.copy(m_accum[i], m_params[i].param->grad);
    // The step's gradients are complete: average them over the ranks before anything reads them.
    // Several ranks: the stop vote goes with them (a stop requested from here on counts at the next
    // step), so a step waits for the other ranks once, not twice.
    const auto t_comm = Clock::now();
    if (m_ctx.comm->world_size() > 1) {
      stop_vote(m_vote);
      m_ctx.comm->all_reduce_gradients_and_sum(m_params, m_vote, 3);
    } else {
      m_ctx.comm->all_reduce_gradients(m_params);
    }
    // What the backward pass did not hide: the host's wait here, or the device's measurement where
    // the collectives run on streams and this call only enqueued them.
    const double device_comm_s = m_ctx.comm->exposed_comm_seconds();
    const double comm_s = device_comm_s >= 0 ? device_comm_s : seconds_since(t_comm);
    m_window_comm_s += comm_s;
    m_window_bytes += m_ctx.comm->bytes_last_step();
    const double lr = m_schedule.at(local);
    const bool update = !m_hooks.before_update || m_hooks.before_update(m_model, m_ctx.step);
    if (update)
      m_optimizer->step(m_be, m_params, lr);
    const int64_t done = m_ctx.step;
    ++m_ctx.step;
    if (m_hooks.after_update)
      m_hooks.after_update(m_model, *m_optimizer, done);
    m_be.synchronize();
    const double dt = seconds_since(t_step);
    m_window_train_s += dt;
    ++m_window_steps;
    m_result.train_seconds += dt;
    ++m_result.steps;
    return lr;
  }

  /// The train/* and device metrics of the window since the last logging point.
  void log_point(double lr) {
    MetricsSink& sink = m_ctx.sink;
    const int64_t step = m_ctx.step;
    const double ms = m_ctx.wall_ms();
    // Samples of all ranks per second (the global batches); one rank: its own.
    const double sps = m_window_global_samples / std::max(m_window_train_s, 1e-9);
    if (m_ctx.comm->world_size() > 1)
      log_dist(step, ms);
    sink.sample("train/loss", step, ms, m_window_loss / std::max<int64_t>(m_window_samples, 1));
    sink.sample("train/accuracy", step, ms,
                static_cast<double>(m_window_correct) / std::max<int64_t>(m_window_samples, 1));
    sink.sample("train/samples_per_s", step, ms, sps);
    sink.sample("train/lr", step, ms, lr);
    sink.sample("mem/optimizer_bytes", step, ms, static_cast<double>(optimizer_state_bytes(*m_optimizer, m_params)));
    if (m_be.device().is_cpu()) {
      sink.sample("device/util", step, ms, m_util.sample());
      sink.sample("mem/peak_bytes", step, ms, static_cast<double>(process_peak_rss_bytes()));
    } else if (m_gpu) {
      if (const std::optional<GpuReading> g = m_gpu->latest())  // none before the sampler's first interval
        log_gpu_reading(sink, step, ms, *g, m_gpu_warned);
      sink.sample("mem/peak_bytes", step, ms, static_cast<double>(allocator_for(m_be.device()).peak_bytes()));
    }
    if (m_ctx.peak_flops_per_s > 0) {
      // The peak is one rank's (its threads or its GPU), and the ranks train equal shares of the
      // global batch: MFU is each rank's rate over its own peak, i.e. the global rate over N peaks.
      // The peak cannot be below what a rank achieves (a peak measured on a busy machine): raise
      // it to the achieved rate, say so once, and never log an MFU above 1.
      const int world = m_ctx.comm->world_size();
      const double achieved = sps * m_train_flops / world;
      if (achieved > m_ctx.peak_flops_per_s) {
        sink.event("note", {{"text", "device/mfu: the run achieved " + std::to_string(achieved / 1e9) + " GFLOP/s" +
                                         (world > 1 ? " per rank" : "") + ", above the peak of " +
                                         std::to_string(m_ctx.peak_flops_per_s / 1e9) +
                                         " GFLOP/s taken at the start (a CPU peak measured under load, or a datasheet"
                                         " figure under what this device did): the peak is raised to it"},
                            {"kind", "mfu_peak_raised"},
                            {"peak_flops_per_s", m_ctx.peak_flops_per_s},
                            {"achieved_flops_per_s", achieved},
                            {"world_size", world}});
        m_ctx.peak_flops_per_s = achieved;
      }
      sink.sample("device/mfu", step, ms, mfu_fraction(achieved, m_ctx.peak_flops_per_s));
    }
    if (m_hooks.on_log)
      m_hooks.on_log(sink, step, ms);
    // The run's cost at its very last step is written once, at the end, by run_experiment (a
    // store keeps the first value written for a step).
    if (step != m_last_step)
      sink.sample("cost/usd", step, ms, m_ctx.cost_usd_now());
    Progress& prog = m_ctx.progress;
    prog.train_loss = m_window_loss / std::max<int64_t>(m_window_samples, 1);
    prog.train_accuracy = static_cast<double>(m_window_correct) / std::max<int64_t>(m_window_samples, 1);
    prog.samples_per_s = sps;
    m_window_loss = m_window_train_s = m_window_comm_s = 0;
    m_window_correct = m_window_samples = m_window_global_samples = m_window_steps = m_window_bytes = 0;
  }

  /// dist/* of the window: every rank's throughput and busy share gathered (each fills its slot of a
  /// sum), the communication the backward pass did not hide, and the gradient bytes per step. A GPU
  /// rank's busy share is its GPU-Util, beside its SM activity where GPM has it (-1: none).
  void log_dist(int64_t step, double ms) {
    const int world = m_ctx.comm->world_size(), rank = m_ctx.comm->rank();
    const size_t w = static_cast<size_t>(world), r = static_cast<size_t>(rank);
    // Slots: [0, w) samples/s, [w, 2w) util, [2w, 3w) SM activity, 3w comm seconds, [3w + 1, 4w + 1)
    // optimizer bytes, 4w + 1 train seconds.
    std::vector<double> v(4 * w + 2, 0.0);
    v[r] = m_window_samples / std::max(m_window_train_s, 1e-9);
    v[2 * w + r] = -1;
    v[3 * w + 1 + r] = static_cast<double>(optimizer_state_bytes(*m_optimizer, m_params));
    if (m_be.device().is_cpu()) {
      // A CPU rank's busy share of its own threads (the meter divides by all the machine's cores).
      v[w + r] = std::min(1.0, m_rank_util.sample() * m_rank_util.cores() / std::max(1, m_ctx.threads));
    } else if (const std::optional<GpuReading> g = m_gpu ? m_gpu->latest() : std::nullopt) {
      v[w + r] = g->nvml.util_percent / 100.0;
      if (g->gpm)
        v[2 * w + r] = g->gpm->sm_activity;
    } else {
      v[w + r] = -1;  // no reading yet
    }
    // Every rank's wait counts, over every rank's step time: a rank that waits while rank 0 does
    // work outside its steps (a checkpoint write) has a long wait in a long step of its own, where
    // rank 0's short step would put the fraction above 1.
    v[3 * w] = m_window_comm_s;
    v[4 * w + 1] = m_window_train_s;
    m_ctx.comm->all_reduce_sum(v.data(), static_cast<int64_t>(v.size()));
    MetricsSink& sink = m_ctx.sink;
    const double steps = static_cast<double>(std::max<int64_t>(m_window_steps, 1));
    const double comm_s = v[3 * w] / world / steps;
    sink.sample("dist/world_size", step, ms, world);
    sink.sample("dist/comm_s", step, ms, comm_s);
    sink.sample("dist/comm_fraction", step, ms, v[3 * w] / std::max(v[4 * w + 1], 1e-12));
    sink.sample("dist/bytes_per_step", step, ms, static_cast<double>(m_window_bytes) / steps);
    for (size_t i = 0; i < w; ++i) {
      const std::string prefix = "dist/rank" + std::to_string(i);
      sink.sample(prefix + "/samples_per_s", step, ms, v[i]);
      if (v[w + i] >= 0)
        sink.sample(prefix + "/util", step, ms, v[w + i]);
      if (v[2 * w + i] >= 0)
        sink.sample(prefix + "/sm_activity", step, ms, v[2 * w + i]);
      sink.sample(prefix + "/optimizer_bytes", step, ms, v[3 * w + 1 + i]);
    }
  }

  void report_progress() {
    Progress& prog = m_ctx.progress;
    const int64_t step = m_ctx.step;
    prog.step = step;
    prog.total_steps = m_ctx.total_steps;
    prog.elapsed_s = m_ctx.wall_ms() / 1000.0;
    prog.eta_s = seconds_since(m_t_phase) / std::max<int64_t>(1, step - m_first_step) * (m_ctx.total_steps - step);
    if (m_ctx.options.on_progress)
      m_ctx.options.on_progress(prog);
  }

  /// The evaluation after an epoch, its event and the after_eval hook.
  void end_of_epoch(int epoch) {
    m_result.last_eval = evaluate_and_log(m_ctx);
    m_ctx.sink.event("epoch", {{"phase", m_phase.name},
                               {"epoch", epoch + 1},
                               {"step", m_ctx.step},
                               {"test_accuracy", m_result.last_eval.accuracy},
                               {"test_loss", m_result.last_eval.loss}});
    if (m_hooks.after_eval)
      m_hooks.after_eval(m_result.last_eval, m_ctx.step);
  }

  StageContext& m_ctx;
  const TrainPhase& m_phase;
  const TrainHooks& m_hooks;
  Backend& m_be;
  Model& m_model;
  DataLoader m_loader;
  const int64_t m_k;  ///< micro-batches per optimizer step
  const int64_t m_steps_per_epoch, m_phase_steps;
  LrSchedule m_schedule;
  std::shared_ptr<Optimizer> m_optimizer;
  const int64_t m_first_step;  ///< the global step the phase started on
  const int64_t m_last_step;   ///< the global step the phase ends on
  const double m_train_flops;
  std::vector<NamedParam> m_params;
  std::vector<Tensor> m_accum;  ///< grad_accum > 1: the sum of the step's micro-batches before the last
  std::unordered_map<const Param*, size_t> m_param_index;  ///< m_params' index of each parameter
  std::vector<char> m_accum_added;  ///< the last micro-batch: m_accum already added into gradient i
  const int64_t m_log_every;
  CpuUtilMeter m_util, m_rank_util;
  std::unique_ptr<GpuSampler> m_gpu;  ///< GPU runs: NVML and GPM read off this thread
  bool m_gpu_warned = false;
  double m_vote[3] = {0, 0, 0};  ///< several ranks: the step's stop votes summed (optimizer_step)
  double m_window_loss = 0, m_window_train_s = 0, m_window_comm_s = 0;
  int64_t m_window_correct = 0, m_window_samples = 0, m_window_global_samples = 0, m_window_steps = 0;
  int64_t m_window_bytes = 0;
  Batch m_batch;
  DeviceBatch m_db;
  Tensor m_diff_buf;
  const Clock::time_point m_t_phase = Clock::now();
  PhaseResult m_result;
};

}  // namespace

PhaseResult train_phase(StageContext& ctx, const TrainPhase& phase, const TrainHooks& hooks) {
  if (ctx.resume && ctx.resume->stage == phase.stage && ctx.resume->phase == phase.name) {
    const std::shared_ptr<PendingPhaseResume> r = std::move(ctx.resume);
    if (r->steps_per_epoch != ctx.steps_per_epoch(phase.loader))
      throw DataError("checkpoint " + r->checkpoint + " is of phase '" + phase.stage + "/" + phase.name + "' with " +
                      std::to_string(r->steps_per_epoch) + " steps per epoch; this run's has " +
                      std::to_string(ctx.steps_per_epoch(phase.loader)));
    TrainPhase resumed = phase;
    resumed.start = r->start;
    TrainLoop loop(ctx, resumed, hooks);
    return loop.run();
  }
  TrainLoop loop(ctx, phase, hooks);
  return loop.run();
}

EvalResult evaluate_and_log(StageContext& ctx, const std::string& prefix) {
  EvalResult ev = evaluate(*ctx.model, ctx.be, ctx.test_share(), 500);
  // Each rank scores its part of the test set; the means come from the sums over the ranks (the
  // same division evaluate() makes, so one rank's figures are unchanged).
  double sums[3] = {ev.loss_sum, static_cast<double>(ev.correct), static_cast<double>(ev.samples)};
  ctx.comm->all_reduce_sum(sums, 3);
  ev.loss_sum = sums[0];
  ev.correct = static_cast<int64_t>(sums[1]);
  ev.samples = static_cast<int64_t>(sums[2]);
  const double n = static_cast<double>(std::max<int64_t>(ev.samples, 1));
  ev.loss = ev.loss_sum / n;
  ev.accuracy = static_cast<double>(ev.correct) / n;
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
  // No collective here: only rank 0 has a run folder, and every rank holds the same weights.
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
