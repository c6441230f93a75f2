// The quantize stage: calibration, INT8 model(s), evaluation, file, latency (see stage_quantize.h).
#include "engine/run/stage_quantize.h"

#include <algorithm>
#include <chrono>

#include "engine/compress/quant/calibration_set.h"
#include "engine/compress/quant/int8_graph.h"
#include "engine/compress/quant/int8_host_model.h"
#include "engine/compress/quant/int8_model.h"
#include "engine/compress/quant/mixed_precision_search.h"
#include "engine/compress/quant/qat.h"
#include "engine/core/error.h"
#include "engine/core/timing.h"
#include "engine/run/int8_onnx.h"
#include "engine/run/latency.h"
#include "engine/run/stage_registry.h"

namespace lathe {

namespace {

CalibrationMethod calibration_method_of(QuantCalibration c) {
  switch (c) {
    case QuantCalibration::minmax:
      return CalibrationMethod::minmax;
    case QuantCalibration::percentile:
      return CalibrationMethod::percentile;
    case QuantCalibration::entropy:
      return CalibrationMethod::entropy;
    case QuantCalibration::mse:
      return CalibrationMethod::mse;
  }
  return CalibrationMethod::minmax;
}

}  // namespace

namespace {

/// Where the INT8 models run. On a CPU backend: ctx.model and ctx.be, Int8Model::forward (oneDNN).
/// On a GPU backend: the same model and backend (Int8Model on the backend's INT8 ops), or, for
/// what that backend does not cover (`cpu_reason`), a host copy of the model on a CPU backend.
struct Int8Placement {
  Model* model = nullptr;  ///< the f32 model the INT8 models are built from (and calibrated on)
  Backend* be = nullptr;   ///< its backend
  bool on_device = false;  ///< INT8 runs on be's GPU (Int8Model::refusal() was empty)
  std::string cpu_reason;  ///< on a GPU run: why INT8 runs on the CPU ("" otherwise)
  std::unique_ptr<Backend> host_be;
  std::unique_ptr<Model> host_model;
};

/// Test-set accuracy and mean cross-entropy of an Int8Model. On the CPU its logits are host f32 and
/// the CPU backend's softmax cross-entropy scores them, as evaluate() scores the f32 model; on a
/// GPU the device executor's logits are scored by the GPU backend.
EvalResult evaluate_int8(Int8Model& q, Int8Placement& at, const Dataset& data, int64_t batch_size) {
  Backend& be = *at.be;
  return evaluate_logits(be, data, batch_size, [&](const Batch& b, DeviceBatch& db) {
    return q.forward(at.on_device ? db.images : b.images);
  });
}

const LatencyResult* at_batch(const std::vector<LatencyResult>& v, int64_t b) {
  for (const LatencyResult& r : v)
    if (r.batch == b)
      return &r;
  return nullptr;
}

/// Accuracy-driven mixed precision (mixed_precision_search.h) on the test set: logs every point as
/// quant/search/* at steps 0, 1, ... (the configuration's index) with an event naming its f32
/// layers, and the outcome; returns the best configuration's model.
std::unique_ptr<Int8Model> search_mixed_precision_for(StageContext& ctx, Int8Placement& at,
                                                      const ActivationParams& acts, const Int8ModelOptions& mo,
                                                      double f32_accuracy) {
  const QuantConfig& qc = ctx.cfg.quant;
  const std::vector<int64_t> sample = ctx.data.test.sample_shape();
  LatencyOptions lo;
  lo.batches = {256};
  lo.min_seconds = 0.15;
  MixedPrecisionSearch search;
  search.f32_accuracy = f32_accuracy;
  search.max_drop_points = qc.max_accuracy_drop;
  search.options = mo;
  search.evaluate = [&](Int8Model& q) { return evaluate_int8(q, at, ctx.data.test, 500).accuracy; };
  search.ms_per_batch = [&](Int8Model& q) {
    return measure_latency(
               *at.be, sample, [&](const Tensor& x) { q.forward(x); }, lo)
        .at(0)
        .ms_per_batch;
  };
  search.on_point = [&](const MixedPrecisionPoint& p, int i) {
    const double ms = ctx.wall_ms();
    ctx.sink.sample("quant/search/test_accuracy", i, ms, p.accuracy);
    ctx.sink.sample("quant/search/bytes", i, ms, static_cast<double>(p.bytes));
    ctx.sink.sample("quant/search/b256_ms", i, ms, p.ms_per_batch);
    ctx.sink.sample("quant/search/f32_layers", i, ms, static_cast<double>(p.keep_f32.size()));
    ctx.sink.event("quant/search_point",
                   {{"index", i},
                    {"f32_layers", std::vector<std::string>(p.keep_f32.begin(), p.keep_f32.end())},
                    {"test_accuracy", p.accuracy},
                    {"bytes", p.bytes},
                    {"b256_ms", p.ms_per_batch},
                    {"meets_goal", p.meets_goal}});
  };
  const MixedPrecisionResult r = search_mixed_precision(*at.model, *at.be, acts, search);
  const MixedPrecisionPoint& b = r.points[r.best];
  nlohmann::json sens = nlohmann::json::object();
  for (const auto& [layer, acc] : r.sensitivity)
    sens[layer] = acc;
  ctx.sink.event("quant/mixed_precision",
                 {{"goal_met", r.goal_met},
                  {"max_accuracy_drop", qc.max_accuracy_drop},
                  {"f32_test_accuracy", f32_accuracy},
                  {"chosen", r.best},
                  {"f32_layers", std::vector<std::string>(b.keep_f32.begin(), b.keep_f32.end())},
                  {"points", r.points.size()},
                  {"sensitivity_f32_alone", sens}});
  const int64_t step = ctx.step;
  ctx.sink.sample("quant/mixed/goal_met", step, ctx.wall_ms(), r.goal_met ? 1.0 : 0.0);
  ctx.sink.sample("quant/mixed/f32_layers", step, ctx.wall_ms(), static_cast<double>(b.keep_f32.size()));
  ctx.sink.sample("quant/mixed/points", step, ctx.wall_ms(), static_cast<double>(r.points.size()));
  Int8ModelOptions o = mo;
  o.keep_f32 = b.keep_f32;
  return std::make_unique<Int8Model>(*at.model, *at.be, acts, o);
}

/// The INT8 model the stage keeps and its test evaluation.
struct Quantized {
  std::unique_ptr<Int8Model> model;
  EvalResult eval;
  ActivationParams acts;  ///< the calibrated ranges it uses (empty for dynamic)
};

/// Whether this run resumes inside QAT's fine-tuning: the stage's state says QAT was running, and
/// the checkpoint resume_training loaded is of this stage's phase.
bool resuming_qat(const StageContext& ctx, const QatResumeState& qat) {
  return qat.running && ctx.resume && ctx.resume->stage == "quant";
}

/// Static PTQ (steps 1-2 of the header) and, for qat, step 3. `step` is the stage's logging step
/// (QAT moves it past its phase). Returns an empty model when a stop was requested.
Quantized quantize_static(StageContext& ctx, Int8Placement& at, const Int8ModelOptions& mo, int64_t& step,
                          QatResumeState& qat) {
  const QuantConfig& qc = ctx.cfg.quant;
  Model& model = *at.model;
  Backend& be = *at.be;
  auto log = [&](const std::string& metric, double v) { ctx.sink.sample(metric, step, ctx.wall_ms(), v); };
  Quantized out;
  // Resumed inside QAT's fine-tuning: steps 1-2 and the PTQ figures are in the store; the plan is
  // rebuilt from the saved ranges on the checkpoint's weights (the layers and input parameters it
  // gives the fake quantization depend on the ranges only).
  const bool resuming = resuming_qat(ctx, qat);
  if (resuming) {
    out.acts = qat.acts;
    out.model = std::make_unique<Int8Model>(model, be, out.acts, mo);
  } else {
    // 1. calibration set and the one statistics pass
    const auto t_cal = std::chrono::steady_clock::now();
    CalibrationSetOptions co;
    co.samples = qc.calib_samples;
    co.batch_size = qc.calib_batch_size;
    co.outlier_fraction = qc.outlier_fraction;
    co.seed = ctx.cfg.seed;
    const CalibrationSet set = select_calibration_set(model, be, ctx.data.train, co);
    const ActivationStats stats =
        collect_activation_stats(model, be, gather(ctx.data.train, set.indices), co.batch_size);
    log("quant/calib_samples", static_cast<double>(stats.samples));
    log("quant/calib_outliers", static_cast<double>(set.outliers));
    log("quant/calib_seconds", seconds_since(t_cal));
    if (ctx.stop_requested())
      return out;

    // 2. the INT8 model of each method asked for, from the same statistics
    const CalibrationMethod chosen = calibration_method_of(qc.calibration);
    std::vector<CalibrationMethod> methods{chosen};
    if (qc.compare_calibrators)
      methods = {CalibrationMethod::minmax, CalibrationMethod::percentile, CalibrationMethod::entropy,
                 CalibrationMethod::mse};
    out.acts = derive_activation_params(stats, chosen, qc.percentile);
    for (CalibrationMethod m : methods) {
      if (ctx.stop_requested())
        return {};
      const std::string name(calibration_method_name(m));
      auto q = std::make_unique<Int8Model>(
          model, be, m == chosen ? out.acts : derive_activation_params(stats, m, qc.percentile), mo);
      const EvalResult ev = evaluate_int8(*q, at, ctx.data.test, 500);
      log("quant/" + name + "/test_accuracy", ev.accuracy);
      log("quant/" + name + "/test_loss", ev.loss);
      if (m == chosen) {
        out.model = std::move(q);
        out.eval = ev;
      }
    }
    ctx.sink.event("quant/calibrator",
                   {{"method", std::string(enum_name(qc.calibration))}, {"percentile", qc.percentile}});
    if (qc.mode != QuantMode::qat)
      return out;
  }  // not resuming

  // 3. QAT: fine-tune with fake quantization where the INT8 plan quantizes, from the PTQ ranges,
  // then build the real INT8 model again from the fine-tuned weights (same activation ranges).
  const int layers = attach_fake_quant(model, *out.model);
  if (!resuming) {
    log("quant/ptq_test_accuracy", out.eval.accuracy);
    ctx.sink.event("qat", {{"epochs", qc.qat_epochs}, {"lr_scale", qc.qat_lr_scale}, {"fake_quant_layers", layers}});
  }
  if (qc.qat_epochs > 0) {
    TrainPhase phase = fine_tuning_phase(ctx, "qat", static_cast<int>(qc.qat_epochs), qc.qat_lr_scale);
    phase.stage = "quant";
    phase.checkpointed = true;  // through ctx.checkpoint, with the ranges in the stage's state
    qat.running = true;
    qat.acts = out.acts;
    ctx.total_steps += ctx.steps_per_epoch(phase.loader) * phase.epochs;
    train_phase(ctx, phase);
    qat.running = false;
  }
  // The fake-quantized f32 model's accuracy: what QAT simulated (the real INT8 figure follows).
  evaluate_and_log(ctx, "qat_fake_quant");
  detach_fake_quant(model);
  if (ctx.stop_requested())
    return {};
  step = ++ctx.step;
  out.model = std::make_unique<Int8Model>(model, be, out.acts, mo);
  out.eval = evaluate_int8(*out.model, at, ctx.data.test, 500);
  return out;
}

/// Decides where INT8 runs (see Int8Placement) and, on a GPU backend, says so in a quant/device
/// event. A GPU plan is probed with placeholder ranges: only its steps matter, not their values.
Int8Placement place_int8(StageContext& ctx, const Int8ModelOptions& mo) {
  Int8Placement at;
  at.model = ctx.model.get();
  at.be = &ctx.be;
  if (ctx.be.device().is_cpu())
    return at;
  const QuantConfig& qc = ctx.cfg.quant;
  if (qc.mode == QuantMode::ptq_dynamic) {
    at.cpu_reason =
        "quant.mode ptq-dynamic: per-batch ranges and the f32 rescale between layers are not on the GPU "
        "INT8 executor";
  } else if (qc.mixed_precision) {
    at.cpu_reason = "quant.mixed_precision: layers kept in f32 inside the INT8 plan are not on the GPU INT8 executor";
  } else {
    ActivationParams placeholder;
    for (const std::string& tap : int8_activation_taps(*ctx.model))
      placeholder[tap] = make_quant_params(0.0, 1.0, 8, /*symmetric=*/false, /*is_signed=*/false);
    const Int8Model probe(*ctx.model, ctx.be, placeholder, mo);
    at.cpu_reason = probe.refusal();
  }
  at.on_device = at.cpu_reason.empty();
  nlohmann::json ev{{"f32_device", ctx.be.device_name()}};
  if (at.on_device) {
    ev["int8_device"] = ctx.be.device_name();
    ev["int8_executor"] = "Int8Model on the cuda backend (cuBLASLt int8 GEMM, 8-bit weights: exact int32 accumulation)";
  } else {
    // Explicit placement, not a silent fallback: a host copy of the model, INT8 on oneDNN.
    at.host_be = make_backend("cpu");
    at.host_model = int8_host_model(*ctx.model, ctx.be, *at.host_be);
    at.model = at.host_model.get();
    at.be = at.host_be.get();
    ev["int8_device"] = at.host_be->device_name();
    ev["int8_executor"] = std::string("Int8Model on the CPU (oneDNN int8, ") + cpu_int8_isa_name() + ")";
    ev["cpu_reason"] = at.cpu_reason;
  }
  ctx.sink.event("quant/device", ev);
  return at;
}

/// output.onnx on a quantizing run: the INT8 model as QDQ ONNX (model_int8.onnx) beside the f32
/// model.onnx the trainer writes; a dynamic plan has no fixed activation scales and says so instead.
void save_int8_onnx(StageContext& ctx, const Int8Model& best, Model& f32, Backend& be) {
  if (best.dynamic()) {
    ctx.sink.event("note", {{"text",
                             "output.onnx: no INT8 ONNX file for ptq-dynamic (activation scales are taken per "
                             "batch); model.onnx is the f32 model"}});
    return;
  }
  const std::string path = ctx.run_dir + "/model_int8.onnx";
  const int64_t bytes = export_onnx_qdq(f32, be, qdq_plan_of(best), path,
                                        {.metadata = {{"lathe_run", ctx.run_id}, {"lathe_precision", "int8-qdq"}}});
  ctx.sink.event("artifact", {{"kind", "onnx-int8"}, {"path", path}, {"bytes", bytes}, {"precision", "int8 (QDQ)"}});
}

}  // namespace

void prepare_quantize_stage(const ExperimentConfig& cfg, Model& model, Backend& backend) {
  const QuantMode mode = cfg.quant.mode;
  if (mode == QuantMode::none)
    return;
  // On a GPU backend, static PTQ runs INT8 on the GPU and ptq-dynamic / mixed precision on a host
  // copy (run_quantize_stage says which in a quant/device event); QAT trains with fake quantization
  // on host tensors only (fake_quant.h).
  if (!backend.device().is_cpu() && mode == QuantMode::qat)
    throw ConfigError("quant.mode qat: fake quantization runs on host tensors only; set compute.backend to cpu, got " +
                      backend.name());
  int8_activation_taps(model);  // throws ConfigError naming a node the executor does not cover
  if (mode == QuantMode::qat || mode == QuantMode::ptq_dynamic) {
    // QAT fake-quantizes the f32 layers as they are (a folded BatchNorm would change the weights it
    // sees) and the dynamic plan is sequential: both cover chains of the classic layers only.
    bool graph = !is_chain(model);
    for (size_t i = 0; i < model.size(); ++i)
      graph = graph || model.layer(i).kind() == "batchnorm2d" || model.layer(i).kind() == "add";
    if (graph)
      throw ConfigError(std::string("quant.mode ") + std::string(enum_name(mode)) +
                        ": covers sequential models without batchnorm2d or add; this model has them (allowed for it: "
                        "ptq-static)");
  }
}

void run_quantize_stage(StageContext& ctx, QatResumeState* qat_state) {
  const QuantConfig& qc = ctx.cfg.quant;
  if (qc.mode == QuantMode::none || ctx.stop_requested())
    return;
  if (ctx.comm->rank() > 0 && qc.mode != QuantMode::qat) {
    // Calibration, INT8 evaluation, the file and the latency are rank 0's (the one that records
    // them): without QAT's data-parallel fine-tuning the other ranks have nothing to add. The step
    // moves as on rank 0, so a later stage's phases start at the same step on every rank.
    ++ctx.step;
    return;
  }
  QatResumeState local;
  QatResumeState& qat = qat_state ? *qat_state : local;
  const bool resuming = resuming_qat(ctx, qat);
  if (!resuming)
    qat = {};
  Model& model = *ctx.model;
  Backend& be = ctx.be;
  int64_t step = resuming ? ctx.step : ++ctx.step;
  auto log = [&](const std::string& metric, double v) { ctx.sink.sample(metric, step, ctx.wall_ms(), v); };

  // f32 reference accuracy of the model as it is now (after pruning, when that ran); a resumed QAT
  // has it from its checkpoint (the weights have moved since).
  EvalResult f32;
  if (resuming) {
    f32.accuracy = qat.f32_accuracy;
  } else {
    begin_phase(ctx, "calibrate");
    f32 = evaluate(model, be, ctx.data.test, 500);
    log("quant/f32_test_accuracy", f32.accuracy);
    qat.f32_accuracy = f32.accuracy;
  }

  Int8ModelOptions mo;
  mo.per_channel_weights = qc.granularity == WeightGranularity::per_channel;
  mo.dynamic_activations = qc.mode == QuantMode::ptq_dynamic;
  Int8Placement at = place_int8(ctx, mo);
  if (at.on_device)  // the GPU's int8 GEMM is exact with 8-bit weights (the 7-bit rule is oneDNN's on old CPUs)
    mo.weight_range = Int8WeightRange::full;
  Quantized q;
  if (qc.mode == QuantMode::ptq_dynamic) {
    // no calibration: ranges from each batch
    q.model = std::make_unique<Int8Model>(*at.model, *at.be, q.acts, mo);
    q.eval = evaluate_int8(*q.model, at, ctx.data.test, 500);
    ctx.sink.event("quant/calibrator", {{"method", "dynamic (per batch, symmetric max |x|)"}});
  } else {
    q = quantize_static(ctx, at, mo, step, qat);
    if (!q.model)
      return;
  }
  std::unique_ptr<Int8Model>& best = q.model;
  EvalResult& best_eval = q.eval;
  if (qc.mixed_precision) {
    if (ctx.stop_requested())
      return;
    best = search_mixed_precision_for(ctx, at, q.acts, mo, f32.accuracy);
    best_eval = evaluate_int8(*best, at, ctx.data.test, 500);
  }
  log("quant/test_accuracy", best_eval.accuracy);
  log("quant/test_loss", best_eval.loss);
  // The run ends with the INT8 model: test/* follow it, as model/bytes does (INT8 file).
  log("test/accuracy", best_eval.accuracy);
  log("test/loss", best_eval.loss);
  log("quant/accuracy_drop", 100.0 * (f32.accuracy - best_eval.accuracy));
  log("quant/weight_bits", best->weight_bits());
  nlohmann::json quant_event{
      {"mode", std::string(enum_name(qc.mode))},
      {"calibration", std::string(enum_name(qc.calibration))},
      {"granularity", std::string(enum_name(qc.granularity))},
      {"cpu_isa", cpu_int8_isa_name()},
      {"weight_bits", best->weight_bits()},
      {"weight_bits_note", cpu_int8_dot_is_exact() ? "8-bit weights: the CPU has an exact int8 dot product (VNNI)"
                                                   : "7-bit weights: without VNNI oneDNN's int8 dot product "
                                                     "saturates s16 pairs (see int8_cpu.h)"},
      {"plan", best->plan()}};
  if (at.on_device) {
    quant_event.erase("cpu_isa");
    quant_event["weight_bits_note"] = "8-bit weights: the GPU's int8 GEMM accumulates exactly in int32";
  }
  if (!be.device().is_cpu())
    quant_event["int8_device"] = at.be->device_name();
  ctx.sink.event("quant", quant_event);

  // 3. the files: f32 and INT8 sizes, both real files where the run writes a folder
  int64_t f32_bytes = 0, int8_bytes = 0;
  if (!ctx.run_dir.empty()) {
    f32_bytes = save_model_artifact(ctx, "model_f32.safetensors", "model-f32");
    const std::string path = ctx.run_dir + "/model_int8.safetensors";
    std::map<std::string, std::string> meta{{"lathe_run", ctx.run_id},
                                            {"calibration", std::string(enum_name(qc.calibration))}};
    if (!best->dynamic())
      meta["qdq"] = qdq_plan_metadata(*best);  // lets export-model write the QDQ graph later
    int8_bytes = best->save(path, meta);
    ctx.sink.event("artifact", {{"kind", "model-int8"}, {"path", path}, {"bytes", int8_bytes}});
    if (ctx.cfg.output.onnx)
      save_int8_onnx(ctx, *best, *at.model, *at.be);
  } else {
    f32_bytes = model.param_bytes();
    int8_bytes = best->serialized_bytes();
  }
  log("model/f32_bytes", static_cast<double>(f32_bytes));
  log("model/int8_bytes", static_cast<double>(int8_bytes));
  log("model/bytes", static_cast<double>(int8_bytes));
  log("quant/bytes_ratio", static_cast<double>(int8_bytes) / static_cast<double>(std::max<int64_t>(f32_bytes, 1)));
  if (ctx.stop_requested())
    return;

  // 4. latency side by side, same process, same inputs' shape
  begin_phase(ctx, "benchmark");
  const std::vector<int64_t> sample = ctx.data.test.sample_shape();
  const auto lat_f32 = measure_model_latency(model, be, sample);
  log_latency(ctx.sink, step, ctx.wall_ms(), "f32", lat_f32, be.device_name());
  std::vector<LatencyResult> lat_int8;
  if (at.on_device) {
    lat_int8 = measure_latency(be, sample, [&](const Tensor& x) { best->forward(x); });
    log_latency(ctx.sink, step, ctx.wall_ms(), "int8", lat_int8, be.device_name() + " (" + best->kernels() + ")");
  } else {
    Backend& int8_be = *at.be;  // ctx.be, or the host CPU backend on a GPU run
    lat_int8 = measure_latency(int8_be, sample, [&](const Tensor& x) { best->forward(x); });
    log_latency(ctx.sink, step, ctx.wall_ms(), "int8", lat_int8,
                int8_be.device_name() + " (oneDNN int8, " + cpu_int8_isa_name() + ")" +
                    (at.cpu_reason.empty() ? "" : "; on the CPU because " + at.cpu_reason));
  }
  for (int64_t b : {int64_t{1}, int64_t{256}}) {
    const LatencyResult *f = at_batch(lat_f32, b), *q = at_batch(lat_int8, b);
    if (f && q && q->ms_per_batch > 0)
      log("quant/speedup_b" + std::to_string(b), f->ms_per_batch / q->ms_per_batch);
  }
}

namespace {

using nlohmann::json;

json quant_params_json(const QuantParams& p) {
  return {{"scale", p.scale}, {"zero_point", p.zero_point}, {"axis", p.axis},
          {"bits", p.bits},   {"symmetric", p.symmetric},   {"is_signed", p.is_signed}};
}

QuantParams quant_params_from(const json& j) {
  QuantParams p;
  p.scale = j.at("scale").get<std::vector<float>>();
  p.zero_point = j.at("zero_point").get<std::vector<int32_t>>();
  p.axis = j.at("axis").get<int>();
  p.bits = j.at("bits").get<int>();
  p.symmetric = j.at("symmetric").get<bool>();
  p.is_signed = j.at("is_signed").get<bool>();
  p.validate();
  return p;
}

/// The quantize stage (stage.h): section quant, after pruning. A checkpoint during QAT's
/// fine-tuning saves the activation ranges (QatResumeState); nothing else needs saving (the
/// calibration before QAT is redone only by a run that starts the stage again).
class QuantizeStage final : public Stage {
 public:
  std::string section() const override { return "quant"; }
  int order() const override { return stage_order::quantize; }

