// export_run_model and the choices a run offers (see model_export.h). Moved out of lathe-cli's
// export-model so that the desktop app's Export model action runs the same code.
#include "engine/store/model_export.h"

#include <algorithm>
#include <map>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/core/error.h"
#include "engine/data/idx_reader.h"
#include "engine/io/onnx/onnx_export.h"
#include "engine/io/onnx/onnx_import.h"
#include "engine/nn/model_io.h"
#include "engine/nn/model_resize.h"
#include "engine/nn/safetensors.h"
#include "engine/run/config.h"
#include "engine/run/int8_onnx.h"
#include "engine/run/model_graph.h"

namespace lathe {

namespace {

const std::string kInt8 = "model-int8";

std::string kinds_text() {
  std::string s;
  for (const std::string& k : f32_export_kinds())
    s += (s.empty() ? "" : ", ") + k;
  return s;
}

bool is_f32_kind(const std::string& kind) {
  const auto& k = f32_export_kinds();
  return std::find(k.begin(), k.end(), kind) != k.end();
}

/// The artifact with a safetensors file whose kind `wanted` accepts recorded last (in recording
/// order: the most final), or null.
template <typename KindPredicate>
const ArtifactRecord* last_matching(const std::vector<ArtifactRecord>& artifacts, KindPredicate wanted) {
  const ArtifactRecord* found = nullptr;
  for (const ArtifactRecord& a : artifacts)
    if (wanted(a.kind) && a.path.size() > 12 && a.path.ends_with(".safetensors"))
      found = &a;
  return found;
}

const ArtifactRecord* last_of(const std::vector<ArtifactRecord>& artifacts, const std::string& kind) {
  return last_matching(artifacts, [&](const std::string& k) { return k == kind; });
}

/// Why run `id` cannot be exported as INT8 QDQ, or "" when it can (its INT8 file and the f32 graph
/// the quant stage saved beside it).
std::string int8_missing(const std::vector<ArtifactRecord>& artifacts, const std::string& id) {
  if (!last_of(artifacts, kInt8))
    return "run " + id + " recorded no model-int8 artifact (quant.mode none, or train.save_model off?)";
  if (!last_of(artifacts, "model-f32"))
    return "run " + id + " recorded no model-f32 artifact beside its INT8 file; the QDQ graph needs it";
  return "";
}

/// model-int8 on a run that recorded one, else the f32 artifact recorded last; "" when none.
std::string default_kind(const std::vector<ArtifactRecord>& artifacts) {
  if (last_of(artifacts, kInt8))
    return kInt8;
  const ArtifactRecord* f32 = last_matching(artifacts, is_f32_kind);
  return f32 ? f32->kind : std::string();
}

// The graph the run's (validated) config describes, for its images: their shape and classes come
// from the data record of the run's started event (every kind of data), else from its IDX file.
std::unique_ptr<Model> run_graph(const nlohmann::json& cfg, const std::vector<EventRecord>& events) {
  const nlohmann::json& m = cfg.at("model");
  Shape image = {1, 28, 28};
  int zoo_classes = 10;
  const nlohmann::json& d = cfg.at("data");
  const nlohmann::json* record = nullptr;
  for (const EventRecord& e : events)
    if (e.kind == "started" && e.fields.is_object() && e.fields.contains("data") && e.fields["data"].is_object())
      record = &e.fields["data"];
  if (record && record->contains("channels") && record->contains("num_classes")) {
    image = {record->at("channels").get<int64_t>(), record->at("rows").get<int64_t>(), record->at("cols").get<int64_t>()};
    const int classes = record->at("num_classes").get<int>();
    const bool historical = d.at("dataset") == "idx" || d.at("dataset") == "fashion-mnist";
    zoo_classes = historical ? std::max(10, classes) : classes;  // as data_setup.h's zoo_class_count
  } else if (!onnx_file_of(m).empty()) {
    return import_onnx(onnx_file_of(m)).model;  // its own input shape: nothing to check it against
  } else if (d.at("dataset") == "idx") {
    const IdxArray images = read_idx(d.at("train_images").get<std::string>(), 3, 0);  // the header alone
    image = {1, images.dims.at(1), images.dims.at(2)};
  } else if (d.at("dataset") != "fashion-mnist") {
    throw DataError("the run's started event has no data record, so the shape of its " + d.at("dataset").dump() +
                    " images is unknown");
  }
  return build_model_graph(m, image, zoo_classes, "model.onnx");
}

/// The graph of the run with the weights of an f32 artifact, on the reference backend.
std::unique_ptr<Model> load_run_model(const nlohmann::json& cfg, const std::vector<EventRecord>& events,
                                      const ArtifactRecord& weights_artifact, ReferenceBackend& be) {
  const SafetensorsFile weights = load_safetensors(weights_artifact.path);
  std::unique_ptr<Model> graph = run_graph(cfg, events);
  std::unique_ptr<Model> model = resize_to_weights(*graph, weights.tensors, weights_artifact.path);
  Rng rng(0);
  model->create_params(be, DType::f32, rng);
  load_named_tensors(*model, be, weights.tensors, weights_artifact.path);
  return model;
}

nlohmann::json run_config(const Store& store, const std::string& id) {
  const RunRecord run = store.run(id);
  if (run.config_json.empty())
    throw DataError("run " + id + " has no recorded config");
  return validate_config(nlohmann::json::parse(run.config_json));
}

}  // namespace

const std::vector<std::string>& f32_export_kinds() {
  static const std::vector<std::string> kinds = {"model", "model-f32", "pruned", "lowrank"};
  return kinds;
}

std::vector<ModelExportChoice> model_export_choices(const Store& store, const std::string& run_id) {
  const std::vector<ArtifactRecord> artifacts = store.artifacts(run_id);
  static const std::map<std::string, std::string> labels = {
      {"model", "f32 model (the trained weights)"},
      {"model-f32", "f32 model the INT8 model was made from"},
      {"pruned", "pruned model (structured: smaller; unstructured: zeros)"},
      {"lowrank", "low-rank factorized model"},
      {kInt8, "INT8 model as QDQ (QuantizeLinear / DequantizeLinear)"}};
  std::vector<ModelExportChoice> out;
  for (const std::string& kind : f32_export_kinds()) {
    ModelExportChoice c;
    c.kind = kind;
    c.label = labels.at(kind);
    if (const ArtifactRecord* a = last_of(artifacts, kind)) {
      c.available = true;
      c.path = a->path;
    } else {
      c.why_not = "run " + run_id + " recorded no " + kind + " artifact" +
                  (kind == "model"       ? " (train.save_model off?)"
                   : kind == "model-f32" ? " (it has no INT8 stage)"
                   : kind == "pruned"    ? " (it has no prune stage)"
                                         : " (it has no low-rank stage)");
    }
    out.push_back(c);
  }
  ModelExportChoice q;
  q.kind = kInt8;
  q.label = labels.at(kInt8);
  q.why_not = int8_missing(artifacts, run_id);
  if (q.why_not.empty()) {
    q.available = true;
    q.path = last_of(artifacts, kInt8)->path;
  }
  out.push_back(q);
  return out;
}

std::string default_model_export_kind(const Store& store, const std::string& run_id) {
  return default_kind(store.artifacts(run_id));
}

ModelExportResult export_run_model(const Store& store, const std::string& id, const std::string& kind_asked,
                                   const std::string& out, const std::string& format) {
  if (format != "onnx")
    throw ConfigError("--format: \"" + format + "\" is not supported; allowed: onnx");
  if (!kind_asked.empty() && kind_asked != kInt8 && !is_f32_kind(kind_asked))
    throw ConfigError("--artifact: \"" + kind_asked + "\" is not a kind of weights; allowed: " + kinds_text() +
                      ", model-int8");
  const nlohmann::json cfg = run_config(store, id);
  const std::vector<ArtifactRecord> artifacts = store.artifacts(id);
  const std::vector<EventRecord> events = store.events(id);
  const std::string kind = kind_asked.empty() ? default_kind(artifacts) : kind_asked;
  ModelExportResult r;
  r.path = out;
  r.kind = kind;
  ReferenceBackend be;

  if (kind == kInt8) {  // the f32 graph (model-f32, saved by the quant stage) with the INT8 file's weights
    if (const std::string missing = int8_missing(artifacts, id); !missing.empty())
      throw DataError(missing);
    const ArtifactRecord* int8 = last_of(artifacts, kInt8);
    const ArtifactRecord* f32 = last_of(artifacts, "model-f32");
    std::unique_ptr<Model> model = load_run_model(cfg, events, *f32, be);
    const QdqPlan plan = qdq_plan_from_file(load_safetensors(int8->path), int8->path);
    r.bytes = export_onnx_qdq(*model, be, plan, out,
                              {.metadata = {{"lathe_run", id},
                                            {"lathe_artifact", int8->kind},
                                            {"lathe_weights_sha256", int8->sha256},
                                            {"lathe_precision", "int8-qdq"}}});
    r.weights_path = int8->path;
    r.summary = "wrote " + out + " (" + std::to_string(r.bytes) + " bytes, INT8 QDQ, from the model-int8 weights " +
                int8->path + " and the graph of " + f32->path + " of run " + id + ")";
    return r;
  }

  const ArtifactRecord* chosen = kind.empty() ? nullptr : last_of(artifacts, kind);
  if (!chosen)
    throw DataError("run " + id + " recorded no " + (kind_asked.empty() ? "f32 weights" : kind_asked) +
                    " artifact (" + kinds_text() + "); was train.save_model off?");
  std::unique_ptr<Model> model = load_run_model(cfg, events, *chosen, be);
  r.bytes = export_onnx(
      *model, be, out,
      {.metadata = {{"lathe_run", id}, {"lathe_artifact", chosen->kind}, {"lathe_weights_sha256", chosen->sha256}}});
  r.weights_path = chosen->path;
  r.summary = "wrote " + out + " (" + std::to_string(r.bytes) + " bytes, f32, from the " + chosen->kind + " weights " +
              chosen->path + " of run " + id + ")";
  return r;
}

}  // namespace lathe
