// Structured prune stage: dense baseline -> remove filters/neurons -> fine-tune the smaller model ->
// accuracy, FLOPs, parameters, real file size, and dense vs pruned latency measured in this run.
#include "engine/run/stage_prune_structured.h"

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <filesystem>

#include "engine/nn/model_io.h"
#include "engine/run/latency.h"

namespace lathe {

StructuredOptions structured_options_from_config(const PruneConfig& pc) {
  StructuredOptions o;
  if (pc.method == PruneMethod::l1_structured)
    o.norm = StructuredNorm::l1;
  else if (pc.method == PruneMethod::l2_structured)
    o.norm = StructuredNorm::l2;
  else
    throw ConfigError("prune.method: \"" + std::string(enum_name(pc.method)) +
                      "\" is not structured pruning; allowed here: l1-structured, l2-structured");
  o.scope = pc.scope == PruneScope::global ? StructuredScope::global : StructuredScope::layer;
  o.ratio = pc.ratio;
  o.exclude = pc.exclude;
  return o;
}

void prepare_structured_prune_stage(const ExperimentConfig& cfg, Model& model, Backend& backend) {
  if (cfg.prune.method != PruneMethod::l1_structured && cfg.prune.method != PruneMethod::l2_structured)
    return;
  // A full plan and rebuild on the untrained weights: every check the real run makes, made now.
  prune_structured(model, backend, structured_options_from_config(cfg.prune));
}

namespace {

std::vector<int64_t> sample_shape(const StageContext& ctx) { return {1, ctx.data.test.rows, ctx.data.test.cols}; }

/// Evaluates ctx.model and logs only `<prefix>/test_accuracy` and `<prefix>/test_loss`: test/* at
/// this step already holds the training's last evaluation.
EvalResult evaluate_as(StageContext& ctx, const std::string& prefix) {
  const EvalResult ev = evaluate(*ctx.model, ctx.be, ctx.data.test, 500);
  ctx.sink.sample(prefix + "/test_accuracy", ctx.step, ctx.wall_ms(), ev.accuracy);
  ctx.sink.sample(prefix + "/test_loss", ctx.step, ctx.wall_ms(), ev.loss);
  return ev;
}

/// Saves `model` at `path`, or, with no path, to a temporary file that is removed: either way the
/// exact serialized size.
int64_t saved_bytes(Model& model, Backend& be, const std::string& path,
                    const std::map<std::string, std::string>& metadata) {
  if (!path.empty())
    return save_model(model, be, path, metadata);
  static std::atomic<int> counter{0};
  const std::string tmp = (std::filesystem::temp_directory_path() / ("lathe-structured-" + std::to_string(getpid()) +
                                                                     "-" + std::to_string(counter++) + ".safetensors"))
                              .string();
  const int64_t bytes = save_model(model, be, tmp, metadata);
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  return bytes;
}

/// Dense and pruned latency, alternating dense/pruned twice and keeping each batch size's faster
/// median, so a burst of load from other processes does not land on one model only.
void measure_both(StageContext& ctx, Model& dense, Model& pruned) {
  std::vector<LatencyResult> best_dense, best_pruned;
  auto keep_faster = [](std::vector<LatencyResult>& best, const std::vector<LatencyResult>& now) {
    if (best.empty()) {
      best = now;
      return;
    }
    for (size_t i = 0; i < best.size(); ++i)
      if (now[i].ms_per_batch < best[i].ms_per_batch)
        best[i] = now[i];
  };
  for (int round = 0; round < 2 && !ctx.stop_requested(); ++round) {
    keep_faster(best_dense, measure_model_latency(dense, ctx.be, sample_shape(ctx)));
    keep_faster(best_pruned, measure_model_latency(pruned, ctx.be, sample_shape(ctx)));
  }
  if (best_dense.empty())
    return;
  const std::string device = ctx.be.device_name();
  log_latency(ctx.sink, ctx.step, ctx.wall_ms(), "dense", best_dense, device);
  log_latency(ctx.sink, ctx.step, ctx.wall_ms(), "pruned", best_pruned, device);
  for (size_t i = 0; i < best_dense.size(); ++i)
    if (best_pruned[i].ms_per_batch > 0)
      ctx.sink.sample("prune/speedup_b" + std::to_string(best_dense[i].batch), ctx.step, ctx.wall_ms(),
                      best_dense[i].ms_per_batch / best_pruned[i].ms_per_batch);
}

}  // namespace

void run_structured_prune_stage(StageContext& ctx) {
  const PruneConfig& pc = ctx.cfg.prune;
  const StructuredOptions options = structured_options_from_config(pc);
  if (ctx.stop_requested())
    return;
  const std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"lathe_model", std::string(enum_name(ctx.cfg.model.zoo))}, {"lathe_run", ctx.run_id}};

  // ---- the dense baseline, in this run ----
  const EvalResult dense_eval = evaluate_as(ctx, "dense");
  auto dense_meta = meta;
  dense_meta["lathe_kind"] = "dense";
  const int64_t dense_bytes = saved_bytes(*ctx.model, ctx.be, "", dense_meta);
  ctx.sink.sample("model/dense_bytes", ctx.step, ctx.wall_ms(), static_cast<double>(dense_bytes));
  ctx.sink.sample("model/dense_params", ctx.step, ctx.wall_ms(), static_cast<double>(ctx.model->param_count()));

  // ---- remove filters and neurons: a new, smaller dense model ----
  StructuredReport report;
  std::unique_ptr<Model> pruned = prune_structured(*ctx.model, ctx.be, options, &report);
  nlohmann::json layers = nlohmann::json::array();
  nlohmann::json channels = nlohmann::json::object();
  for (const StructuredLayerChange& l : report.layers) {
    layers.push_back({{"layer", l.name},
                      {"kind", l.kind},
                      {"before", l.channels_before},
                      {"after", l.channels_after},
                      {"not_pruned_because", l.not_pruned_because}});
    channels[l.name] = l.channels_after;
    ctx.sink.sample("prune/channels/" + l.name, ctx.step, ctx.wall_ms(), static_cast<double>(l.channels_after));
  }
  ctx.sink.event("prune", {{"method", std::string(enum_name(pc.method))},
                           {"scope", std::string(enum_name(pc.scope))},
                           {"ratio", pc.ratio},
                           {"exclude", pc.exclude},
                           {"residual_groups", "shared ranking: mean of per-producer normalised norms"},
                           {"layers", layers},
                           {"flops_before", report.flops_before},
                           {"flops_after", report.flops_after},
                           {"params_before", report.params_before},
                           {"params_after", report.params_after}});
  ctx.sink.sample("prune/flops_ratio", ctx.step, ctx.wall_ms(), report.flops_ratio());
  ctx.sink.sample("prune/params_ratio", ctx.step, ctx.wall_ms(),
                  static_cast<double>(report.params_after) / static_cast<double>(report.params_before));
  ctx.sink.sample("model/params", ctx.step, ctx.wall_ms(), static_cast<double>(report.params_after));
  ctx.sink.sample("model/flops_per_sample", ctx.step, ctx.wall_ms(), static_cast<double>(report.flops_after));

  std::unique_ptr<Model> dense = std::move(ctx.model);
  ctx.model = std::move(pruned);
  evaluate_as(ctx, "pruned_before_finetune");
  if (ctx.stop_requested())
    return;

  // ---- fine-tune the smaller model (a fresh optimizer: train_phase makes one) ----
  EvalResult pruned_eval;
  if (pc.finetune_epochs > 0) {
    const TrainPhase phase =
        fine_tuning_phase(ctx, "finetune", static_cast<int>(pc.finetune_epochs), pc.finetune_lr_scale);
    ctx.total_steps += ctx.steps_per_epoch(phase.loader) * phase.epochs;
    const PhaseResult tuned = train_phase(ctx, phase);
    if (tuned.stopped || ctx.stop_requested())
      return;
    pruned_eval = tuned.last_eval;
  }
  if (pruned_eval.samples > 0)
    ctx.sink.sample("pruned/test_accuracy", ctx.step, ctx.wall_ms(), pruned_eval.accuracy);
  else
    pruned_eval = evaluate_and_log(ctx, "pruned");
  ctx.sink.sample("prune/accuracy_drop_pt", ctx.step, ctx.wall_ms(),
                  100.0 * (dense_eval.accuracy - pruned_eval.accuracy));

  // ---- the smaller model on disk: its real size ----
  auto pruned_meta = meta;
  pruned_meta["lathe_kind"] = "pruned";
  pruned_meta["lathe_pruned_channels"] = channels.dump();  // out channels per layer, to rebuild the graph
  const std::string path = ctx.run_dir.empty() ? "" : ctx.run_dir + "/model.pruned.safetensors";
  const int64_t bytes = saved_bytes(*ctx.model, ctx.be, path, pruned_meta);
  if (!path.empty())
    ctx.sink.event("artifact", {{"kind", "pruned"}, {"path", path}, {"bytes", bytes}});
  ctx.sink.sample("model/dense_bytes", ctx.step, ctx.wall_ms(), static_cast<double>(dense_bytes));
  ctx.sink.sample("model/bytes", ctx.step, ctx.wall_ms(), static_cast<double>(bytes));
  ctx.sink.sample("prune/bytes_ratio", ctx.step, ctx.wall_ms(),
                  static_cast<double>(bytes) / static_cast<double>(dense_bytes));

  // ---- dense vs pruned latency, measured now, on this device ----
  begin_phase(ctx, "benchmark");
  measure_both(ctx, *dense, *ctx.model);
}

}  // namespace lathe
