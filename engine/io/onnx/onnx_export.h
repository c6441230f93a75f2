// Writing a Lathe Model as an ONNX model (Debian's libonnx): one ONNX node per Lathe node, with
// Lathe's node names, and its parameters as initializers named "<node>.<param>" (PyTorch's
// state_dict names). f32 weights as they are: a structurally pruned model is smaller, an
// unstructured-pruned one dense with its zeros. Every file passes onnx::checker before it is written.
// No protobuf type in this header (the pipeline includes it); model_to_onnx is in onnx_proto.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "engine/nn/model.h"

namespace lathe {

struct OnnxExportOptions {
  int64_t opset = 13;
  std::string graph_name = "lathe";
  std::map<std::string, std::string> metadata;  ///< metadata_props, e.g. the run id
};

/// model_to_onnx, checked with onnx::checker, written atomically to `path`. Returns the file's bytes.
int64_t export_onnx(Model& model, Backend& backend, const std::string& path, const OnnxExportOptions& options = {});

}  // namespace lathe
