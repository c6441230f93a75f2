// CudaBackend's core: registration with the engine, device queries, and the memory ops (fill,
// copy between host and device in any layouts, dtype reorder). The compute ops live in
// cuda_backend_ops.cpp (our kernels), cublas_ops.cpp and cudnn_ops.cpp.
#include "engine/backend/cuda/cuda_backend.h"

#include <mutex>

#include "engine/backend/cuda/cublas_ops.h"
#include "engine/backend/cuda/cuda_allocator.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "engine/backend/cuda/cuda_tensor_util.h"
#include "engine/backend/cuda/cudnn_ops.h"

namespace lathe::cuda {

// ------------------------------------------------------------------ registration
namespace {

struct DeviceProbe {
  int count = 0;
  std::string reason;
};

/// Asked once per process: devices do not come and go while it runs.
const DeviceProbe& probe() {
  static const DeviceProbe result = [] {
    DeviceProbe p;
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      p.reason = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    } else if (n <= 0) {
      p.reason = "the CUDA runtime reports no device";
    } else {
      p.count = n;
    }
    return p;
  }();
  return result;
}

std::unique_ptr<Backend> make_cuda_backend(int device_index) { return std::make_unique<CudaBackend>(device_index); }

}  // namespace

int device_count() { return probe().count; }

std::string device_unavailable_reason() { return probe().reason; }

void register_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    const int n = device_count();
    // Allocators live for the whole process, deliberately never deleted: tensors held in statics
    // may be freed after main() returns, and must find their allocator then.
    for (int i = 0; i < n; ++i)
      register_allocator(Device::cuda(i), new CudaAllocator(i));
    register_backend("cuda", &make_cuda_backend, &device_count);
  });
}

// ------------------------------------------------------------------ device
CudaBackend::CudaBackend(int device_index) {
  LATHE_CHECK(device_index >= 0 && device_index < device_count(), "CUDA device ", device_index, " is not available (",
              device_count(), " present", device_count() ? "" : ": ", device_unavailable_reason(), ")");
  m_ctx = std::make_unique<CudaContext>(device_index);
}

CudaBackend::~CudaBackend() = default;

Device CudaBackend::device() const { return m_ctx->lathe_device(); }

std::string CudaBackend::device_name() const { return m_ctx->properties().name; }

int CudaBackend::multiprocessors() const { return m_ctx->properties().multiProcessorCount; }

int CudaBackend::compute_capability() const { return m_ctx->properties().major * 10 + m_ctx->properties().minor; }

bool CudaBackend::supports(Op op, DType dtype) const { return supports_on(op, dtype, compute_capability()); }

bool CudaBackend::supports_on(Op op, DType dtype, int cc) {
  // The 8-bit list: cuBLASLt int8 linear/conv2d (keyed by src dtype), integer pooling and ReLU,
  // quantize (the CPU's rounding); sparse_matmul: cuSPARSE at f32 (cuda_compressed.cpp).
  if (dtype == DType::s8 || dtype == DType::u8)
    return op == Op::linear || op == Op::conv2d || op == Op::maxpool2d || op == Op::relu || op == Op::quantize;
  if (op == Op::quantize || op == Op::dequantize)
    return false;
  if (op == Op::reorder)
    return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
  // Mixed-precision matmuls and convolutions: f16 on tensor cores from Volta (sm_70), bf16 from
  // Ampere (sm_80); bf16/f16 operands, f32 accumulation and f32 results (cublas_ops, cudnn_ops).
  if (op == Op::linear || op == Op::conv2d) {
    if (dtype == DType::f16)
      return cc >= 70;
    if (dtype == DType::bf16)
      return cc >= 80;
  }
  return dtype == DType::f32;
}

void CudaBackend::synchronize() { m_ctx->synchronize(); }

cudaStream_t CudaBackend::stream() const { return m_ctx->stream(); }

void CudaBackend::set_allow_tf32(bool allow) { m_ctx->set_allow_tf32(allow); }

void CudaBackend::set_benchmark_conv_algos(bool on) { m_ctx->set_benchmark_conv_algos(on); }

// ------------------------------------------------------------------ memory
void CudaBackend::fill_zero(Tensor& t) {
  check_on_device(*m_ctx, t, "fill_zero");
  const StreamScope scope = m_ctx->activate();
  if (t.numel() == 0)
    return;
  if (t.is_dense()) {
    LATHE_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.nbytes(), m_ctx->stream()));
  } else {
    LATHE_CUDA_CHECK(kernels::strided_zero(m_ctx->stream(), t.raw(), layout_of(t), t.numel(),
                                           static_cast<int>(dtype_size(t.dtype()))));
  }
}

namespace {

bool on_host(const Tensor& t) { return t.device().is_cpu(); }

}  // namespace

