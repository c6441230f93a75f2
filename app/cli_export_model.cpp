// export-model: store -> config + weights artifact -> Model -> ONNX file (f32, or INT8 as QDQ).
#include "app/cli_export_model.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "app/cli_history.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/compress/distill/teacher_source.h"
#include "engine/data/idx_reader.h"
#include "engine/io/onnx/onnx_export.h"
#include "engine/io/onnx/onnx_import.h"
#include "engine/nn/model_io.h"
#include "engine/nn/model_resize.h"
#include "engine/nn/safetensors.h"
#include "engine/run/config.h"
#include "engine/run/int8_onnx.h"
#include "engine/store/store.h"

namespace lathe::cli {

namespace {

// Kinds of f32 weights a run records, the later in a run the more final.
const std::vector<std::string> kF32Kinds = {"model", "model-f32", "pruned", "lowrank"};

std::string kinds_text() {
  std::string s;
  for (const std::string& k : kF32Kinds)
    s += (s.empty() ? "" : ", ") + k;
  return s;
}

// The graph the run's (validated) config describes, for its images: their shape and classes come
// from the data record of the run's started event (every kind of data), else from its IDX file.
std::unique_ptr<Model> run_graph(const nlohmann::json& cfg, const std::vector<EventRecord>& events) {
  const nlohmann::json& m = cfg.at("model");
  if (m.at("zoo") == "onnx")
    return import_onnx(m.at("onnx").get<std::string>()).model;
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
  } else if (d.at("dataset") == "idx") {
    const IdxArray images = read_idx(d.at("train_images").get<std::string>(), 3);
    image = {1, images.dims.at(1), images.dims.at(2)};
  } else if (d.at("dataset") != "fashion-mnist") {
    throw DataError("the run's started event has no data record, so the shape of its " + d.at("dataset").dump() +
                    " images is unknown");
  }
  return build_model_from_section(m, image, zoo_classes);
}

/// The last artifact of `kind` with a safetensors file, or null.
const ArtifactRecord* last_of(const std::vector<ArtifactRecord>& artifacts, const std::string& kind) {
  const ArtifactRecord* found = nullptr;
  for (const ArtifactRecord& a : artifacts)
    if (a.kind == kind && a.path.ends_with(".safetensors"))
      found = &a;
  return found;
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

/// An INT8 run as QDQ ONNX: the f32 graph (model-f32, saved by the quant stage beside the INT8
/// file) for the nodes that stay f32, the INT8 file's s8 weights, scales and quantized values.
int export_int8(const std::string& id, const nlohmann::json& cfg, const std::vector<EventRecord>& events,
                const std::vector<ArtifactRecord>& artifacts, const ArtifactRecord* int8, const std::string& out) {
  if (!int8)
    throw DataError("run " + id + " recorded no model-int8 artifact (quant.mode none, or train.save_model off?)");
  const ArtifactRecord* f32 = last_of(artifacts, "model-f32");
  if (!f32)
    throw DataError("run " + id + " recorded no model-f32 artifact beside its INT8 file; the QDQ graph needs it");
  ReferenceBackend be;
  std::unique_ptr<Model> model = load_run_model(cfg, events, *f32, be);
  const QdqPlan plan = qdq_plan_from_file(load_safetensors(int8->path), int8->path);
  const int64_t bytes = export_onnx_qdq(*model, be, plan, out,
                                        {.metadata = {{"lathe_run", id},
                                                      {"lathe_artifact", int8->kind},
                                                      {"lathe_weights_sha256", int8->sha256},
                                                      {"lathe_precision", "int8-qdq"}}});
  std::cout << "wrote " << out << " (" << bytes << " bytes, INT8 QDQ, from the model-int8 weights " << int8->path
            << " and the graph of " << f32->path << " of run " << id << ")\n";
  return 0;
}

int cmd_export_model(const std::string& db, const std::string& ref, const std::string& format, const std::string& out,
                     const std::string& artifact_kind) {
  if (format != "onnx")
    throw ConfigError("--format: \"" + format + "\" is not supported; allowed: onnx");
  Store store = open_for_reading(db);
  const std::string id = store.resolve_run(ref);
  const RunRecord run = store.run(id);
  if (run.config_json.empty())
    throw DataError("run " + id + " has no recorded config");
  const nlohmann::json cfg = validate_config(nlohmann::json::parse(run.config_json));
  if (!artifact_kind.empty() && artifact_kind != "model-int8" &&
      std::find(kF32Kinds.begin(), kF32Kinds.end(), artifact_kind) == kF32Kinds.end())
    throw ConfigError("--artifact: \"" + artifact_kind + "\" is not a kind of weights; allowed: " + kinds_text() +
                      ", model-int8");
  const std::vector<ArtifactRecord> artifacts = store.artifacts(id);
  const ArtifactRecord* int8 = last_of(artifacts, "model-int8");
  if (artifact_kind == "model-int8" || (artifact_kind.empty() && int8))
    return export_int8(id, cfg, store.events(id), artifacts, int8, out);
  const ArtifactRecord* chosen = nullptr;
  for (const ArtifactRecord& a : artifacts) {  // in recording order: the last one is the most final
    const bool wanted = artifact_kind.empty() ? std::find(kF32Kinds.begin(), kF32Kinds.end(), a.kind) != kF32Kinds.end()
                                              : a.kind == artifact_kind;
    if (wanted && a.path.size() > 12 && a.path.ends_with(".safetensors"))
      chosen = &a;
  }
  if (!chosen)
    throw DataError("run " + id + " recorded no " + (artifact_kind.empty() ? "f32 weights" : artifact_kind) +
                    " artifact (" + kinds_text() + "); was train.save_model off?");
  ReferenceBackend be;
  std::unique_ptr<Model> model = load_run_model(cfg, store.events(id), *chosen, be);
  const int64_t bytes = export_onnx(
      *model, be, out,
      {.metadata = {{"lathe_run", id}, {"lathe_artifact", chosen->kind}, {"lathe_weights_sha256", chosen->sha256}}});
  std::cout << "wrote " << out << " (" << bytes << " bytes, f32, from the " << chosen->kind << " weights "
            << chosen->path << " of run " << id << ")\n";
  return 0;
}

}  // namespace

void add_export_model_command(CLI::App& app, const std::string& db, int& exit_code) {
  static std::string ref, format = "onnx", out, artifact;
  CLI::App* cmd = app.add_subcommand("export-model", "Write a run's final model for a deployment runtime (ONNX)");
  cmd->add_option("run", ref, "Run id, id prefix or name")->required();
  cmd->add_option("--format", format, "Output format (onnx)")->capture_default_str();
  cmd->add_option("-o,--output", out, "The file to write")->required();
  cmd->add_option("--artifact", artifact,
                  "Which weights: " + kinds_text() +
                      ", model-int8 (QDQ) (default: model-int8 on a quantizing run, else the run's last)");
  cmd->callback([&] { exit_code = cmd_export_model(db, ref, format, out, artifact); });
}

}  // namespace lathe::cli