  std::vector<FieldSpec> schema_fields() const override {
    using namespace schema;
    std::vector<FieldSpec> f;
    f.push_back(enumeration("quant.mode", {"none", "ptq-static", "ptq-dynamic", "qat"},
                            "INT8 quantization after training: static PTQ (activation ranges calibrated once), dynamic "
                            "(activation ranges per batch at run time, f32 between layers), qat (fake-quantized "
                            "fine-tuning, then real INT8); none = no "
                            "quantization stage"));
    // Where the engine reads each knob (run_quantize_stage / quantize_static): every mode but none
    // quantizes the weights; calibration is static PTQ's and QAT's (ptq-dynamic takes each batch's
    // ranges); the percentile is read for percentile calibration or when every calibrator is compared.
    const auto quantizing = [](FieldSpec spec) {
      return only_when(std::move(spec), "quant.mode", {"ptq-static", "ptq-dynamic", "qat"});
    };
    const auto calibrated = [](FieldSpec spec) {
      return only_when(std::move(spec), "quant.mode", {"ptq-static", "qat"});
    };
    f.push_back(calibrated(enumeration("quant.calibration", {"minmax", "percentile", "entropy", "mse"},
                                       "How activation ranges are calibrated (static PTQ and QAT's start)")));
    f.push_back(only_when(
        calibrated(number("quant.percentile", 99.99, 0, 100, "percentile calibration: kept percentile", true)),
        {one_of("quant.calibration", {"percentile"}), one_of("quant.compare_calibrators", {true})}));
    f.push_back(quantizing(
        enumeration("quant.granularity", {"per-tensor", "per-channel"}, "Weight scale granularity", "per-channel")));
    f.push_back(calibrated(integer("quant.calib_samples", 512, 1, kInf, "Training images used for calibration")));
    f.push_back(calibrated(integer("quant.calib_batch_size", 64, 1, kInf, "Batch size of the calibration passes")));
    f.push_back(calibrated(number("quant.outlier_fraction", 0.05, 0, 1,
                                  "Fraction of the calibration set taken from the highest-loss training images")));
    f.push_back(calibrated(
        boolean("quant.compare_calibrators", false,
                "Evaluate every calibration method from the same statistics (quant/<method>/test_accuracy)")));
    const auto qat = [](FieldSpec spec) { return only_when(std::move(spec), "quant.mode", {"qat"}); };
    f.push_back(qat(integer("quant.qat_epochs", 1, 0, kInf,
                            "qat: fine-tuning epochs with fake quantization (straight-through estimator), from the PTQ "
                            "ranges of quant.calibration")));
    f.push_back(qat(number("quant.qat_lr_scale", 0.1, 0, 10, "qat: learning rate = train.optimizer.lr x this", true)));
    f.push_back(quantizing(
        boolean("quant.mixed_precision", false,
                "Accuracy-driven mixed precision: keep the most sensitive linear/conv layers in f32 until the "
                "INT8 model is within quant.max_accuracy_drop of f32 (every configuration tried is recorded)")));
    f.push_back(only_when(quantizing(number("quant.max_accuracy_drop", 1.0, 0, 100,
                                            "Mixed precision goal: test-accuracy points the INT8 model may lose "
                                            "against f32")),
                          {one_of("quant.mixed_precision", {true})}));
    return f;
  }

