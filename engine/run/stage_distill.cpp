// The distillation stage: teacher set-up (saved or trained first), teacher accuracy, student
// augmentation and the TrainHooks that run the Distiller.
#include "engine/run/stage_distill.h"

#include <algorithm>
#include <chrono>

#include "engine/core/sha256.h"
#include "engine/data/loader.h"
#include "engine/exec/batch_loop.h"
#include "engine/io/onnx/onnx_import.h"
#include "engine/nn/model_io.h"
#include "engine/nn/zoo.h"
#include "engine/run/data_setup.h"
#include "engine/run/model_graph.h"
#include "engine/run/stage_registry.h"

namespace lathe {

namespace {

/// Forwards the teacher's own training metrics under teacher/* so they do not mix with the student's.
class PrefixSink final : public MetricsSink {
 public:
  PrefixSink(MetricsSink& next, std::string prefix) : m_next(next), m_prefix(std::move(prefix)) {}
  void sample(const std::string& metric, int64_t step, double wall_ms, double value) override {
    m_next.sample(m_prefix + metric, step, wall_ms, value);
  }
  void event(const std::string& kind, const nlohmann::json& fields) override {
    nlohmann::json f = fields;
    f["stage"] = "teacher";
    m_next.event(kind, f);
  }
  void flush() override { m_next.flush(); }

