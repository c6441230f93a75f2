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

// ---------------------------------------------------------------- the lighter ops
void Backend::copy(const Tensor& src, Tensor& dst) {
  contract::copy("copy", src, dst, false);
  copy_impl(src, dst);
}

void Backend::reorder(const Tensor& src, Tensor& dst) {
  contract::copy("reorder", src, dst, true);
  reorder_impl(src, dst);
}

void Backend::maxpool2d_forward(const PoolParams& p, const Tensor& src, Tensor& dst, Tensor& workspace) {
  contract::maxpool2d_forward(p, src, dst);
  maxpool2d_forward_impl(p, src, dst, workspace);
}

void Backend::maxpool2d_backward(const PoolParams& p, const Tensor& diff_dst, const Tensor& workspace,
                                 Tensor& diff_src) {
  contract::maxpool2d_backward(p, diff_dst, workspace, diff_src);
  maxpool2d_backward_impl(p, diff_dst, workspace, diff_src);
}

void Backend::relu_forward(const Tensor& src, Tensor& dst) {
  contract::same_shape("relu_forward", {&src, &dst});
  relu_forward_impl(src, dst);
}

void Backend::relu_backward(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) {
  contract::same_shape("relu_backward", {&dst, &diff_dst, &diff_src});
  relu_backward_impl(dst, diff_dst, diff_src);
}

void Backend::add(const Tensor& a, const Tensor& b, Tensor& dst) {
  contract::same_shape("add", {&a, &b, &dst});
  add_impl(a, b, dst);
}

void Backend::axpy(double alpha, const Tensor& src, Tensor& dst) {
  contract::same_shape("axpy", {&src, &dst});
  axpy_impl(alpha, src, dst);
}

void Backend::scale(Tensor& t, double alpha) {
  contract::float_tensor("scale", t);
  scale_impl(t, alpha);
}

void Backend::batchnorm_forward_training(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                         const Tensor& beta, Tensor& dst, Tensor& save_mean, Tensor& save_invstd,
                                         Tensor& running_mean, Tensor& running_var) {
  contract::batchnorm("batchnorm_forward_training", src, dst,
                      {&gamma, &beta, &save_mean, &save_invstd, &running_mean, &running_var});
  batchnorm_forward_training_impl(p, src, gamma, beta, dst, save_mean, save_invstd, running_mean, running_var);
}

void Backend::batchnorm_forward_inference(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                          const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                                          Tensor& dst) {
  contract::batchnorm("batchnorm_forward_inference", src, dst, {&gamma, &beta, &running_mean, &running_var});
  batchnorm_forward_inference_impl(p, src, gamma, beta, running_mean, running_var, dst);
}

void Backend::batchnorm_backward(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma,
                                 const Tensor& save_mean, const Tensor& save_invstd, Tensor& diff_src,
                                 Tensor& diff_gamma, Tensor& diff_beta) {
  contract::same_shape("batchnorm_backward", {&src, &diff_dst});
  contract::batchnorm("batchnorm_backward", src, diff_src, {&gamma, &save_mean, &save_invstd, &diff_gamma, &diff_beta});
  batchnorm_backward_impl(src, diff_dst, gamma, save_mean, save_invstd, diff_src, diff_gamma, diff_beta);
}

void Backend::dropout_forward(double p, uint64_t seed, const Tensor& src, Tensor& dst, Tensor& mask) {
  contract::dropout("dropout_forward", p, src, dst, nullptr);  // the backend (re)allocates mask
  dropout_forward_impl(p, seed, src, dst, mask);
}

void Backend::dropout_backward(double p, const Tensor& diff_dst, const Tensor& mask, Tensor& diff_src) {
  contract::dropout("dropout_backward", p, diff_dst, diff_src, &mask);
  dropout_backward_impl(p, diff_dst, mask, diff_src);
}

LossResult Backend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* diff_logits,
                                          double grad_scale) {
  contract::softmax_cross_entropy(logits, labels, diff_logits);
  return softmax_cross_entropy_impl(logits, labels, diff_logits, grad_scale);
}

void Backend::sgd_update(const SgdParams& p, Tensor& param, const Tensor& grad, Tensor& momentum_buf) {
  if (p.momentum != 0)
    contract::same_shape("sgd_update", {&param, &grad, &momentum_buf});
  else
    contract::same_shape("sgd_update", {&param, &grad});
  sgd_update_impl(p, param, grad, momentum_buf);
}

void Backend::adamw_update(const AdamWParams& p, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) {
  contract::same_shape("adamw_update", {&param, &grad, &m, &v});
  adamw_update_impl(p, param, grad, m, v);
}

double Backend::sum(const Tensor& t) {
  contract::defined_tensor("sum", t);
  return sum_impl(t);
}

double Backend::sum_squares(const Tensor& t) {
  contract::defined_tensor("sum_squares", t);
  return sum_squares_impl(t);
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