  void parse(const nlohmann::json& j, ExperimentConfig& c) const override {
    using nlohmann::json;
    const json& q = j.at("quant");
    c.quant.mode = parse_choice<QuantMode, 4>(q.at("mode"), "quant.mode");
    c.quant.calibration = parse_choice<QuantCalibration, 4>(q.at("calibration"), "quant.calibration");
    c.quant.percentile = q.at("percentile").get<double>();
    c.quant.granularity = parse_choice<WeightGranularity, 2>(q.at("granularity"), "quant.granularity");
    c.quant.calib_samples = q.at("calib_samples").get<int64_t>();
    c.quant.calib_batch_size = q.at("calib_batch_size").get<int64_t>();
    c.quant.outlier_fraction = q.at("outlier_fraction").get<double>();
    c.quant.compare_calibrators = q.at("compare_calibrators").get<bool>();
    c.quant.qat_epochs = q.at("qat_epochs").get<int64_t>();
    c.quant.qat_lr_scale = q.at("qat_lr_scale").get<double>();
    c.quant.mixed_precision = q.at("mixed_precision").get<bool>();
    c.quant.max_accuracy_drop = q.at("max_accuracy_drop").get<double>();
  }

  bool enabled(const ExperimentConfig& cfg) const override { return cfg.quant.mode != QuantMode::none; }