 private:
  MetricsSink& m_next;
  std::string m_prefix;
};

bool student_images_augmented(const ExperimentConfig& cfg) {
  const auto& a = cfg.data.augment;
  const double strength = a.strength * cfg.distill.student_augment_factor;
  return strength > 0 && (a.shift_px > 0 || a.hflip || a.noise_std > 0);
}

/// One batch-1 forward of both models so that every tapped node is checked (fused pre-activations
/// are refused by Model::activation with the node to tap instead).
void check_taps(Backend& be, Model& student, Model& teacher, const std::vector<FeaturePairSpec>& pairs,
                const Shape& image_shape) {
  if (pairs.empty())
    return;
  Shape s{1};
  s.insert(s.end(), image_shape.begin(), image_shape.end());
  Tensor x = be.zeros(s, DType::f32);
  LayerContext eval{be, false, 0};
  for (size_t k = 0; k < pairs.size(); ++k) {
    const std::string where = "distill.feature_pairs[" + std::to_string(k) + "]: ";
    try {
      student.forward(eval, x);
      (void)student.activation(pairs[k].student_node);
      teacher.forward(eval, x);
      (void)teacher.activation(pairs[k].teacher_node);
    } catch (const ConfigError& e) {
      throw ConfigError(where + e.what());
    }
  }
}

}  // namespace

std::string teacher_cache_key(const std::string& backend, const std::string& distiller_suffix,
                              const std::string& weights_sha256, const std::string& onnx_sha256) {
  std::string key = "backend:" + backend + ";" + distiller_suffix;
  if (!onnx_sha256.empty())  // the graph: an ONNX file's bytes (its weights too, for an ONNX teacher file)
    key = "onnx:" + onnx_sha256 + ";" + key;
  if (!weights_sha256.empty())
    key = "weights:" + weights_sha256 + ";" + key;
  return key;
}

std::unique_ptr<DistillStage> prepare_distill_stage(const ExperimentConfig& cfg, Backend& be, const TrainTest& data,
                                                    Model& student, const RunOptions& options) {
  const DistillConfig& d = cfg.distill;
  auto stage = std::make_unique<DistillStage>();
  stage->spec = parse_teacher_spec(d.teacher);
  if (stage->spec.kind == TeacherSpec::Kind::none)
    return nullptr;
  if (!be.device().is_cpu())
    throw ConfigError(
        "distill.teacher: distillation runs on the CPU backends only (compute.backend = cpu or "
        "reference); the " +
        be.name() + " backend has no distillation loss kernel yet");
  const Shape image_shape = data.train.sample_shape();
  Rng teacher_rng(cfg.seed * 0x9E3779B97F4A7C15ull + 0x7eac4e5ull);
  if (stage->spec.kind == TeacherSpec::Kind::zoo) {
    stage->teacher = build_zoo_model(stage->spec.value, image_shape, zoo_class_count(cfg.data, data.train));
    stage->teacher->create_params(be, DType::f32, teacher_rng);
  } else {
    stage->saved = resolve_saved_teacher(stage->spec, options.resolve_run, cfg.output.dir);
    stage->onnx_file = onnx_file_of(stage->saved.model_config);
    if (stage->spec.kind == TeacherSpec::Kind::onnx) {
      // Graph and weights from the file, as a student's model.onnx (trainer.cpp) is read.
      OnnxImport imported =
          import_onnx_for_data(stage->onnx_file, image_shape, data.train.num_classes, "distill.teacher");
      stage->onnx_sha256 = imported.sha256;
      stage->teacher = std::move(imported.model);
      stage->teacher->create_params(be, DType::f32, teacher_rng);
      load_onnx_weights(*stage->teacher, be, imported);
    } else {
      // A zoo / custom section, or the ONNX graph a run was imported from with the run's saved weights.
      stage->teacher = build_model_graph(stage->saved.model_config, image_shape,
                                         zoo_class_count(cfg.data, data.train), "distill.teacher");
      if (!stage->onnx_file.empty())
        stage->onnx_sha256 = sha256_file(stage->onnx_file);
      stage->teacher->create_params(be, DType::f32, teacher_rng);
      load_model_weights(*stage->teacher, be, stage->saved.weights_path);
    }
    if (!stage->onnx_file.empty())
      stage->saved.origin += " (ONNX graph " + stage->onnx_file + ", sha256 " + stage->onnx_sha256 + ")";
  }
  DistillOptions o;
  o.kd.temperature = d.temperature;
  o.kd.alpha = d.alpha;
  o.feature_weight = d.feature_weight;
  o.pairs = parse_feature_pairs(d.feature_pairs);
  check_taps(be, student, *stage->teacher, o.pairs, image_shape);
  Rng proj_rng(cfg.seed * 0xD1B54A32D192ED03ull + 0x9a0ull);
  stage->distiller = std::make_unique<Distiller>(student, *stage->teacher, o, be, proj_rng);

  if (!d.cache_teacher) {
    stage->cache_note = "off (distill.cache_teacher = false): the teacher runs on every batch";
  } else if (student_images_augmented(cfg)) {
    stage->cache_note = "off: the student's images are augmented, so the teacher runs on every batch";
  } else {
    const std::string weights_sha = stage->spec.kind == TeacherSpec::Kind::zoo ? std::string()
                                    : stage->spec.kind == TeacherSpec::Kind::onnx
                                        ? stage->onnx_sha256
                                        : sha256_file(stage->saved.weights_path);
    const std::string key = teacher_cache_key(be.name(), stage->distiller->cache_key_suffix(), weights_sha,
                                              stage->onnx_sha256);
    stage->cache = std::make_unique<TeacherCache>(key, stage->distiller->cache_record_sizes());
    stage->cache_note = "on: the images are not augmented, so the teacher's outputs are computed once per image";
    if (!d.teacher_cache.empty()) {
      if (stage->spec.kind == TeacherSpec::Kind::zoo) {
        stage->cache_note += " (distill.teacher_cache ignored: a zoo teacher is trained anew in every run)";
      } else {
        stage->cache_path = d.teacher_cache;
        if (stage->cache->load(stage->cache_path))
          stage->cache_note += "; " + std::to_string(stage->cache->size()) + " images loaded from " + stage->cache_path;
        else if (!stage->cache->load_note().empty())
          stage->cache_note += "; " + stage->cache->load_note() + " after the first epoch";
        else
          stage->cache_note += "; " + stage->cache_path + " will be written after the first epoch";
      }
    }
    stage->distiller->set_cache(stage->cache.get());
  }
  return stage;
}

namespace {

/// A resumed run's teacher cache starts empty, where the run it continues had cached every image of
/// the student's first epoch up to the step it stopped at, each computed in that epoch's batch. The
/// teacher's outputs for an image can differ in their last bits with the batch it is computed in
/// (which rows share a GEMM: oneDNN's AVX2 kernels), so computing the missing ones in later epochs'
/// batches would not continue the run bit for bit. Replays, through the teacher only, the first
/// epoch's batches up to the resumed step (all of them when it resumes in a later epoch): the same
/// images in the same batches, so the same outputs. Costs the teacher's forward passes over those
/// batches once, at the resume.
void refill_teacher_cache(DistillStage& st, StageContext& ctx, const TrainPhase& phase) {
  st.cache_refilled = true;
  if (!st.cache || (phase.start.epoch == 0 && phase.start.step_in_epoch == 0))
    return;
  const int64_t k = std::max(1, phase.grad_accum);
  const int64_t steps_per_epoch = ctx.steps_per_epoch(phase.loader);
  const int64_t steps = phase.start.epoch > 0 ? steps_per_epoch : std::min(steps_per_epoch, phase.start.step_in_epoch);
  const size_t cached_before = st.cache->size();
  const auto t0 = std::chrono::steady_clock::now();
  DataLoader loader(ctx.data.train, phase.loader);
  loader.start_epoch(0);
  Batch batch;
  DeviceBatch db;
  for (int64_t i = 0; i < steps * k && loader.next(batch); ++i) {
    db.load(ctx.be, batch);
    st.distiller->fill_cache(ctx.be, db.images);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ctx.sink.event("note", {{"text", "teacher cache refilled for the resume: the student's first " + std::to_string(steps) +
                                       " steps replayed through the teacher, in their batches, as the interrupted run "
                                       "had cached them (" +
                                       std::to_string(st.cache->size() - cached_before) + " images on this rank, " +
                                       std::to_string(seconds) + " s)"},
                          {"kind", "teacher_cache_refilled"},
                          {"images", st.cache->size() - cached_before},
                          {"steps", steps},
                          {"seconds", seconds}});
}

}  // namespace

void attach_distill_stage(DistillStage& st, StageContext& ctx, TrainPhase& phase, TrainHooks& hooks) {
  const DistillConfig& d = ctx.cfg.distill;
  // ---- a zoo teacher is trained first, in this run, on the teacher's (base) augmentation ----
  if (st.spec.kind == TeacherSpec::Kind::zoo) {
    PrefixSink teacher_sink(ctx.sink, "teacher/");
    StageContext tctx{.cfg = ctx.cfg,
                      .options = ctx.options,
                      .be = ctx.be,
                      .data = ctx.data,
                      .model = std::move(st.teacher),
                      .sink = teacher_sink,
                      .run_id = ctx.run_id,
                      .run_dir = {},
                      .step = ctx.step,
                      .threads = ctx.threads,
                      .peak_flops_per_s = ctx.peak_flops_per_s,
                      .instance = ctx.instance,
                      .spot = ctx.spot,
                      .wall_ms = ctx.wall_ms,
                      .progress = {},
                      .comm = ctx.comm};
    const TrainPhase tp = fine_tuning_phase(tctx, "teacher", static_cast<int>(d.teacher_epochs), 1.0);
    const int64_t teacher_steps = tctx.steps_per_epoch(tp.loader) * tp.epochs;
    tctx.total_steps = ctx.total_steps + teacher_steps;
    if (st.teacher_restored) {
      // The weights its finished training gave, from the checkpoint this run resumes from; its
      // steps keep their place on the step axis (its teacher/* metrics are in the store already).
      const std::string steps = std::to_string(tctx.step) + "-" + std::to_string(tctx.step + teacher_steps - 1);
      ctx.sink.event("note", {{"text", "distill.teacher: the zoo:" + st.spec.value +
                                           " teacher's trained weights come from the checkpoint; its steps " + steps +
                                           " are not trained again"}});
      tctx.step += teacher_steps;
      st.teacher_trained = true;
    } else {
      // A stop request cuts the teacher's training short: the run ends here (no student step, no
      // checkpoint, no teacher accuracy of a half-trained teacher), and its resume trains the
      // teacher again, from the start.
      st.teacher_stopped = train_phase(tctx, tp, {}).stopped;
      st.teacher_trained = !st.teacher_stopped;
    }
    st.teacher = std::move(tctx.model);
    ctx.total_steps = tctx.total_steps;
    ctx.step = tctx.step;
    if (st.teacher_stopped)
      return;
  }

  // ---- the teacher's accuracy, measured on the test set (or taken from a matching cache file) ----
  double teacher_accuracy = -1;
  std::string accuracy_how = "measured in this run";
  if (st.cache && st.cache->test_accuracy >= 0 && st.cache->test_samples == ctx.data.test.count) {
    teacher_accuracy = st.cache->test_accuracy;
    accuracy_how = "measured by an earlier run with the same teacher weights, stored in " + st.cache_path;
  } else {
    teacher_accuracy = evaluate(*st.teacher, ctx.be, ctx.data.test, 500).accuracy;
    if (st.cache) {
      st.cache->test_accuracy = teacher_accuracy;
      st.cache->test_samples = ctx.data.test.count;
    }
  }
  ctx.sink.sample("distill/teacher_accuracy", ctx.step, ctx.wall_ms(), teacher_accuracy);

  // ---- the student: stronger augmentation, the distillation step ----
  phase.loader.augment.strength *= d.student_augment_factor;
  st.schedule = phase.schedule;
  st.first_step = ctx.step;
  st.projection_optimizer = make_optimizer(phase.optimizer);
  std::string projections;
  for (const FeatureProjection& p : st.distiller->projections())
    projections += (projections.empty() ? "" : ", ") + p.describe();
  std::string teacher_origin = st.saved.origin;
  if (st.spec.kind == TeacherSpec::Kind::zoo)
    teacher_origin = st.teacher_restored ? "zoo model trained first in this run (its trained weights from the "
                                           "checkpoint this resume continues from)"
                                         : "zoo model trained first in this run";
  ctx.sink.event("distill",
                 {{"teacher", d.teacher},
                  {"teacher_origin", teacher_origin},
                  {"teacher_accuracy", teacher_accuracy},
                  {"teacher_accuracy_how", accuracy_how},
                  {"temperature", d.temperature},
                  {"alpha", d.alpha},
                  {"feature_pairs", d.feature_pairs},
                  {"feature_weight", d.feature_weight},
                  {"projections", projections},
                  {"student_augment_strength", phase.loader.augment.strength},
                  {"teacher_sees", "the student's batch (same images, same augmentation)"},
                  {"teacher_cache", st.cache_note}});

  LATHE_CHECK(!hooks.forward_backward, "distillation: another stage already replaced the training step");
  Distiller* distiller = st.distiller.get();
  // `phase` is where a resume sets the student's start (after attach): read at its first step.
  hooks.forward_backward = [distiller, &st, &ctx, &phase](Model& model, LayerContext& lctx, const DeviceBatch& batch,
                                                          double grad_scale, Tensor& diff_buf) {
    if (!st.cache_refilled)
      refill_teacher_cache(st, ctx, phase);
    return distiller->forward_backward(model, lctx, batch.images, batch.labels, grad_scale, diff_buf);
  };
  auto prev_after_update = hooks.after_update;
  hooks.after_update = [&st, &ctx, prev_after_update](Model& model, Optimizer& optimizer, int64_t step) {
    if (prev_after_update)
      prev_after_update(model, optimizer, step);
    st.distiller->step_projections(ctx.be, *st.projection_optimizer, st.schedule.at(step - st.first_step));
  };
  const bool has_pairs = !st.distiller->projections().empty();
  auto prev_on_log = hooks.on_log;
  hooks.on_log = [&st, has_pairs, prev_on_log](MetricsSink& sink, int64_t step, double wall_ms) {
    if (prev_on_log)
      prev_on_log(sink, step, wall_ms);
    const Distiller::Window w = st.distiller->take_window();
    const double n = static_cast<double>(std::max<int64_t>(w.samples, 1));
    sink.sample("distill/kd_loss", step, wall_ms, w.kd_sum / n);
    if (has_pairs)
      sink.sample("distill/feature_loss", step, wall_ms, w.feature_sum / n);
  };
  auto prev_after_eval = hooks.after_eval;
  hooks.after_eval = [&st, &ctx, prev_after_eval](const EvalResult& r, int64_t step) {
    if (prev_after_eval)
      prev_after_eval(r, step);
    // After the first epoch every training image has been seen: keep the cache for later runs.
    if (st.cache && !st.cache_path.empty() && st.cache->dirty() && !st.cache_saved) {
      st.cache->save(st.cache_path);
      st.cache_saved = true;
      ctx.sink.event("note", {{"text", "teacher cache written: " + std::to_string(st.cache->size()) + " images to " +
                                           st.cache_path}});
    }
  };
}

namespace {

/// A trained zoo teacher's tensors in the stage's state: stage/distill/teacher/<name> in a checkpoint.
constexpr const char* kTeacher = "teacher/";

/// The distillation stage (stage.h): section distill, attached to the main training. Its mid-run
/// state is the feature projections' weights (trained with the student, not saved with it) and,
/// once a zoo teacher's training has finished, the teacher's weights and buffers (a resumed run
/// takes them instead of training the teacher again: resume_before_attach).
class DistillStageAdapter final : public Stage {
 public:
  std::string section() const override { return "distill"; }
  int order() const override { return stage_order::distill; }

