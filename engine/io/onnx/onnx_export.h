// Writing a Lathe Model as an ONNX model (Debian's libonnx): one ONNX node per Lathe node, with
// Lathe's node names, and its parameters as initializers named "<node>.<param>" (PyTorch's
// state_dict names). f32 weights as they are: a structurally pruned model is smaller, an
// unstructured-pruned one dense with its zeros. Every file passes onnx::checker before it is written.
// An INT8 model is written as QDQ (export_onnx_qdq): QuantizeLinear -> DequantizeLinear on every
// value Lathe holds quantized, with Lathe's scales and zero points, and each INT8 Linear/Conv2d's
// weights as an int8 initializer behind a DequantizeLinear with per-channel scales on axis 0, so
// ONNX Runtime or TensorRT see where Lathe quantizes and can fuse the pattern into integer kernels.
// No protobuf type in this header (the pipeline includes it); model_to_onnx is in onnx_proto.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "engine/backend/formats/quant_params.h"
#include "engine/nn/model.h"

namespace lathe {

struct OnnxExportOptions {
  int64_t opset = 13;
  std::string graph_name = "lathe";
  std::map<std::string, std::string> metadata;  ///< metadata_props, e.g. the run id
};

/// model_to_onnx, checked with onnx::checker, written atomically to `path`. Returns the file's bytes.
int64_t export_onnx(Model& model, Backend& backend, const std::string& path, const OnnxExportOptions& options = {});

/// One INT8 Linear/Conv2d as a QDQ graph holds it.
struct QdqLayer {
  Tensor weight_q;                  ///< host s8 [O, K] or [O, C, KH, KW], in the f32 layer's column order
  std::vector<float> weight_scale;  ///< [O], symmetric (zero points 0), axis 0
  Tensor bias;                      ///< host f32 [O], or undefined
  std::string folded_bn;            ///< a batchnorm2d node folded into the weights: left out of the graph
};

/// What an INT8 model quantizes, for export_onnx_qdq. Every reader of a value in `values` reads it
/// quantized and dequantized again.
struct QdqPlan {
  std::map<std::string, QdqLayer> layers;     ///< by node name
  std::map<std::string, QuantParams> values;  ///< by node name ("input": the model input); 8-bit per tensor
};

/// The QDQ form of `model` (its f32 nodes as export_onnx writes them, the layers of `plan` with
/// int8 weights), checked with onnx::checker (opset >= 13, for per-axis DequantizeLinear), written
/// atomically. Returns the file's bytes. ConfigError naming the node for a plan that does not fit.
int64_t export_onnx_qdq(Model& model, Backend& backend, const QdqPlan& plan, const std::string& path,
                        const OnnxExportOptions& options = {});

}  // namespace lathe
