// Backend helpers shared by every implementation, and the factory that picks one by name.
#include "engine/backend/backend.h"

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"

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

namespace {
BackendFactory g_cuda_factory = nullptr;
int (*g_cuda_count)() = nullptr;
}  // namespace

void register_cuda_backend(BackendFactory factory, int (*device_count)()) {
  g_cuda_factory = factory;
  g_cuda_count = device_count;
}

int cuda_device_count() { return g_cuda_count ? g_cuda_count() : 0; }

std::unique_ptr<Backend> make_backend(const std::string& name, int device_index) {
  if (name == "reference")
    return std::make_unique<ReferenceBackend>();
  if (name == "cpu")
    return std::make_unique<DnnlBackend>();
  if (name == "cuda" || name == "auto") {
    if (!g_cuda_factory) {
      if (name == "auto")
        return std::make_unique<DnnlBackend>();
      throw ConfigError(
          "backend 'cuda' is not available: this build has no CUDA backend "
          "(rebuild with -DLATHE_CUDA=ON where the CUDA toolkit is installed)");
    }
    const int n = cuda_device_count();
    if (n == 0) {
      if (name == "auto")
        return std::make_unique<DnnlBackend>();
      throw ConfigError("backend 'cuda' is not available: no CUDA device or driver found on this machine");
    }
    if (device_index >= n)
      throw ConfigError("CUDA device " + std::to_string(device_index) + " requested but only " + std::to_string(n) +
                        " present");
    return g_cuda_factory(device_index);
  }
  throw ConfigError("unknown backend '" + name + "': allowed auto, cpu, cuda, reference");
}

}  // namespace lathe