  std::vector<FieldSpec> schema_fields() const override {
    using namespace schema;
    std::vector<FieldSpec> f;
    f.push_back(string("distill.teacher", "",
                       "Teacher: zoo:<name> (trained first), run:<run id or name> (also a run whose model came from "
                       "model.onnx), a .safetensors file, or an .onnx model file (graph and weights, as model.onnx); "
                       "empty = no distillation"));
    // Every other knob is read by the stage only, which runs only with a teacher (enabled()).
    const auto distilling = [](FieldSpec spec) { return only_when(std::move(spec), {non_empty("distill.teacher")}); };
    f.push_back(
        distilling(number("distill.temperature", 4, 0, kInf, "Softmax temperature T of the soft targets", true)));
    f.push_back(
        distilling(number("distill.alpha", 0.7, 0, 1, "Weight of the soft-target loss (1 - alpha: hard labels)")));
    f.push_back(only_when(
        distilling(number("distill.feature_weight", 0.3, 0, kInf, "Weight of the feature-matching (MSE) loss")),
        {non_empty("distill.feature_pairs")}));
    f.push_back(
        distilling(string("distill.feature_pairs", "",
                          "Feature pairs student_node:teacher_node, comma-separated (e.g. 1:8); empty = logits only")));
    // Only a zoo:<name> teacher is trained in the run; only a saved one has outputs worth a cache file
    // (build_distill_stage ignores teacher_cache for a zoo teacher).
    f.push_back(only_when(integer("distill.teacher_epochs", 5, 1, 1000, "Epochs to train a zoo:<name> teacher first"),
                          {starts_with("distill.teacher", "zoo:")}));
    f.push_back(distilling(number("distill.student_augment_factor", 1.2, 0, 4,
                                  "Student augmentation strength = data.augment.strength x this (the teacher sees "
                                  "the same images)")));
    f.push_back(distilling(boolean("distill.cache_teacher", true,
                                   "Reuse the teacher's outputs per image across epochs when the student's images "
                                   "are not augmented")));
    f.push_back(only_when(
        only_when(distilling(string(
                      "distill.teacher_cache", "",
                      "File keeping the cached teacher outputs across runs (saved teachers only); empty = memory")),
                  {one_of("distill.cache_teacher", {true})}),
        {not_starts_with("distill.teacher", "zoo:")}));
    return f;
  }

