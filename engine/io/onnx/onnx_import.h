// Reading an ONNX model (Debian's libonnx) into a Lathe Model graph: each supported node becomes a
// Lathe node, its initializers the node's weights (NCHW, as PyTorch exports). Anything Lathe cannot
// run exactly (an op, an attribute value, a layout) is refused before any work starts, with the
// node's name, its op and what is supported; nothing is approximated.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/nn/model.h"

namespace lathe {

struct OnnxImport {
  std::unique_ptr<Model> model;                         ///< the graph; create_params() not yet called
  std::vector<std::pair<std::string, Tensor>> weights;  ///< host tensors by Lathe name "<node>.<param>"
  std::string path, sha256;                             ///< the file and the digest of its bytes
  int64_t opset = 0;                                    ///< the default domain's opset version
  std::vector<std::string> notes;                       ///< what the import left out, e.g. a final Softmax
};

/// Reads and checks `path` (onnx::checker, opsets 11-17, supported ops and attributes) and builds
/// the model. ConfigError for what Lathe does not support, DataError for a broken file.
OnnxImport import_onnx(const std::string& path);

/// Copies the imported weights into `model`, whose params exist (create_params() first).
void load_onnx_weights(Model& model, Backend& backend, const OnnxImport& imported);

/// ConfigError unless the model takes `image_shape` ([C, H, W]) images, as such or flattened to
/// [C*H*W] (an MLP's input).
void check_onnx_input(const Model& model, const Shape& image_shape);

/// The ONNX ops the importer accepts, for messages and documentation.
const std::vector<std::string>& onnx_supported_ops();

}  // namespace lathe