  void plan_estimated(const ExperimentConfig& cfg, const PlanInputs& in,
                      std::vector<PlannedPhase>& plan) const override {
    // run_quantize_stage logs its results one step on; the statistics pass over the calibration
    // set, then the INT8 model's test pass.
    plan.push_back({"calibrate", 1, forward_steps(cfg.quant.calib_samples, cfg.train.batch_size) + in.eval_steps});
    if (cfg.quant.mode == QuantMode::qat)
      plan.push_back({"qat", in.steps_per_epoch * cfg.quant.qat_epochs + 1});  // + the step of the rebuilt INT8 model
    plan.push_back(benchmark_phase(in.eval_steps));
  }

  void prepare(const StageSetup& s) override { prepare_quantize_stage(s.cfg, s.model, s.be); }
  void run(StageContext& ctx) override { run_quantize_stage(ctx, &m_qat); }
  bool runs_after_training() const override { return true; }

  StageState save_state() const override {
    StageState st;
    if (!m_qat.running)
      return st;
    json acts = json::object();
    for (const auto& [tap, p] : m_qat.acts)
      acts[tap] = quant_params_json(p);  // floats round-trip exactly through JSON's shortest form
    st.json = {{"qat_running", true}, {"f32_accuracy", m_qat.f32_accuracy}, {"acts", acts}};
    return st;
  }

  void load_state(const StageState& st) override {
    m_qat = {};
    if (st.json.is_null())
      return;
    try {
      m_qat.running = st.json.at("qat_running").get<bool>();
      m_qat.f32_accuracy = st.json.at("f32_accuracy").get<double>();
      for (const auto& [tap, p] : st.json.at("acts").items())
        m_qat.acts[tap] = quant_params_from(p);
    } catch (const std::exception& e) {
      throw DataError(std::string("quant stage state of the checkpoint: ") + e.what());
    }
  }

 private:
  QatResumeState m_qat;
};

}  // namespace

std::unique_ptr<Stage> new_quantize_stage() { return std::make_unique<QuantizeStage>(); }

}  // namespace lathe