  void parse(const nlohmann::json& j, ExperimentConfig& c) const override {
    using nlohmann::json;
    const json& ds = j.at("distill");
    c.distill.teacher = ds.at("teacher").get<std::string>();
    c.distill.temperature = ds.at("temperature").get<double>();
    c.distill.alpha = ds.at("alpha").get<double>();
    c.distill.feature_weight = ds.at("feature_weight").get<double>();
    c.distill.feature_pairs = ds.at("feature_pairs").get<std::string>();
    c.distill.teacher_epochs = ds.at("teacher_epochs").get<int>();
    c.distill.student_augment_factor = ds.at("student_augment_factor").get<double>();
    c.distill.cache_teacher = ds.at("cache_teacher").get<bool>();
    c.distill.teacher_cache = ds.at("teacher_cache").get<std::string>();
  }

  bool enabled(const ExperimentConfig& cfg) const override { return !cfg.distill.teacher.empty(); }

  void plan(const ExperimentConfig& cfg, int64_t steps_per_epoch, std::vector<PlannedPhase>& plan) const override {
    // The main training becomes the distillation (its phase event still says "train"); a zoo
    // teacher is trained first, in this run.
    for (PlannedPhase& p : plan)
      if (p.name == "train")
        p.name = "distill";
    if (cfg.distill.teacher.rfind("zoo:", 0) == 0)
      plan.insert(plan.begin(), {"teacher", steps_per_epoch * cfg.distill.teacher_epochs});
  }

