// Teacher specs and the resolution of saved teachers: files, runs through the caller's resolver (the
// run store, in lathe-cli) or run folders.
#include "engine/compress/distill/teacher_source.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/nn/safetensors.h"
#include "engine/nn/zoo.h"

namespace lathe {

namespace fs = std::filesystem;

namespace {

constexpr const char* kForms =
    "allowed: \"zoo:<name>\" (mlp, cnn, teacher, student; trained first), \"run:<run id or name>\", the path "
    "of a .safetensors file or the path of an .onnx model file";

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw DataError("distill.teacher: cannot read " + path);
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw DataError("distill.teacher: " + path + " is not valid JSON: " + e.what());
  }
}

nlohmann::json model_section_of(const nlohmann::json& config, const std::string& where) {
  if (!config.is_object() || !config.contains("model") || !config["model"].is_object())
    throw DataError("distill.teacher: the config of " + where + " has no model section");
  return config["model"];
}

/// Architecture of a bare safetensors file: its lathe_model metadata, else a config.json beside it.
nlohmann::json model_section_for_file(const std::string& path) {
  const fs::path sibling = fs::path(path).parent_path() / "config.json";
  if (fs::exists(sibling))
    return model_section_of(read_json_file(sibling.string()), sibling.string());
  const SafetensorsFile f = load_safetensors(path);
  auto it = f.metadata.find("lathe_model");
  if (it != f.metadata.end() && it->second != "custom")
    return {{"zoo", it->second}};
  throw DataError("distill.teacher: cannot tell the architecture of " + path +
                  ": it has no lathe_model metadata naming a zoo model and no config.json beside it");
}

}  // namespace

TeacherSpec parse_teacher_spec(const std::string& text) {
  TeacherSpec s;
  if (text.empty())
    return s;
  if (text.rfind("zoo:", 0) == 0) {
    s.kind = TeacherSpec::Kind::zoo;
    s.value = text.substr(4);
    const auto names = zoo_model_names();
    if (std::find(names.begin(), names.end(), s.value) == names.end())
      throw ConfigError("distill.teacher: unknown zoo model '" + s.value + "'; " + kForms);
    return s;
  }
  if (text.rfind("run:", 0) == 0) {
    s.kind = TeacherSpec::Kind::run;
    s.value = text.substr(4);
    if (s.value.empty())
      throw ConfigError("distill.teacher: \"run:\" needs a run id or name; " + std::string(kForms));
    return s;
  }
  if (text.size() > 5 && text.ends_with(".onnx")) {
    s.kind = TeacherSpec::Kind::onnx;
    s.value = text;
    return s;
  }
  if (text.size() < 12 || text.substr(text.size() - 12) != ".safetensors")
    throw ConfigError("distill.teacher: '" + text + "' is not a teacher; " + kForms);
  s.kind = TeacherSpec::Kind::file;
  s.value = text;
  return s;
}

SavedTeacher resolve_saved_teacher(const TeacherSpec& spec, const RunResolver& resolve_run,
                                   const std::string& runs_root) {
  SavedTeacher t;
  if (spec.kind == TeacherSpec::Kind::file) {
    if (!fs::exists(spec.value))
      throw DataError("distill.teacher: file " + spec.value + " does not exist");
    t.weights_path = spec.value;
    t.model_config = model_section_for_file(spec.value);
    t.origin = "file " + spec.value;
    return t;
  }
  if (spec.kind == TeacherSpec::Kind::onnx) {
    if (!fs::exists(spec.value))
      throw DataError("distill.teacher: ONNX file " + spec.value + " does not exist");
    t.weights_path = spec.value;
    t.model_config = {{"zoo", "onnx"}, {"onnx", spec.value}};
    t.origin = "ONNX file " + spec.value;
    return t;
  }
  LATHE_CHECK(spec.kind == TeacherSpec::Kind::run, "resolve_saved_teacher: not a run or file teacher");
  if (resolve_run) {
    const RunModelFile m = resolve_run(spec.value, "distill.teacher");
    t.weights_path = m.weights_path;
    t.model_config = model_section_of(nlohmann::json::parse(m.config_json), "run " + m.run_id);
    t.origin = m.origin;
    return t;
  }
  const fs::path dir = fs::path(runs_root) / spec.value;
  const fs::path weights = dir / "model.safetensors";
  if (!fs::exists(weights))
    throw DataError("distill.teacher: run '" + spec.value + "' not found: no run store to look in and no " +
                    weights.string());
  t.weights_path = weights.string();
  t.model_config = model_section_of(read_json_file((dir / "config.json").string()), dir.string());
  t.origin = "run folder " + dir.string();
  return t;
}

std::unique_ptr<Model> build_model_from_section(const nlohmann::json& m, const Shape& image_shape, int zoo_classes) {
  const std::string zoo = m.value("zoo", std::string("custom"));
  if (zoo == "onnx")  // the graph lives in the ONNX file, which this layer does not read
    throw ConfigError("build_model_from_section: the model section names an ONNX file (model.onnx = " +
                      m.value("onnx", std::string("?")) + "); build it with build_model_graph (run/model_graph.h)");
  if (zoo == "custom") {
    if (!m.contains("layers"))
      throw ConfigError("distill.teacher: a custom teacher needs model.layers in its config");
    return build_model_from_layers(m["layers"], image_shape);
  }
  return build_zoo_model(zoo, image_shape, zoo_classes);
}

}  // namespace lathe
