// Backend helpers shared by every implementation, and the factory that picks one by name.
#include "engine/backend/backend.h"

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/backend/op_contract.h"

#include <mutex>
#include <optional>

namespace lathe {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::linear:
      return "linear";
    case Op::conv2d:
      return "conv2d";
    case Op::maxpool2d:
      return "maxpool2d";
    case Op::relu:
      return "relu";
    case Op::add:
      return "add";
    case Op::batchnorm2d:
      return "batchnorm2d";
    case Op::dropout:
      return "dropout";
    case Op::softmax_cross_entropy:
      return "softmax_cross_entropy";
    case Op::sgd_update:
      return "sgd_update";
    case Op::adamw_update:
      return "adamw_update";
    case Op::reorder:
      return "reorder";
    case Op::reduce_sum:
      return "reduce_sum";
    case Op::scale:
      return "scale";
    case Op::sparse_matmul:
      return "sparse_matmul";
    case Op::quantize:
      return "quantize";
    case Op::dequantize:
      return "dequantize";
  }
  return "?";
}

int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  LATHE_CHECK(stride > 0 && kernel > 0, "kernel and stride must be positive");
  const int64_t out = (in + 2 * pad - kernel) / stride + 1;
  LATHE_CHECK(out > 0, "input size ", in, " too small for kernel ", kernel, " with padding ", pad);
  return out;
}

Tensor Backend::empty(const Shape& shape, DType dtype, MemoryFormat format) {
  return Tensor::empty(shape, dtype, device(), format);
}

Tensor Backend::zeros(const Shape& shape, DType dtype, MemoryFormat format) {
  Tensor t = empty(shape, dtype, format);
  fill_zero(t);
  return t;
}

void Backend::round_to_precision(const Tensor& src, Tensor& dst, DType precision) {
  LATHE_CHECK(precision == DType::bf16 || precision == DType::f16,
              "round_to_precision: precision must be bf16 or f16, got ", dtype_name(precision));
  LATHE_CHECK(src.dtype() == DType::f32 && dst.dtype() == DType::f32 && src.shape() == dst.shape(),
              "round_to_precision: f32 tensors of one shape expected, got ", src.describe(), " -> ", dst.describe());
  Tensor low = empty(src.shape(), precision, src.format());
  reorder(src, low);
  reorder(low, dst);
}

void Backend::linear_forward(const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst, PostOp post) {
  contract::linear_forward(src, weights, bias, dst);
  linear_forward_impl(src, weights, bias, dst, post);
}

void Backend::conv2d_forward(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                             Tensor& dst, PostOp post) {
  contract::conv2d_forward(p, src, weights, bias, dst);
  conv2d_forward_impl(p, src, weights, bias, dst, post);
}

void Backend::linear_backward_data(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) {
  contract::linear_backward_data(diff_dst, weights, diff_src);
  linear_backward_data_impl(diff_dst, weights, diff_src);
}

void Backend::linear_backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                                      Tensor* diff_bias) {
  contract::linear_backward_weights(src, diff_dst, diff_weights, diff_bias);
  linear_backward_weights_impl(src, diff_dst, diff_weights, diff_bias);
}

void Backend::conv2d_backward_data(const ConvParams& p, const Tensor& diff_dst, const Tensor& weights,
                                   Tensor& diff_src) {
  contract::conv2d_forward(p, diff_src, weights, nullptr, diff_dst, "conv2d_backward_data");
  conv2d_backward_data_impl(p, diff_dst, weights, diff_src);
}

void Backend::conv2d_backward_weights(const ConvParams& p, const Tensor& src, const Tensor& diff_dst,
                                      Tensor& diff_weights, Tensor* diff_bias) {
  contract::conv2d_forward(p, src, diff_weights, diff_bias, diff_dst, "conv2d_backward_weights");
  conv2d_backward_weights_impl(p, src, diff_dst, diff_weights, diff_bias);
}

// ---------------------------------------------------------------- compressed execution
void Backend::require(Op op, DType dtype, const char* what) const {
  if (!supports(op, dtype))
    throw ConfigError(std::string(what) + " at " + std::string(dtype_name(dtype)) + " is not supported by backend '" +
                      name() + "' (" + device_name() + ")");
}

std::unique_ptr<Int8Kernel> Backend::make_int8_kernel(const Int8LayerData& layer, const ConvParams* conv) {
  contract::int8_layer(layer, conv);
  require(conv ? Op::conv2d : Op::linear, layer.src_dtype(), conv ? "int8 conv2d" : "int8 linear");
  return make_int8_kernel_impl(layer, conv);
}

std::unique_ptr<SparseMatmulKernel> Backend::make_sparse_matmul(const CsrMatrix& a,
                                                                const SparseMatmulOptions& options) {
  contract::sparse_matrix(a);
  require(Op::sparse_matmul, DType::f32, "sparse_matmul");
  return make_sparse_matmul_impl(a, options);
}