  void prepare(const StageSetup& s) override {
    m_stage = prepare_distill_stage(s.cfg, s.be, s.data, s.model, s.options);
  }

  void attach(StageContext& ctx, TrainPhase& phase, TrainHooks& hooks) override {
    if (m_stage)
      attach_distill_stage(*m_stage, ctx, phase, hooks);
  }

  bool stopped_in_attach() const override { return m_stage && m_stage->teacher_stopped; }

  StageState save_state() const override {
    StageState st;
    if (!m_stage || !m_stage->distiller)
      return st;
    nlohmann::json names = nlohmann::json::array();
    for (const NamedParam& p : m_stage->distiller->projection_params()) {
      names.push_back(p.name);
      st.tensors.emplace_back("projection/" + p.name, p.param->value.contiguous_copy());
    }
    if (!names.empty())
      st.json = {{"projections", names}, {"first_step", m_stage->first_step}};
    // A trained zoo teacher: a resume takes its weights instead of training it again.
    if (m_stage->teacher_trained) {
      for (const NamedParam& p : m_stage->teacher->named_params())
        st.tensors.emplace_back(kTeacher + p.name, p.param->value.contiguous_copy());
      for (const NamedBuffer& b : m_stage->teacher->named_buffers())
        st.tensors.emplace_back(kTeacher + b.name, b.buffer->value.contiguous_copy());
      st.json["teacher_trained"] = true;
    }
    return st;
  }