void CudaBackend::copy_impl(const Tensor& src, Tensor& dst) {
  if (on_host(src) && on_host(dst)) {
    src.copy_to(dst);
    return;
  }
  for (const Tensor* t : std::initializer_list<const Tensor*>{&src, &dst})
    LATHE_CHECK(on_host(*t) || t->device().kind == DeviceKind::cuda, "copy: unsupported device ", t->describe());
  const StreamScope scope = m_ctx->activate();
  cudaStream_t s = m_ctx->stream();
  if (src.numel() == 0)
    return;
  const bool same_layout = same_dense_layout(src, dst);

  if (!on_host(src) && !on_host(dst)) {
    if (src.device() == dst.device()) {
      device_strided_copy(*m_ctx, src, dst);
      return;
    }
    LATHE_CHECK(same_layout, "copy between CUDA devices needs one dense layout on both sides: ", src.describe(), " -> ",
                dst.describe());
    LATHE_CUDA_CHECK(
        cudaMemcpyPeerAsync(dst.raw(), dst.device().index, src.raw(), src.device().index, src.nbytes(), s));
    LATHE_CUDA_CHECK(cudaStreamSynchronize(s));
    return;
  }

  if (on_host(src)) {  // host -> device
    check_on_device(*m_ctx, dst, "copy");
    if (same_layout) {
      LATHE_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyHostToDevice, s));
      return;
    }
    // Upload as laid out on the host, then let the GPU reorder.
    const Tensor host = is_standard_dense(src) ? src : src.contiguous_copy();
    Tensor staged = device_empty(*m_ctx, src.shape(), src.dtype(), standard_format(host));
    LATHE_CUDA_CHECK(cudaMemcpyAsync(staged.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, s));
    device_strided_copy(*m_ctx, staged, dst);
    // Pageable host -> device copies return once the source is staged, so `host` may go now.
    return;
  }

  // device -> host: reorder on the GPU into the host tensor's layout, then one transfer.
  check_on_device(*m_ctx, src, "copy");
  if (same_layout) {
    LATHE_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, s));
    LATHE_CUDA_CHECK(cudaStreamSynchronize(s));
    return;
  }
  const MemoryFormat format = is_standard_dense(dst) ? standard_format(dst) : MemoryFormat::contiguous;
  Tensor staged = device_empty(*m_ctx, src.shape(), src.dtype(), format);
  device_strided_copy(*m_ctx, src, staged);
  if (is_standard_dense(dst)) {
    LATHE_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), staged.raw(), staged.nbytes(), cudaMemcpyDeviceToHost, s));
    LATHE_CUDA_CHECK(cudaStreamSynchronize(s));
  } else {
    Tensor host = Tensor::empty(src.shape(), src.dtype());
    LATHE_CUDA_CHECK(cudaMemcpyAsync(host.raw(), staged.raw(), staged.nbytes(), cudaMemcpyDeviceToHost, s));
    LATHE_CUDA_CHECK(cudaStreamSynchronize(s));
    host.copy_to(dst);
  }
}

void CudaBackend::reorder_impl(const Tensor& src, Tensor& dst) {
  if (src.dtype() == dst.dtype()) {
    copy(src, dst);
    return;
  }
  (void)elem_type(src.dtype(), "reorder");  // explains an unsupported dtype before any staging
  (void)elem_type(dst.dtype(), "reorder");
  const StreamScope scope = m_ctx->activate();
  // Host operands are staged through device tensors in their own dtype; the conversion runs on the GPU.
  Tensor dev_src = src;
  if (on_host(src)) {
    dev_src = device_empty(*m_ctx, src.shape(), src.dtype(),
                           is_standard_dense(src) ? standard_format(src) : MemoryFormat::contiguous);
    copy(src, dev_src);
  }
  check_on_device(*m_ctx, dev_src, "reorder");
  Tensor dev_dst = dst;
  if (on_host(dst))
    dev_dst = device_empty(*m_ctx, dst.shape(), dst.dtype(),
                           is_standard_dense(dst) ? standard_format(dst) : MemoryFormat::contiguous);
  device_convert(*m_ctx, dev_src, dev_dst);
  if (on_host(dst))
    copy(dev_dst, dst);
}

// ------------------------------------------------------------------ dense layers and convolutions
void CudaBackend::linear_forward_impl(const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                                      PostOp post) {
  cuda::linear_forward(*m_ctx, src, weights, bias, dst, post);
}

void CudaBackend::linear_backward_data_impl(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) {
  cuda::linear_backward_data(*m_ctx, diff_dst, weights, diff_src);
}

void CudaBackend::linear_backward_weights_impl(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                                               Tensor* diff_bias) {
  cuda::linear_backward_weights(*m_ctx, src, diff_dst, diff_weights, diff_bias);
}

void CudaBackend::conv2d_forward_impl(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                                      Tensor& dst, PostOp post) {
  cuda::conv2d_forward(*m_ctx, p, src, weights, bias, dst, post);
}

void CudaBackend::conv2d_backward_data_impl(const ConvParams& p, const Tensor& diff_dst, const Tensor& weights,
                                            Tensor& diff_src) {
  cuda::conv2d_backward_data(*m_ctx, p, diff_dst, weights, diff_src);
}

void CudaBackend::conv2d_backward_weights_impl(const ConvParams& p, const Tensor& src, const Tensor& diff_dst,
                                               Tensor& diff_weights, Tensor* diff_bias) {
  cuda::conv2d_backward_weights(*m_ctx, p, src, diff_dst, diff_weights, diff_bias);
}

}  // namespace lathe::cuda