void Backend::quantize(const Tensor& src, const QuantParams& params, Tensor& dst) {
  contract::quantize(src, params, dst);
  require(Op::quantize, dst.dtype(), "quantize");
  if (src.numel())
    quantize_impl(src, params, dst);
}

void Backend::dequantize(const Tensor& src, const QuantParams& params, Tensor& dst) {
  contract::dequantize(src, params, dst);
  require(Op::dequantize, src.dtype(), "dequantize");
  if (src.numel())
    dequantize_impl(src, params, dst);
}

void Backend::int8_maxpool2d(const PoolParams& p, const Tensor& src, Tensor& dst) {
  contract::int8_maxpool2d(p, src, dst);
  require(Op::maxpool2d, src.dtype(), "int8 maxpool2d");
  if (dst.numel())
    int8_maxpool2d_impl(p, src, dst);
}

void Backend::int8_relu(Tensor& t, int32_t zero_point) {
  contract::int8_relu(t);
  require(Op::relu, t.dtype(), "int8 relu");
  if (t.numel())
    int8_relu_impl(t, zero_point);
}

// Reached only when supports() says yes but the backend forgot the implementation.
std::unique_ptr<Int8Kernel> Backend::make_int8_kernel_impl(const Int8LayerData&, const ConvParams*) {
  LATHE_FAIL("backend '", name(), "' claims INT8 kernels but implements none");
}
std::unique_ptr<SparseMatmulKernel> Backend::make_sparse_matmul_impl(const CsrMatrix&, const SparseMatmulOptions&) {
  LATHE_FAIL("backend '", name(), "' claims sparse_matmul but implements none");
}
void Backend::quantize_impl(const Tensor&, const QuantParams&, Tensor&) {
  LATHE_FAIL("backend '", name(), "' claims quantize but implements none");
}
void Backend::dequantize_impl(const Tensor&, const QuantParams&, Tensor&) {
  LATHE_FAIL("backend '", name(), "' claims dequantize but implements none");
}
void Backend::int8_maxpool2d_impl(const PoolParams&, const Tensor&, Tensor&) {
  LATHE_FAIL("backend '", name(), "' claims int8 maxpool2d but implements none");
}
void Backend::int8_relu_impl(Tensor&, int32_t) {
  LATHE_FAIL("backend '", name(), "' claims int8 relu but implements none");
}

// ---------------------------------------------------------------- registry
namespace {

struct Registered {
  std::string name;
  BackendFactory factory;
  DeviceCount count;
};

int one_device() { return 1; }
std::unique_ptr<Backend> make_reference(int) { return std::make_unique<ReferenceBackend>(); }
std::unique_ptr<Backend> make_cpu(int) { return std::make_unique<DnnlBackend>(); }

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::vector<Registered>& registry() {
  static std::vector<Registered> r{{"reference", &make_reference, &one_device}, {"cpu", &make_cpu, &one_device}};
  return r;
}

std::optional<Registered> find_backend(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (const Registered& r : registry())
    if (r.name == name)
      return r;
  return std::nullopt;
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory, DeviceCount device_count) {
  LATHE_CHECK(!name.empty() && name != "auto" && factory && device_count, "register_backend: bad entry '", name, "'");
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (Registered& r : registry())
    if (r.name == name) {
      r = {name, factory, device_count};
      return;
    }
  registry().push_back({name, factory, device_count});
}

std::vector<std::string> registered_backends() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const Registered& r : registry())
    names.push_back(r.name);
  return names;
}

int backend_device_count(const std::string& name) {
  const std::optional<Registered> r = find_backend(name);
  return r ? r->count() : 0;
}

int cuda_device_count() { return backend_device_count("cuda"); }

std::unique_ptr<Backend> make_backend(const std::string& name, int device_index) {
  if (name == "auto") {
    // The first registered accelerator with a device (built-in host backends come first), else cpu.
    for (const std::string& n : registered_backends())
      if (n != "reference" && n != "cpu" && backend_device_count(n) > device_index)
        return make_backend(n, device_index);
    return make_backend("cpu", 0);
  }
  const std::optional<Registered> r = find_backend(name);
  if (!r) {
    if (name == "cuda")
      throw ConfigError(
          "backend 'cuda' is not available: this build has no CUDA backend "
          "(rebuild with -DLATHE_CUDA=ON where the CUDA toolkit is installed)");
    std::string allowed = "auto";
    for (const std::string& n : registered_backends())
      allowed += ", " + n;
    throw ConfigError("unknown backend '" + name + "': allowed " + allowed);
  }
  const int n = r->count();
  const std::string label = name == "cuda" ? "CUDA" : name;
  if (n == 0)
    throw ConfigError("backend '" + name + "' is not available: no " + label +
                      " device or driver found on this machine");
  if (device_index < 0 || device_index >= n)
    throw ConfigError(label + " device " + std::to_string(device_index) + " requested but only " + std::to_string(n) +
                      " present");
  return r->factory(device_index);
}

}  // namespace lathe
