// The measurements the model-replacing stages share (stage_measure.h).
#include "engine/run/stage_measure.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/nn/model_io.h"
#include "engine/run/latency.h"

namespace lathe {

EvalResult evaluate_as(StageContext& ctx, const std::string& prefix) {
  const EvalResult ev = evaluate(*ctx.model, ctx.be, ctx.data.test, 500);
  ctx.sink.sample(prefix + "/test_accuracy", ctx.step, ctx.wall_ms(), ev.accuracy);
  ctx.sink.sample(prefix + "/test_loss", ctx.step, ctx.wall_ms(), ev.loss);
  return ev;
}

int64_t saved_model_bytes(Model& model, Backend& be, const std::string& path,
                          const std::map<std::string, std::string>& metadata) {
  if (!path.empty())
    return save_model(model, be, path, metadata);
  static std::atomic<int> counter{0};
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() /
      ("lathe-model-size-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".safetensors");
  const int64_t bytes = save_model(model, be, tmp.string(), metadata);
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  return bytes;
}

DenseBaseline measure_dense_baseline(StageContext& ctx) {
  DenseBaseline d;
  d.meta = {{"format", "pt"}, {"lathe_model", std::string(enum_name(ctx.cfg.model.zoo))}, {"lathe_run", ctx.run_id}};
  d.eval = evaluate_as(ctx, "dense");
  auto dense_meta = d.meta;
  dense_meta["lathe_kind"] = "dense";
  d.bytes = saved_model_bytes(*ctx.model, ctx.be, "", dense_meta);
  ctx.sink.sample("model/dense_bytes", ctx.step, ctx.wall_ms(), static_cast<double>(d.bytes));
  ctx.sink.sample("model/dense_params", ctx.step, ctx.wall_ms(), static_cast<double>(ctx.model->param_count()));
  return d;
}

int64_t save_replacement(StageContext& ctx, const DenseBaseline& dense, const std::string& kind,
                         const std::string& prefix, const std::map<std::string, std::string>& extra) {
  auto meta = dense.meta;
  meta["lathe_kind"] = kind;
  meta.insert(extra.begin(), extra.end());
  const std::string path = ctx.run_dir.empty() ? "" : ctx.run_dir + "/model." + kind + ".safetensors";
  const int64_t bytes = saved_model_bytes(*ctx.model, ctx.be, path, meta);
  if (!path.empty())
    ctx.sink.event("artifact", {{"kind", kind}, {"path", path}, {"bytes", bytes}});
  ctx.sink.sample("model/dense_bytes", ctx.step, ctx.wall_ms(), static_cast<double>(dense.bytes));
  ctx.sink.sample("model/bytes", ctx.step, ctx.wall_ms(), static_cast<double>(bytes));
  ctx.sink.sample(prefix + "/bytes_ratio", ctx.step, ctx.wall_ms(),
                  static_cast<double>(bytes) / static_cast<double>(dense.bytes));
  return bytes;
}

namespace {

constexpr const char* kDense = "dense/";

Tensor host_copy(Backend& be, const Tensor& t) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  be.copy(t, h);
  return h;
}

}  // namespace

StageState replacement_state(const ReplacementRun& run) {
  StageState st;
  if (!run.replaced)
    return st;
  nlohmann::json names = nlohmann::json::array();
  for (const auto& [name, t] : run.dense_tensors) {
    names.push_back(name);
    st.tensors.emplace_back(kDense + name, t);
  }
  st.json = {{"replaced", true},
             {"dense_accuracy", run.baseline.eval.accuracy},
             {"dense_loss", run.baseline.eval.loss},
             {"dense_bytes", run.baseline.bytes},
             {"dense_meta", run.baseline.meta},
             {"file_meta", run.file_meta},
             {"dense_tensors", names}};
  return st;
}

void load_replacement_state(const StageState& state, ReplacementRun& run) {
  run = {};
  if (state.json.is_null() || !state.json.value("replaced", false))
    return;
  try {
    run.baseline.eval.accuracy = state.json.at("dense_accuracy").get<double>();
    run.baseline.eval.loss = state.json.at("dense_loss").get<double>();
    run.baseline.bytes = state.json.at("dense_bytes").get<int64_t>();
    run.baseline.meta = state.json.at("dense_meta").get<std::map<std::string, std::string>>();
    run.file_meta = state.json.at("file_meta").get<std::map<std::string, std::string>>();
    for (const auto& name : state.json.at("dense_tensors")) {
      const std::string key = kDense + name.get<std::string>();
      const auto it =
          std::find_if(state.tensors.begin(), state.tensors.end(), [&](const auto& t) { return t.first == key; });
      if (it == state.tensors.end())
        throw DataError("no tensor " + key);
      run.dense_tensors.emplace_back(name.get<std::string>(), it->second);
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("the replaced model's state: ") + e.what());
  }
  run.replaced = true;
}

void restore_replacement(StageContext& ctx, ReplacementRun& run,
                         const std::function<std::unique_ptr<Model>(Model& dense)>& rebuild) {
  if (!run.replaced)
    return;
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : run.dense_tensors)
    by_name[name] = &t;
  auto load = [&](const std::string& name, Tensor& dst) {
    const auto it = by_name.find(name);
    if (it == by_name.end())
      throw DataError("the replaced dense model's tensor '" + name + "' is missing");
    if (it->second->shape() != dst.shape() || it->second->dtype() != dst.dtype())
      throw DataError("the replaced dense model's tensor '" + name + "' is " + shape_str(it->second->shape()) +
                      ", the model has " + shape_str(dst.shape()));
    ctx.be.copy(*it->second, dst);
  };
  Model& dense = *ctx.model;
  for (const NamedParam& p : dense.named_params())
    load(p.name, p.param->value);
  for (const NamedBuffer& b : dense.named_buffers())
    load(b.name, b.buffer->value);
  std::unique_ptr<Model> replacement = rebuild(dense);
  run.dense = std::move(ctx.model);
  ctx.model = std::move(replacement);
}

