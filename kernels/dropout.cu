// Dropout kernels (see dropout.cuh): one grid-stride pass; the scale is applied in double and
// rounded once, as ReferenceBackend does.
#include "kernels/dropout.cuh"

#include "kernels/kernel_common.cuh"

namespace lathe::kernels {

// ------------------------------------------------------------------ kernels
namespace {

__global__ void dropout_forward_kernel(const float* x, TensorLayout xl, float* y, TensorLayout yl, uint8_t* mask,
                                       int64_t n, double p, double keep_scale, uint64_t seed) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) {
    const bool keep = dropout_keep(seed, static_cast<uint64_t>(i), p);
    mask[i] = keep ? 1 : 0;
    y[detail::offset_of(yl, i)] = keep ? static_cast<float>(x[detail::offset_of(xl, i)] * keep_scale) : 0.0f;
  }
}

__global__ void dropout_backward_kernel(const float* dy, TensorLayout dyl, const uint8_t* mask, float* dx,
                                        TensorLayout dxl, int64_t n, double keep_scale) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads())
    dx[detail::offset_of(dxl, i)] = mask[i] ? static_cast<float>(dy[detail::offset_of(dyl, i)] * keep_scale) : 0.0f;
}

}  // namespace

// ------------------------------------------------------------------ launchers
cudaError_t dropout_forward(cudaStream_t stream, const float* src, const TensorLayout& src_layout, float* dst,
                            const TensorLayout& dst_layout, uint8_t* mask, int64_t n, double p, uint64_t seed) {
  if (n <= 0)
    return cudaSuccess;
  dropout_forward_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(src, src_layout, dst, dst_layout, mask, n,
                                                                             p, 1.0 / (1.0 - p), seed);
  return cudaGetLastError();
}

cudaError_t dropout_backward(cudaStream_t stream, const float* diff_dst, const TensorLayout& diff_dst_layout,
                             const uint8_t* mask, float* diff_src, const TensorLayout& diff_src_layout, int64_t n,
                             double p) {
  if (n <= 0)
    return cudaSuccess;
  dropout_backward_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(diff_dst, diff_dst_layout, mask, diff_src,
                                                                              diff_src_layout, n, 1.0 / (1.0 - p));
  return cudaGetLastError();
}

}  // namespace lathe::kernels
