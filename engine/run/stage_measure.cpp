// The measurements the model-replacing stages share (stage_measure.h).
#include "engine/run/stage_measure.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>

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

bool fine_tune_replacement(StageContext& ctx, std::unique_ptr<Model> replacement, std::unique_ptr<Model>& dense,
                           const std::string& label, const std::string& prefix, int64_t epochs, double lr_scale,
                           double dense_accuracy) {
  dense = std::move(ctx.model);
  ctx.model = std::move(replacement);
  evaluate_as(ctx, label + "_before_finetune");
  if (ctx.stop_requested())
    return false;
  EvalResult eval;
  if (epochs > 0) {
    const TrainPhase phase = fine_tuning_phase(ctx, "finetune", static_cast<int>(epochs), lr_scale);
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
  ctx.sink.sample(prefix + "/accuracy_drop_pt", ctx.step, ctx.wall_ms(), 100.0 * (dense_accuracy - eval.accuracy));
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
