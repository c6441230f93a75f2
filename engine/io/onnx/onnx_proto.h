// The ONNX protobuf types from Debian's libonnx (ONNX_NAMESPACE=onnx, ONNX_ML=1 come with the
// CMake target), plus the small conversions the importer and exporter share: reading and checking
// a file, initializers to and from host f32 tensors, and attribute look-ups.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/io/onnx/onnx_export.h"

namespace lathe {

/// Parses `path` and runs onnx::checker::check_model on it. DataError naming the file when it is
/// missing, not a protobuf ModelProto, or fails the checker.
onnx::ModelProto read_onnx_file(const std::string& path);

/// The checker's verdict on an in-memory model: empty when it passes, else its message.
std::string onnx_checker_problem(const onnx::ModelProto& model);

/// A FLOAT initializer as a host f32 tensor of its shape. DataError naming `what` for another
/// element type, external data, or a byte count that does not match the shape.
Tensor onnx_float_tensor(const onnx::TensorProto& t, const std::string& what);
/// An INT64 initializer's values (Reshape shapes). DataError naming `what` otherwise.
std::vector<int64_t> onnx_int64_values(const onnx::TensorProto& t, const std::string& what);

/// Fills `out` with a FLOAT initializer named `name` from a host tensor (any dtype, any layout;
/// written in logical row-major order as raw little-endian f32).
void fill_onnx_float_tensor(const std::string& name, const Tensor& host, onnx::TensorProto* out);

/// The attribute `name` of `node`, or nullptr.
const onnx::AttributeProto* onnx_attribute(const onnx::NodeProto& node, const std::string& name);

/// The graph export_onnx writes: input "input" [N, ...input_shape], output named after the last
/// node, weights copied from `backend`. ConfigError naming the node for a layer with no ONNX form
/// (e.g. a sparse executor).
onnx::ModelProto model_to_onnx(Model& model, Backend& backend, const OnnxExportOptions& options = {},
                               const QdqPlan* qdq = nullptr);

/// Fills `out` with an INT8 (s8 tensor) or UINT8/INT8 (zero point) initializer from host values.
void fill_onnx_int8_tensor(const std::string& name, const Tensor& host, onnx::TensorProto* out);

}  // namespace lathe
