// ONNX protobuf helpers: file reading with the checker, initializer conversions, attributes.
#include "engine/io/onnx/onnx_proto.h"

#include <onnx/checker.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"

namespace lathe {

onnx::ModelProto read_onnx_file(const std::string& path) {
  // A regular file of at most protobuf's 2 GiB: never a device or a pipe read without end.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw DataError(path + ": cannot open the ONNX file (" +
                    (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file") + ")");
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size > (uintmax_t{1} << 31) - 1)
    throw DataError(path + ": the ONNX file is larger than protobuf's 2 GiB limit (" + std::to_string(size) +
                    " bytes); weights in external data files are not supported");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw DataError(path + ": cannot open the ONNX file");
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::string data = bytes.str();
  onnx::ModelProto model;
  if (data.empty() || !model.ParseFromString(data))
    throw DataError(path + ": not an ONNX model (the file does not parse as an onnx.ModelProto)");
  // Current exporters (torch.onnx's) write IR 9 or 10, which this libonnx (1.12, IR 8) refuses to
  // check. What Lathe imports (opsets 11-17, FLOAT weights) is IR 8 material, and the importer
  // refuses everything else itself, so the file is checked as IR 8.
  const int64_t ir = model.ir_version();
  if (ir > onnx::IR_VERSION)
    model.set_ir_version(onnx::IR_VERSION);
  const std::string problem = onnx_checker_problem(model);
  model.set_ir_version(ir);
  if (!problem.empty())
    throw DataError(path + ": the ONNX checker rejects the model: " + problem);
  return model;
}

std::string onnx_checker_problem(const onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {  // onnx::checker::ValidationError and schema errors
    std::string text = e.what();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    return text.empty() ? "unspecified checker failure" : text;
  }
  return "";
}

namespace {

Shape dims_of(const onnx::TensorProto& t, const std::string& what) {
  Shape shape;
  for (int64_t d : t.dims()) {
    if (d < 0)
      throw DataError(what + ": negative dimension " + std::to_string(d));
    shape.push_back(d);
  }
  return shape;
}

void require_embedded(const onnx::TensorProto& t, const std::string& what) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw DataError(what + ": initializer '" + t.name() +
                    "' keeps its data in an external file; Lathe reads ONNX files with embedded weights only "
                    "(save with onnx.save_model(..., save_as_external_data=False))");
}

}  // namespace

Tensor onnx_float_tensor(const onnx::TensorProto& t, const std::string& what) {
  require_embedded(t, what);
  if (t.data_type() != onnx::TensorProto::FLOAT)
    throw DataError(what + ": initializer '" + t.name() + "' has ONNX element type " + std::to_string(t.data_type()) +
                    "; only FLOAT (1) weights are supported");
  const Shape shape = dims_of(t, what);
  const int64_t n = shape_numel(shape);
  Tensor out = Tensor::empty(shape, DType::f32);
  float* dst = out.data<float>();
  if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != n * 4)
      throw DataError(what + ": initializer '" + t.name() + "' holds " + std::to_string(t.raw_data().size()) +
                      " bytes, its shape " + shape_str(shape) + " needs " + std::to_string(n * 4));
    std::memcpy(dst, t.raw_data().data(), static_cast<size_t>(n) * 4);  // little-endian, as the host
  } else {
    if (t.float_data_size() != n)
      throw DataError(what + ": initializer '" + t.name() + "' holds " + std::to_string(t.float_data_size()) +
                      " values, its shape " + shape_str(shape) + " needs " + std::to_string(n));
    for (int64_t i = 0; i < n; ++i)
      dst[i] = t.float_data(static_cast<int>(i));
  }
  return out;
}

std::vector<int64_t> onnx_int64_values(const onnx::TensorProto& t, const std::string& what) {
  require_embedded(t, what);
  if (t.data_type() != onnx::TensorProto::INT64)
    throw DataError(what + ": tensor '" + t.name() + "' has ONNX element type " + std::to_string(t.data_type()) +
                    ", expected INT64 (7)");
  const int64_t n = shape_numel(dims_of(t, what));
  std::vector<int64_t> v(static_cast<size_t>(n));
  if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != n * 8)
      throw DataError(what + ": tensor '" + t.name() + "' has a byte count that does not match its shape");
    std::memcpy(v.data(), t.raw_data().data(), v.size() * 8);
  } else {
    if (t.int64_data_size() != n)
      throw DataError(what + ": tensor '" + t.name() + "' has a value count that does not match its shape");
    for (int64_t i = 0; i < n; ++i)
      v[static_cast<size_t>(i)] = t.int64_data(static_cast<int>(i));
  }
  return v;
}

void fill_onnx_float_tensor(const std::string& name, const Tensor& host, onnx::TensorProto* out) {
  out->set_name(name);
  out->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : host.shape())
    out->add_dims(d);
  std::string raw(static_cast<size_t>(host.numel()) * 4, '\0');
  float* dst = reinterpret_cast<float*>(raw.data());
  if (host.dtype() == DType::f32 && host.is_dense() && host.format() == MemoryFormat::contiguous) {
    std::memcpy(dst, host.data<float>(), raw.size());
  } else {
    for (int64_t i = 0; i < host.numel(); ++i)
      dst[i] = static_cast<float>(host.at_flat(i));
  }
  out->set_raw_data(std::move(raw));
}

void fill_onnx_int8_tensor(const std::string& name, const Tensor& host, onnx::TensorProto* out) {
  LATHE_CHECK(host.device().is_cpu() && (host.dtype() == DType::s8 || host.dtype() == DType::u8), "ONNX export: ", name,
              " must be a host s8/u8 tensor, got ", host.describe());
  out->set_name(name);
  out->set_data_type(host.dtype() == DType::s8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  for (int64_t d : host.shape())
    out->add_dims(d);
  std::string raw(static_cast<size_t>(host.numel()), '\0');
  if (host.is_contiguous()) {
    std::memcpy(raw.data(), host.raw(), raw.size());
  } else {
    for (int64_t i = 0; i < host.numel(); ++i)
      raw[static_cast<size_t>(i)] = static_cast<char>(static_cast<int64_t>(host.at_flat(i)));
  }
  out->set_raw_data(std::move(raw));
}

const onnx::AttributeProto* onnx_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

}  // namespace lathe
