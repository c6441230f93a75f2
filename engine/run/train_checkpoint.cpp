// A training run's checkpoint contents, the write schedule and the restore (see train_checkpoint.h).
#include "engine/run/train_checkpoint.h"

#include <filesystem>

#include "engine/core/error.h"

namespace lathe {

namespace {

constexpr const char* kModel = "model/";
constexpr const char* kOptim = "optim/";

Tensor host_copy(Backend& be, const Tensor& t) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  be.copy(t, h);
  return h;
}

nlohmann::json loop_json(const LoopState& l) {
  return {{"phase", l.phase},
          {"epoch", l.epoch},
          {"step_in_epoch", l.step_in_epoch},
          {"steps_per_epoch", l.steps_per_epoch},
          {"grad_accum", l.grad_accum},
          {"first_step", l.first_step},
          {"step", l.step},
          {"window_loss", l.window_loss},
          {"window_train_s", l.window_train_s},
          {"window_correct", l.window_correct},
          {"window_samples", l.window_samples},
          {"train_seconds", l.train_seconds}};
}

LoopState loop_from(const nlohmann::json& j) {
  LoopState l;
  l.phase = j.at("phase").get<std::string>();
  l.epoch = j.at("epoch").get<int>();
  l.step_in_epoch = j.at("step_in_epoch").get<int64_t>();
  l.steps_per_epoch = j.at("steps_per_epoch").get<int64_t>();
  l.grad_accum = j.at("grad_accum").get<int64_t>();
  l.first_step = j.at("first_step").get<int64_t>();
  l.step = j.at("step").get<int64_t>();
  l.window_loss = j.at("window_loss").get<double>();
  l.window_train_s = j.at("window_train_s").get<double>();
  l.window_correct = j.at("window_correct").get<int64_t>();
  l.window_samples = j.at("window_samples").get<int64_t>();
  l.train_seconds = j.at("train_seconds").get<double>();
  return l;
}

}  // namespace

std::string checkpoint_dir(const ExperimentConfig& cfg, const std::string& run_id, const std::string& run_dir) {
  if (!cfg.checkpoint.dir.empty())
    return (std::filesystem::path(cfg.checkpoint.dir) / run_id).string();
  return run_dir.empty() ? "" : run_dir + "/ckpt";
}

CheckpointData capture_training_state(StageContext& ctx, const LoopState& loop, Optimizer& optimizer,
                                      const LossScaler* scaler) {
  CheckpointData d;
  Model& model = *ctx.model;
  for (const NamedParam& p : model.named_params())
    d.tensors.emplace_back(kModel + p.name, host_copy(ctx.be, p.param->value));
  for (const NamedBuffer& b : model.named_buffers())
    d.tensors.emplace_back(kModel + b.name, host_copy(ctx.be, b.buffer->value));
  for (auto& [name, t] : optimizer.state_tensors(ctx.be, model.named_params()))
    d.tensors.emplace_back(kOptim + name, std::move(t));
  const int64_t local = loop.step - loop.first_step;
  d.state = {{"run_id", ctx.run_id},
             {"stage", {{"name", loop.phase}, {"state", nlohmann::json::object()}}},
             {"loop", loop_json(loop)},
             {"optimizer", {{"type", optimizer.name()}, {"steps_taken", optimizer.steps_taken()}}},
             {"lr_schedule", {{"position", local}}},
             // Keyed streams (see the header): the seed plus the loop position is the whole state.
             {"rng",
              {{"seed", ctx.cfg.seed},
               {"init", {{"seed", ctx.cfg.seed}}},
               {"shuffle", {{"seed", ctx.cfg.seed}, {"epoch", loop.epoch}}},
               {"augment",
                {{"seed", ctx.cfg.seed}, {"epoch", loop.epoch}, {"next_batch", loop.step_in_epoch * loop.grad_accum}}},
               {"dropout", {{"next_micro_batch", loop.step * loop.grad_accum}}}}},
             {"model", {{"params", model.param_count()}}}};
  if (scaler)
    d.state["loss_scaler"] = {{"scale", scaler->scale()},
                              {"good_steps_in_a_row", scaler->good_steps_in_a_row()},
                              {"steps_skipped", scaler->steps_skipped()}};
  return d;
}

