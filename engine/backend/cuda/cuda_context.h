// CudaContext: everything one CudaBackend needs on its device, owned by the backend (no globals):
// the stream all work is issued on, the cuBLAS and cuDNN handles (created on first use, bound to the
// stream), the math mode (TF32 off unless asked for), a grow-only cuDNN workspace, a scratch buffer
// for our kernels' partial results, a small pinned host buffer for scalars read back, and the
// per-shape cache of chosen convolution algorithms. The stream is registered with the device's
// caching allocator for the context's lifetime.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_allocator.h"
#include "engine/core/tensor.h"

namespace lathe::cuda {

/// A cuDNN algorithm chosen for one convolution problem, and the workspace it needs.
struct ConvAlgoChoice {
  int algo = -1;
  size_t workspace_bytes = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
};

class CudaContext {
 public:
  explicit CudaContext(int device);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return m_device; }
  Device lathe_device() const { return Device::cuda(m_device); }
  cudaStream_t stream() const { return m_stream; }
  const cudaDeviceProp& properties() const { return m_props; }

  /// Makes this context's device current on the calling thread, and for the returned scope marks
  /// this context's stream as the one the thread's allocations on the device are for (so blocks
  /// freed with only this stream's work pending are reused at once; see cuda_allocator.h). Every op
  /// starts with `const StreamScope scope = ctx.activate();`.
  [[nodiscard]] StreamScope activate() const;
  void synchronize() const;

  cublasHandle_t cublas();
  cudnnHandle_t cudnn();

  /// TF32 tensor-core math for f32 GEMMs and convolutions: off by default, so results match the
  /// f32 reference to ~1e-6; benchmarks may turn it on.
  bool allow_tf32() const { return m_allow_tf32; }
  void set_allow_tf32(bool allow);
  /// cudnnFind (timed) instead of cudnnGet_v7 (heuristic) for convolution algorithms.
  bool benchmark_conv_algos() const { return m_benchmark_conv; }
  void set_benchmark_conv_algos(bool on) { m_benchmark_conv = on; }
  /// Upper bound on a convolution workspace (default 1 GiB).
  size_t max_workspace_bytes() const { return m_max_workspace; }

  /// Device buffers of at least `bytes`, valid until the next call of the same function; stream-
  /// ordered (safe to reuse for the next op on this stream).
  void* workspace(size_t bytes);
  void* scratch(size_t bytes);
  /// Pinned host memory for small results copied back (64 bytes).
  void* pinned_host() const { return m_pinned; }

  std::map<std::vector<int64_t>, ConvAlgoChoice>& conv_algo_cache() { return m_conv_cache; }

 private:
  int m_device;
  cudaDeviceProp m_props{};
  cudaStream_t m_stream = nullptr;
  cublasHandle_t m_cublas = nullptr;
  cudnnHandle_t m_cudnn = nullptr;
  bool m_allow_tf32 = false;
  bool m_benchmark_conv = false;
  size_t m_max_workspace = size_t{1} << 30;
  Tensor m_workspace;  // u8 on the device, counted by the allocator
  Tensor m_scratch;
  void* m_pinned = nullptr;
  CudaAllocator* m_allocator = nullptr;  // the device's, where registered: knows our stream
  std::map<std::vector<int64_t>, ConvAlgoChoice> m_conv_cache;
};

}  // namespace lathe::cuda
