// CudaContext: stream, library handles, buffers (see cuda_context.h).
#include "engine/backend/cuda/cuda_context.h"

#include <algorithm>

#include "engine/backend/cuda/cuda_check.h"

namespace lathe::cuda {

namespace {

Tensor grow(Tensor& buffer, size_t bytes, Device device) {
  if (!buffer.defined() || buffer.nbytes() < bytes) {
    // Grow by half again so a sequence of slightly larger requests does not reallocate each time.
    const size_t want = buffer.defined() ? std::max(bytes, buffer.nbytes() + buffer.nbytes() / 2) : bytes;
    buffer = Tensor();  // back to the cache first, so the allocator can reuse the block
    buffer = Tensor::empty({static_cast<int64_t>(std::max<size_t>(want, 256))}, DType::u8, device);
  }
  return buffer;
}

}  // namespace

CudaContext::CudaContext(int device) : m_device(device) {
  LATHE_CUDA_CHECK(cudaSetDevice(device));
  LATHE_CUDA_CHECK(cudaGetDeviceProperties(&m_props, device));
  LATHE_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
  LATHE_CUDA_CHECK(cudaMallocHost(&m_pinned, 64));
  m_allocator = CudaAllocator::for_device(device);
  if (m_allocator)
    m_allocator->add_stream(m_stream);
}

CudaContext::~CudaContext() {
  // Destructors never throw: errors during teardown are ignored.
  (void)cudaSetDevice(m_device);
  if (m_stream)
    (void)cudaStreamSynchronize(m_stream);
  if (m_cudnn)
    (void)cudnnDestroy(m_cudnn);
  if (m_cublas)
    (void)cublasDestroy(m_cublas);
  m_workspace = Tensor();
  m_scratch = Tensor();
  if (m_pinned)
    (void)cudaFreeHost(m_pinned);
  if (m_allocator && m_stream)
    m_allocator->remove_stream(m_stream);  // synchronised above: its guard events have completed
  if (m_stream)
    (void)cudaStreamDestroy(m_stream);
  (void)cudaGetLastError();
}

StreamScope CudaContext::activate() const {
  int current = -1;
  LATHE_CUDA_CHECK(cudaGetDevice(&current));
  if (current != m_device)
    LATHE_CUDA_CHECK(cudaSetDevice(m_device));
  return StreamScope(m_device, m_stream);
}

void CudaContext::synchronize() const { LATHE_CUDA_CHECK(cudaStreamSynchronize(m_stream)); }

cublasHandle_t CudaContext::cublas() {
  if (!m_cublas) {
    LATHE_CUBLAS_CHECK(cublasCreate(&m_cublas));
    LATHE_CUBLAS_CHECK(cublasSetStream(m_cublas, m_stream));
    LATHE_CUBLAS_CHECK(cublasSetPointerMode(m_cublas, CUBLAS_POINTER_MODE_HOST));
    LATHE_CUBLAS_CHECK(cublasSetMathMode(m_cublas, m_allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  }
  return m_cublas;
}

cudnnHandle_t CudaContext::cudnn() {
  if (!m_cudnn) {
    LATHE_CUDNN_CHECK(cudnnCreate(&m_cudnn));
    LATHE_CUDNN_CHECK(cudnnSetStream(m_cudnn, m_stream));
  }
  return m_cudnn;
}

void CudaContext::set_allow_tf32(bool allow) {
  if (allow == m_allow_tf32)
    return;
  m_allow_tf32 = allow;
  if (m_cublas)
    LATHE_CUBLAS_CHECK(cublasSetMathMode(m_cublas, allow ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  m_conv_cache.clear();  // choices depend on the math type
}

void* CudaContext::workspace(size_t bytes) {
  if (bytes == 0)
    return nullptr;
  return grow(m_workspace, bytes, lathe_device()).raw();
}

void* CudaContext::scratch(size_t bytes) {
  if (bytes == 0)
    bytes = 256;
  return grow(m_scratch, bytes, lathe_device()).raw();
}

}  // namespace lathe::cuda