  void resume_before_attach(const StageState& st) override {
    if (!m_stage || m_stage->spec.kind != TeacherSpec::Kind::zoo || !st.json.is_object() ||
        !st.json.value("teacher_trained", false))
      return;
    // Checked before anything is copied: a state that does not fit leaves the teacher untrained.
    const std::string teacher = m_stage->spec.value;
    auto find = [&](const std::string& name, const Tensor& dst) -> const Tensor& {
      const std::string key = kTeacher + name;
      const auto it = std::find_if(st.tensors.begin(), st.tensors.end(), [&](const auto& t) { return t.first == key; });
      if (it == st.tensors.end())
        throw DataError("the distill stage's state has no tensor 'stage/distill/" + key +
                        "' (the trained zoo:" + teacher + " teacher's)");
      if (it->second.shape() != dst.shape() || it->second.dtype() != dst.dtype())
        throw DataError("tensor 'stage/distill/" + key + "' is " + shape_str(it->second.shape()) + " " +
                        std::string(dtype_name(it->second.dtype())) + ", the zoo:" + teacher + " teacher has " +
                        shape_str(dst.shape()) + " " + std::string(dtype_name(dst.dtype())));
      return it->second;
    };
    std::vector<std::pair<const Tensor*, Tensor*>> copies;
    for (const NamedParam& p : m_stage->teacher->named_params())
      copies.emplace_back(&find(p.name, p.param->value), &p.param->value);
    for (const NamedBuffer& b : m_stage->teacher->named_buffers())
      copies.emplace_back(&find(b.name, b.buffer->value), &b.buffer->value);
    for (auto& c : copies)
      c.first->copy_to(*c.second);
    m_stage->teacher_restored = true;
  }

  void load_state(const StageState& st) override {
    if (!st.json.is_object() || !st.json.contains("projections"))
      return;  // the teacher's weights, if any, were taken before attach (resume_before_attach)
    LATHE_CHECK(m_stage && m_stage->distiller, "distill stage state: load_state before prepare");
    for (const NamedParam& p : m_stage->distiller->projection_params()) {
      const std::string key = "projection/" + p.name;
      const auto it = std::find_if(st.tensors.begin(), st.tensors.end(), [&](const auto& t) { return t.first == key; });
      LATHE_CHECK(it != st.tensors.end(), "distill stage state: no tensor ", key);
      it->second.copy_to(p.param->value);
    }
  }

 private:
  std::unique_ptr<DistillStage> m_stage;
};

}  // namespace

std::unique_ptr<Stage> new_distill_stage() { return std::make_unique<DistillStageAdapter>(); }

}  // namespace lathe