std::optional<RestoredTraining> restore_training_state(StageContext& ctx, const std::string& dir, LossScaler* scaler) {
  std::vector<std::string> skipped;
  std::optional<LoadedCheckpoint> loaded = load_newest_checkpoint(dir, &skipped);
  if (!loaded)
    return std::nullopt;
  const std::string where = "checkpoint " + loaded->info.path;
  const nlohmann::json& st = loaded->data.state;
  if (st.value("run_id", std::string()) != ctx.run_id)
    throw DataError(where + " belongs to run '" + st.value("run_id", std::string()) + "', not '" + ctx.run_id + "'");
  RestoredTraining out;
  out.info = loaded->info;
  out.skipped = std::move(loaded->skipped);
  try {
    out.resume.at = loop_from(st.at("loop"));
    out.resume.optimizer_steps = st.at("optimizer").at("steps_taken").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(where + ": state.json lacks the loop state (" + e.what() + ")");
  }
  std::map<std::string, Tensor> model_tensors;
  for (auto& [name, t] : loaded->data.tensors) {
    if (name.rfind(kModel, 0) == 0)
      model_tensors[name.substr(std::string(kModel).size())] = t;
    else if (name.rfind(kOptim, 0) == 0)
      out.resume.optimizer_state[name.substr(std::string(kOptim).size())] = t;
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
  if (scaler && st.contains("loss_scaler")) {
    const nlohmann::json& ls = st["loss_scaler"];
    scaler->restore(ls.at("scale").get<double>(), ls.at("good_steps_in_a_row").get<int64_t>(),
                    ls.at("steps_skipped").get<int64_t>());
  }
  return out;
}

CheckpointScheduler::CheckpointScheduler(StageContext& ctx, std::string dir, const std::atomic<int>* reason,
                                         const LossScaler* scaler)
    : m_ctx(ctx), m_dir(std::move(dir)), m_reason(reason), m_scaler(scaler), m_last_ms(ctx.wall_ms()) {}

void CheckpointScheduler::on_step_end(const LoopState& loop, Optimizer& optimizer) {
  if (m_dir.empty())
    return;
  const CheckpointConfig& c = m_ctx.cfg.checkpoint;
  const double now_ms = m_ctx.wall_ms();
  const StopReason why = m_reason ? static_cast<StopReason>(m_reason->load()) : StopReason::none;
  const bool emergency =
      !m_emergency && m_ctx.stop_requested() && (why == StopReason::spot_notice || why == StopReason::signal);
  const bool by_steps = c.every_steps > 0 && loop.step % c.every_steps == 0;
  const bool by_time = c.every_min > 0 && now_ms - m_last_ms >= c.every_min * 60'000.0;
  if (!emergency && !by_steps && !by_time)
    return;
  if (emergency && why == StopReason::spot_notice)
    m_ctx.sink.event("spot/notice",
                     {{"step", loop.step}, {"wall_ms", now_ms}, {"text", "spot notice seen by the training loop"}});
  const CheckpointInfo info =
      write_checkpoint(m_dir, loop.step, capture_training_state(m_ctx, loop, optimizer, m_scaler), c.keep);
  m_last_ms = m_ctx.wall_ms();
  ++m_written;
  MetricsSink& sink = m_ctx.sink;
  sink.sample("ckpt/write_s", loop.step, m_last_ms, info.write_s);
  sink.sample("ckpt/bytes", loop.step, m_last_ms, static_cast<double>(info.bytes));
  const char* trigger = emergency ? "stop" : by_steps ? "steps" : "time";
  sink.event("checkpoint", {{"step", loop.step},
                            {"path", info.path},
                            {"bytes", info.bytes},
                            {"write_s", info.write_s},
                            {"trigger", trigger},
                            {"epoch", loop.epoch},
                            {"step_in_epoch", loop.step_in_epoch}});
  sink.event("artifact", {{"kind", "checkpoint"}, {"path", info.path + "/tensors.safetensors"}, {"step", loop.step}});
  if (emergency) {
    m_emergency = true;
    sink.event(
        "spot/checkpoint",
        {{"step", loop.step}, {"reason", stop_reason_name(why)}, {"wall_ms", m_last_ms}, {"write_s", info.write_s}});
  }
}

}  // namespace lathe