bool resuming_replacement(const StageContext& ctx, const ReplacementRun& run, const std::string& section) {
  return run.replaced && ctx.resume && ctx.resume->stage == section;
}

bool fine_tune_replacement(StageContext& ctx, std::unique_ptr<Model> replacement, ReplacementRun& run,
                           const std::string& section, const std::string& label, const std::string& prefix,
                           int64_t epochs, double lr_scale) {
  if (!resuming_replacement(ctx, run, section)) {
    // The dense weights, kept for every later checkpoint: a resume rebuilds the replacement from them.
    run.dense_tensors.clear();
    for (const NamedParam& p : ctx.model->named_params())
      run.dense_tensors.emplace_back(p.name, host_copy(ctx.be, p.param->value));
    for (const NamedBuffer& b : ctx.model->named_buffers())
      run.dense_tensors.emplace_back(b.name, host_copy(ctx.be, b.buffer->value));
    run.dense = std::move(ctx.model);
    ctx.model = std::move(replacement);
    run.replaced = true;
    evaluate_as(ctx, label + "_before_finetune");
    if (ctx.stop_requested())
      return false;
  }
  EvalResult eval;
  if (epochs > 0) {
    TrainPhase phase = fine_tuning_phase(ctx, "finetune", static_cast<int>(epochs), lr_scale);
    phase.stage = section;
    phase.checkpointed = true;  // through ctx.checkpoint, with the dense weights in the stage's state
    ctx.total_steps += ctx.steps_per_epoch(phase.loader) * phase.epochs;
    const PhaseResult tuned = train_phase(ctx, phase);
    if (tuned.stopped || ctx.stop_requested())
      return false;
    eval = tuned.last_eval;
  }
  if (eval.samples > 0)
    ctx.sink.sample(label + "/test_accuracy", ctx.step, ctx.wall_ms(), eval.accuracy);
  else
    eval = evaluate_and_log(ctx, label);
  ctx.sink.sample(prefix + "/accuracy_drop_pt", ctx.step, ctx.wall_ms(),
                  100.0 * (run.baseline.eval.accuracy - eval.accuracy));
  return true;
}

void measure_dense_vs(StageContext& ctx, Model& dense, Model& compressed, const std::string& label,
                      const std::string& speedup_prefix) {
  const std::vector<int64_t> sample = ctx.data.test.sample_shape();
  std::vector<LatencyResult> best[2];
  for (int round = 0; round < 2 && !ctx.stop_requested(); ++round)
    for (int k = 0; k < 2; ++k) {
      const std::vector<LatencyResult> now = measure_model_latency(k == 0 ? dense : compressed, ctx.be, sample);
      if (best[k].empty())
        best[k] = now;
      for (size_t i = 0; i < now.size(); ++i)
        if (now[i].ms_per_batch < best[k][i].ms_per_batch)
          best[k][i] = now[i];
    }
  if (best[0].empty() || best[1].empty())
    return;
  log_latency(ctx.sink, ctx.step, ctx.wall_ms(), "dense", best[0], ctx.be.device_name());
  log_latency(ctx.sink, ctx.step, ctx.wall_ms(), label, best[1], ctx.be.device_name());
  for (size_t i = 0; i < best[0].size(); ++i)
    if (best[1][i].ms_per_batch > 0)
      ctx.sink.sample(speedup_prefix + "/speedup_b" + std::to_string(best[0][i].batch), ctx.step, ctx.wall_ms(),
                      best[0][i].ms_per_batch / best[1][i].ms_per_batch);
}

}  // namespace lathe
