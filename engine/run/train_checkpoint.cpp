// A training run's checkpoint contents, the write schedule and the restore (see train_checkpoint.h).
#include "engine/run/train_checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/dist/sharded_optimizer.h"
#include "engine/run/stage.h"

namespace lathe {

namespace {

constexpr const char* kModel = "model/";
constexpr const char* kOptim = "optim/";
constexpr const char* kStage = "stage/";

Tensor host_copy(Backend& be, const Tensor& t) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  be.copy(t, h);
  return h;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

/// Data parallel: each rank picks the newest valid checkpoint of the run's folder itself, and all
/// must have picked the same one. `step` is the picked checkpoint's global step, -1 for none.
void agree_on_checkpoint(StageContext& ctx, int64_t step, const std::string& dir) {
  const int world = ctx.comm->world_size();
  if (world == 1)
    return;
  double v[3] = {static_cast<double>(step), static_cast<double>(step) * static_cast<double>(step), 1.0};
  ctx.comm->all_reduce_sum(v, 3);
  // n * sum(s^2) == (sum s)^2 exactly when every s is the same (integers well inside a double's 53 bits).
  if (v[2] != world || v[1] * v[2] != v[0] * v[0])
    throw DataError("resuming on " + std::to_string(world) + " ranks: rank " + std::to_string(ctx.comm->rank()) +
                    " found the checkpoint of step " + std::to_string(step) + " in " + dir +
                    ", but not every rank found the same one (is " + dir + " on a folder every rank sees?)");
}

/// The optimizer state a checkpoint holds. A sharded (ZeRO-1) optimizer's comes from every rank
/// (a collective, so every rank calls this at the same step): the checkpoint holds all of it,
/// whatever the world size.
std::vector<std::pair<std::string, Tensor>> checkpoint_optimizer_state(StageContext& ctx, Optimizer& optimizer) {
  const std::vector<NamedParam> params = ctx.model->named_params();
  if (auto* sharded = dynamic_cast<ShardedOptimizer*>(&optimizer))
    return sharded->gathered_state_tensors(ctx.be, params);
  return optimizer.state_tensors(ctx.be, params);
}

}  // namespace

std::string checkpoint_dir(const ExperimentConfig& cfg, const std::string& run_id, const std::string& run_dir) {
  if (!cfg.checkpoint.dir.empty())
    return (std::filesystem::path(cfg.checkpoint.dir) / run_id).string();
  return run_dir.empty() ? "" : run_dir + "/ckpt";
}

namespace {

/// The model's weights and buffers and every stage's state into `d`; returns the stages' JSON.
nlohmann::json capture_model_and_stages(StageContext& ctx, const std::vector<std::unique_ptr<Stage>>& stages,
                                        CheckpointData& d) {
  Model& model = *ctx.model;
  for (const NamedParam& p : model.named_params())
    d.tensors.emplace_back(kModel + p.name, host_copy(ctx.be, p.param->value));
  for (const NamedBuffer& b : model.named_buffers())
    d.tensors.emplace_back(kModel + b.name, host_copy(ctx.be, b.buffer->value));
  nlohmann::json stage_json = nlohmann::json::object();
  for (const std::unique_ptr<Stage>& stage : stages) {
    StageState st = stage->save_state();
    if (st.empty())
      continue;
    stage_json[stage->section()] = st.json;
    for (auto& [name, t] : st.tensors)
      d.tensors.emplace_back(kStage + stage->section() + "/" + name, std::move(t));
  }
  return stage_json;
}

}  // namespace

CheckpointData capture_training_state(StageContext& ctx, const TrainLoopState& loop,
                                      const std::vector<std::unique_ptr<Stage>>& stages) {
  CheckpointData d;
  Model& model = *ctx.model;
  const nlohmann::json stage_json = capture_model_and_stages(ctx, stages, d);
  for (auto& [name, t] : checkpoint_optimizer_state(ctx, loop.optimizer))
    d.tensors.emplace_back(kOptim + name, std::move(t));
  const uint64_t seed = ctx.cfg.seed;
  const int64_t micro = std::max(1, ctx.cfg.train.grad_accum);
  d.state = {{"run_id", ctx.run_id},
             {"phase", loop.phase},
             {"stage", loop.stage},
             {"loop",
              {{"epoch", loop.epoch},
               {"step_in_epoch", loop.step_in_epoch},
               {"steps_per_epoch", loop.steps_per_epoch},
               {"global_step", loop.global_step},
               {"phase_step", loop.phase_step}}},
             {"optimizer", {{"type", loop.optimizer.name()}, {"steps_taken", loop.optimizer.steps_taken()}}},
             {"lr_schedule", {{"position", loop.phase_step}, {"lr_next", loop.schedule.at(loop.phase_step)}}},
             // Keyed streams (see the header): the seed plus the loop position is the whole state.
             {"rng",
              {{"init", {{"seed", seed}}},
               {"shuffle", {{"seed", seed}, {"epoch", loop.epoch}}},
               {"augment", {{"seed", seed}, {"epoch", loop.epoch}, {"next_batch", loop.step_in_epoch * micro}}},
               {"dropout", {{"next_micro_batch", loop.global_step * micro}}}}},
             {"stages", stage_json},
             {"model", {{"params", model.param_count()}}}};
  return d;
}

ResumeCheckpoint read_resume_checkpoint(StageContext& ctx, const std::string& dir) {
  ResumeCheckpoint c;
  c.dir = dir;
  if (!dir.empty())
    c.loaded = load_newest_checkpoint(dir, &c.none_valid);
  agree_on_checkpoint(ctx, c.loaded ? c.loaded->info.step : -1, dir);
  // Every rank has read its checkpoint: the writer (rank 0) clears what a killed writer left half
  // written, which the next checkpoint write would clear too, if one comes before the run ends.
  if (!dir.empty() && ctx.comm->rank() == 0)
    remove_stale_checkpoint_temporaries(dir);
  if (!c.loaded)
    return c;
  const nlohmann::json& st = c.loaded->data.state;
  if (st.value("run_id", std::string()) != ctx.run_id)
    throw DataError("checkpoint " + c.loaded->info.path + " belongs to run '" + st.value("run_id", std::string()) +
                    "', not '" + ctx.run_id + "'");
  for (auto& [name, t] : c.loaded->data.tensors)
    if (starts_with(name, kStage)) {
      const std::string rest = name.substr(std::string(kStage).size());
      const size_t slash = rest.find('/');
      if (slash != std::string::npos)
        c.stage_states[rest.substr(0, slash)].tensors.emplace_back(rest.substr(slash + 1), t);
    }
  const nlohmann::json stage_json = st.value("stages", nlohmann::json::object());
  for (const auto& [section, json] : stage_json.items())
    c.stage_states[section].json = json;
  return c;
}

void resume_stages_before_attach(const ResumeCheckpoint& checkpoint,
                                 const std::vector<std::unique_ptr<Stage>>& stages) {
  for (const std::unique_ptr<Stage>& stage : stages) {
    const auto it = checkpoint.stage_states.find(stage->section());
    try {
      stage->resume_before_attach(it != checkpoint.stage_states.end() ? it->second : StageState{});
    } catch (const DataError& e) {
      throw DataError("checkpoint " + (checkpoint.loaded ? checkpoint.loaded->info.path : checkpoint.dir) + ": " +
                      e.what());
    }
  }
}

ResumedAt resume_training(StageContext& ctx, const ResumeCheckpoint& checkpoint, TrainPhase& phase,
                          const std::vector<std::unique_ptr<Stage>>& stages) {
  const std::optional<LoadedCheckpoint>& loaded = checkpoint.loaded;
  const std::string& dir = checkpoint.dir;
  if (!loaded) {
    nlohmann::json skipped = nlohmann::json::array();
    for (const std::string& m : checkpoint.none_valid)
      skipped.push_back(m);
    ctx.sink.event("resumed", {{"run_id", ctx.run_id},
                               {"from_step", 0},
                               {"checkpoint", nullptr},
                               {"skipped", skipped},
                               {"text", "no valid checkpoint in " + (dir.empty() ? "(none)" : dir) +
                                            ": training starts again at step 0"}});
    ctx.sink.flush();
    return {};
  }
  const std::string where = "checkpoint " + loaded->info.path;
  const nlohmann::json& st = loaded->data.state;
  // The finished main training's checkpoint (CheckpointScheduler::after_training): no optimizer.
  const bool training_done = st.value("training_done", false);
  int epoch = 0;
  int64_t step_in_epoch = 0, steps_per_epoch = 0, global_step = 0, optimizer_steps = 0;
  try {
    const nlohmann::json& l = st.at("loop");
    epoch = l.at("epoch").get<int>();
    step_in_epoch = l.at("step_in_epoch").get<int64_t>();
    steps_per_epoch = l.at("steps_per_epoch").get<int64_t>();
    global_step = l.at("global_step").get<int64_t>();
    if (!training_done)
      optimizer_steps = st.at("optimizer").at("steps_taken").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(where + ": state.json lacks the loop state (" + e.what() + ")");
  }
  const std::string ckpt_phase = st.value("phase", std::string()), ckpt_stage = st.value("stage", std::string());
  if (!ckpt_stage.empty() &&
      std::none_of(stages.begin(), stages.end(), [&](const auto& s) { return s->section() == ckpt_stage; }))
    throw DataError(where + " is of the '" + ckpt_stage + "/" + ckpt_phase + "' phase; this run has no stage '" +
                    ckpt_stage + "'");
  if (ckpt_stage.empty() && (ckpt_phase != phase.name || steps_per_epoch != ctx.steps_per_epoch(phase.loader)))
    throw DataError(where + " is of phase '" + st.value("phase", std::string()) + "' with " +
                    std::to_string(steps_per_epoch) + " steps per epoch; this run's '" + phase.name + "' has " +
                    std::to_string(ctx.steps_per_epoch(phase.loader)));

  std::map<std::string, Tensor> model_tensors, optim_tensors;
  for (auto& [name, t] : loaded->data.tensors) {
    if (starts_with(name, kModel))
      model_tensors[name.substr(std::string(kModel).size())] = t;
    else if (starts_with(name, kOptim))
      optim_tensors[name.substr(std::string(kOptim).size())] = t;
  }
  for (const std::unique_ptr<Stage>& stage : stages) {
    const auto it = checkpoint.stage_states.find(stage->section());
    if (it != checkpoint.stage_states.end() && !it->second.empty())
      stage->load_state(it->second);
  }
  // A checkpoint of a stage's phase: the stages up to that one rebuild the model they had replaced
  // by then (structured pruning, low-rank), in order, so that its weights load into their shapes.
  if (!ckpt_stage.empty()) {
    try {
      for (const std::unique_ptr<Stage>& stage : stages) {
        stage->restore_model(ctx);
        if (stage->section() == ckpt_stage)
          break;
      }
    } catch (const DataError& e) {
      throw DataError(where + ": " + e.what());
    }
  }
  Model& model = *ctx.model;
  auto load = [&](const std::string& name, Tensor& dst) {
    auto it = model_tensors.find(name);
    if (it == model_tensors.end())
      throw DataError(where + ": tensor '" + name + "' of the model is missing");
    if (it->second.shape() != dst.shape() || it->second.dtype() != dst.dtype())
      throw DataError(where + ": tensor '" + name + "' is " + shape_str(it->second.shape()) + ", the model has " +
                      shape_str(dst.shape()));
    ctx.be.copy(it->second, dst);
  };
  for (const NamedParam& p : model.named_params())
    load(p.name, p.param->value);
  for (const NamedBuffer& b : model.named_buffers())
    load(b.name, b.buffer->value);
  ctx.step = global_step;
  nlohmann::json skipped = nlohmann::json::array();
  for (const std::string& m : loaded->skipped)
    skipped.push_back(m);
  nlohmann::json event = {{"run_id", ctx.run_id},
                          {"from_step", global_step},
                          {"checkpoint", loaded->info.path},
                          {"phase", ckpt_phase},
                          {"stage", ckpt_stage},
                          {"training_done", training_done || !ckpt_stage.empty()},
                          {"epoch", epoch},
                          {"step_in_epoch", step_in_epoch},
                          {"skipped", skipped},
                          {"text", "resumed from the checkpoint of step " + std::to_string(global_step)}};
  if (training_done) {
    // The main training is complete (its final evaluation and model file are in the store and the
    // run folder): no step is trained again, the stages run from the first.
    event["text"] = "resumed from the checkpoint of step " + std::to_string(global_step) +
                    ", the end of the main training: the stages after it run from the first";
    ctx.sink.event("resumed", event);
    ctx.sink.flush();
    return {.training_done = true, .stage = ""};
  }

  std::shared_ptr<Optimizer> optimizer = make_optimizer(phase.optimizer);
  try {
    // The checkpoint holds every parameter's whole state, whoever wrote it (1 rank, N ranks, with
    // or without ZeRO-1, whole-tensor or flat shards). A sharded (ZeRO-1) rank keeps its slices.
    if (ctx.cfg.compute.shard_optimizer && ctx.comm->world_size() > 1) {
      auto sharded = std::make_shared<ShardedOptimizer>(optimizer, ctx.comm);
      sharded->load_full_state(ctx.be, model.named_params(), optim_tensors, optimizer_steps);
      optimizer = sharded;
    } else {
      optimizer->load_state_tensors(ctx.be, model.named_params(), optim_tensors, optimizer_steps);
    }
  } catch (const DataError& e) {
    throw DataError(where + ": " + e.what());
  }
  if (ckpt_stage.empty()) {
    phase.start.epoch = epoch;
    phase.start.step_in_epoch = step_in_epoch;
    phase.start.optimizer = std::move(optimizer);
  } else {
    // A stage's fine-tuning phase: the main training and the stages before this one are done;
    // the stage's run() continues the phase (train_phase takes ctx.resume).
    auto pending = std::make_shared<PendingPhaseResume>();
    pending->stage = ckpt_stage;
    pending->phase = ckpt_phase;
    pending->steps_per_epoch = steps_per_epoch;
    pending->checkpoint = loaded->info.path;
    pending->start = {epoch, step_in_epoch, std::move(optimizer)};
    ctx.resume = std::move(pending);
  }
  ctx.sink.event("resumed", event);
  ctx.sink.flush();  // the resume is on record even if this process is killed at once
  return {.training_done = !ckpt_stage.empty(), .stage = ckpt_stage};
}

void CheckpointScheduler::after_training(const TrainPhase& phase) {
  if (m_dir.empty())  // checkpoints off, or a rank > 0 (no optimizer state to gather: nothing to do)
    return;
  const int64_t steps_per_epoch = m_ctx.steps_per_epoch(phase.loader);
  const int64_t global_step = m_ctx.step;
  CheckpointData d;
  const nlohmann::json stage_json = capture_model_and_stages(m_ctx, m_stages, d);
  d.state = {{"run_id", m_ctx.run_id},
             {"phase", phase.name},
             {"stage", ""},
             {"training_done", true},
             {"loop",
              {{"epoch", std::max(0, phase.epochs - 1)},
               {"step_in_epoch", steps_per_epoch},
               {"steps_per_epoch", steps_per_epoch},
               {"global_step", global_step},
               {"phase_step", steps_per_epoch * phase.epochs}}},
             {"stages", stage_json},
             {"model", {{"params", m_ctx.model->param_count()}}}};
  const CheckpointInfo info = write_checkpoint(m_dir, global_step, d, m_ctx.cfg.checkpoint.keep);
  m_last_ms = m_ctx.wall_ms();
  ++m_written;
  MetricsSink& sink = m_ctx.sink;
  sink.sample("ckpt/write_s", global_step, m_last_ms, info.write_s);
  sink.sample("ckpt/bytes", global_step, m_last_ms, static_cast<double>(info.bytes));
  sink.event("checkpoint", {{"step", global_step},
                            {"path", info.path},
                            {"bytes", info.bytes},
                            {"write_s", info.write_s},
                            {"trigger", "training_done"},
                            {"epoch", std::max(0, phase.epochs - 1)},
                            {"step_in_epoch", steps_per_epoch}});
  sink.event("artifact", {{"kind", "checkpoint"}, {"path", info.path + "/tensors.safetensors"}, {"step", global_step}});
  sink.flush();  // a kill in the next stage finds the checkpoint on record
}

CheckpointScheduler::CheckpointScheduler(StageContext& ctx, std::string dir, const std::atomic<int>* reason,
                                         const std::vector<std::unique_ptr<Stage>>& stages)
    : m_ctx(ctx), m_dir(std::move(dir)), m_reason(reason), m_stages(stages), m_last_ms(ctx.wall_ms()) {}

void CheckpointScheduler::on_step_end(const TrainLoopState& loop) {
  const int world = m_ctx.comm->world_size();
  // Only rank 0 writes (the others have no folder). A sharded optimizer's state is gathered from
  // every rank (a collective), so then every rank follows rank 0's schedule (its clock) through one
  // small vote a step; an unsharded one's is rank 0's alone, so the other ranks have nothing to do
  // and rank 0 keeps its own schedule. The reasons for an emergency one are agreed with the stop.
  const bool sharded = world > 1 && dynamic_cast<const ShardedOptimizer*>(&loop.optimizer);
  if (m_dir.empty() && !sharded)
    return;
  const CheckpointConfig& c = m_ctx.cfg.checkpoint;
  const double now_ms = m_ctx.wall_ms();
  const StopReason why = m_reason ? static_cast<StopReason>(m_reason->load()) : StopReason::none;
  bool enabled = !m_dir.empty();
  const bool by_steps = enabled && c.every_steps > 0 && loop.global_step % c.every_steps == 0;
  const bool by_time = enabled && c.every_min > 0 && now_ms - m_last_ms >= c.every_min * 60'000.0;
  bool due = by_steps || by_time;
  if (sharded) {
    double v[2] = {enabled ? 1.0 : 0.0, due ? 1.0 : 0.0};
    m_ctx.comm->all_reduce_sum(v, 2);
    enabled = v[0] > 0;
    due = v[1] > 0;
  }
  const bool emergency =
      enabled && !m_emergency && m_ctx.stop_agreed && (m_ctx.notice_agreed || m_ctx.signal_agreed);
  if (!enabled || (!emergency && !due))
    return;
  if (m_dir.empty()) {  // a rank > 0: its part of a sharded optimizer's gather, nothing written
    checkpoint_optimizer_state(m_ctx, loop.optimizer);
    m_last_ms = m_ctx.wall_ms();
    m_emergency = m_emergency || emergency;
    return;
  }
  MetricsSink& sink = m_ctx.sink;
  if (emergency && m_ctx.notice_agreed)
    sink.event("spot/notice",
               {{"step", loop.global_step}, {"wall_ms", now_ms}, {"text", "spot notice seen by the training loop"}});
  const CheckpointInfo info =
      write_checkpoint(m_dir, loop.global_step, capture_training_state(m_ctx, loop, m_stages), c.keep);
  m_last_ms = m_ctx.wall_ms();
  ++m_written;
  sink.sample("ckpt/write_s", loop.global_step, m_last_ms, info.write_s);
  sink.sample("ckpt/bytes", loop.global_step, m_last_ms, static_cast<double>(info.bytes));
  const char* trigger = emergency ? "stop" : by_steps ? "steps" : "time";
  sink.event("checkpoint", {{"step", loop.global_step},
                            {"path", info.path},
                            {"bytes", info.bytes},
                            {"write_s", info.write_s},
                            {"trigger", trigger},
                            {"epoch", loop.epoch},
                            {"step_in_epoch", loop.step_in_epoch}});
  sink.event("artifact",
             {{"kind", "checkpoint"}, {"path", info.path + "/tensors.safetensors"}, {"step", loop.global_step}});
  if (emergency) {
    m_emergency = true;
    sink.event("spot/checkpoint", {{"step", loop.global_step},
                                   {"reason", why == StopReason::spot_notice || why == StopReason::signal ? stop_reason_name(why)
                                              : m_ctx.notice_agreed ? "spot_notice (seen by another rank)"
                                                                    : "signal (to another rank)"},
                                   {"wall_ms", m_last_ms},
                                   {"write_s", info.write_s}});
  }
}

}  // namespace lathe
