// build_model_graph: zoo / custom through build_model_from_section, ONNX through import_onnx.
#include "engine/run/model_graph.h"

#include "engine/compress/distill/teacher_source.h"
#include "engine/core/error.h"
#include "engine/io/onnx/onnx_import.h"
#include "engine/nn/zoo.h"

namespace lathe {

std::string onnx_file_of(const nlohmann::json& m) {
  if (!m.is_object())
    return {};
  const bool by_zoo = m.contains("zoo") && m["zoo"] == "onnx";
  const bool only_file = !m.contains("zoo") && m.contains("onnx");
  if (!by_zoo && !only_file)
    return {};
  if (!m.contains("onnx") || !m["onnx"].is_string() || m["onnx"].get<std::string>().empty())
    throw ConfigError("model.onnx: required when model.zoo is \"onnx\" (the .onnx file)");
  return m["onnx"].get<std::string>();
}

OnnxImport import_onnx_for_data(const std::string& file, const Shape& image_shape, int num_classes,
                                const std::string& field) {
  OnnxImport imported = import_onnx(file);
  try {
    check_onnx_input(*imported.model, image_shape);
    check_model_outputs(*imported.model, num_classes);
  } catch (const ConfigError& e) {
    throw ConfigError(field + ": " + file + ": " + e.what());
  }
  return imported;
}

std::unique_ptr<Model> build_model_graph(const nlohmann::json& m, const Shape& image_shape, int zoo_classes,
                                         const std::string& field) {
  const std::string file = onnx_file_of(m);
  if (file.empty())
    return build_model_from_section(m, image_shape, zoo_classes);
  std::unique_ptr<Model> model;
  try {  // the importer's messages name the file, the node and the op
    model = import_onnx(file).model;
  } catch (const ConfigError& e) {
    throw ConfigError(field + ": " + e.what());
  } catch (const DataError& e) {
    throw DataError(field + ": " + e.what());
  }
  try {
    check_onnx_input(*model, image_shape);
  } catch (const ConfigError& e) {
    throw ConfigError(field + ": " + file + ": " + e.what());
  }
  return model;
}

}  // namespace lathe
