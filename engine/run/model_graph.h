// The graph (no params) a config's model section describes, whatever its kind: a zoo model, a
// custom layer list (both through distill's build_model_from_section) or an ONNX file, imported
// here because the run layer is the one that may read ONNX (engine/io/onnx). Used for saved
// teachers (distill.teacher) and for exporting a finished run's model.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/io/onnx/onnx_import.h"
#include "engine/nn/model.h"

namespace lathe {

/// `model_section` is {"zoo": ..., "layers": [...]} or {"zoo": "onnx", "onnx": FILE} (or only
/// {"onnx": FILE}); an ONNX graph is checked to take `image_shape` ({C, H, W}) images. ConfigError /
/// DataError naming `field` and the file.
std::unique_ptr<Model> build_model_graph(const nlohmann::json& model_section, const Shape& image_shape,
                                         int zoo_classes, const std::string& field);

/// `file` imported (graph and weights) and checked against the data it will see: `image_shape`
/// ({C, H, W}) inputs and `num_classes` outputs; a mismatch is a ConfigError naming `field` and the
/// file (a student's model.onnx, an ONNX distillation teacher).
OnnxImport import_onnx_for_data(const std::string& file, const Shape& image_shape, int num_classes,
                                const std::string& field);

/// Whether the section's graph comes from an ONNX file, and which ("" when not).
std::string onnx_file_of(const nlohmann::json& model_section);

}  // namespace lathe
