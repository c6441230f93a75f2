// Where the distillation teacher comes from (distill.teacher):
//   "zoo:<name>"   a zoo model trained first, in the same run, for distill.teacher_epochs epochs
//   "run:<ref>"    the model.safetensors saved by an earlier run (id, unique id prefix or name),
//                  found by the caller's RunResolver (lathe-cli: the run store's artifacts), or under
//                  <output.dir>/<id>/ without one
//   "<path>"       a safetensors file; its architecture from the file's lathe_model metadata (a zoo
//                  name) or from a config.json next to it (a run folder)
//   "<path>.onnx"  an ONNX model file: graph and weights both from the file
// The architecture of a saved teacher comes from the saving run's config (model.zoo / model.layers,
// or model.onnx: the ONNX file's graph with the run's saved weights). This layer does not read ONNX
// (engine/io/onnx sits beside it): an ONNX graph is built by the run layer (run/model_graph.h).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/core/run_model_ref.h"
#include "engine/nn/model.h"

namespace lathe {

struct TeacherSpec {
  enum class Kind { none, zoo, run, file, onnx } kind = Kind::none;
  std::string value;  ///< zoo name, run reference or file path (file: .safetensors, onnx: .onnx)
};

/// Parses distill.teacher; "" is Kind::none. Throws ConfigError naming the field and the forms allowed.
TeacherSpec parse_teacher_spec(const std::string& text);

/// A saved teacher: its weights file and the model section ({"zoo": ..., "layers": [...]} or
/// {"zoo": "onnx", "onnx": FILE}) that builds it. For an ONNX teacher file both are the file.
struct SavedTeacher {
  std::string weights_path;  ///< .safetensors, or the .onnx file of an ONNX teacher
  nlohmann::json model_config;
  std::string origin;  ///< how it was found, for the run's events ("store artifact of run X", ...)
};

/// Resolves a run or file teacher. A run goes through `resolve_run` (the caller's: lathe-cli looks in
/// the run store); without one, through the run folder <runs_root>/<ref>/. Throws ConfigError /
/// DataError naming distill.teacher and what was looked for.
SavedTeacher resolve_saved_teacher(const TeacherSpec& spec, const RunResolver& resolve_run,
                                   const std::string& runs_root);

/// Builds (without params) the model a config's model section describes, for `image_shape` {C, H, W};
/// a zoo model gets `zoo_classes` outputs. Zoo and custom sections only: an ONNX section is a
/// ConfigError here (run/model_graph.h's build_model_graph builds every kind).
std::unique_ptr<Model> build_model_from_section(const nlohmann::json& model_config, const Shape& image_shape,
                                                int zoo_classes = 10);

}  // namespace lathe
