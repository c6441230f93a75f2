// Integer max pooling and ReLU on channels-last 8-bit activations (see int8_pool.cuh).
#include "kernels/int8_pool.cuh"

#include "kernels/kernel_common.cuh"

namespace lathe::kernels {

// ------------------------------------------------------------------ kernels
namespace {

template <typename T>
__global__ void maxpool_nhwc_kernel(const T* src, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw,
                                    int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t oh, int64_t ow, T lowest,
                                    T* dst) {
  const int64_t total = n * oh * ow * c;
  for (int64_t i = detail::global_thread(); i < total; i += detail::grid_threads()) {
    const int64_t ch = i % c, x = (i / c) % ow, y = (i / (c * ow)) % oh, b = i / (c * ow * oh);
    T m = lowest;
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t iy = y * sh - ph + ky;
      if (iy < 0 || iy >= h)
        continue;
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int64_t ix = x * sw - pw + kx;
        if (ix < 0 || ix >= w)
          continue;
        const T v = src[((b * h + iy) * w + ix) * c + ch];
        m = v > m ? v : m;
      }
    }
    dst[i] = m;
  }
}

template <typename T>
__global__ void relu_kernel(T* x, int64_t count, T zero_point) {
  for (int64_t i = detail::global_thread(); i < count; i += detail::grid_threads())
    x[i] = x[i] < zero_point ? zero_point : x[i];
}

}  // namespace

// ------------------------------------------------------------------ launchers

cudaError_t int8_maxpool_nhwc(cudaStream_t stream, const void* src, bool is_signed, int64_t n, int64_t c, int64_t h,
                              int64_t w, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                              int64_t oh, int64_t ow, void* dst) {
  const int64_t total = n * oh * ow * c;
  if (total <= 0)
    return cudaSuccess;
  if (is_signed)
    maxpool_nhwc_kernel<int8_t><<<detail::grid_for(total), detail::kBlock, 0, stream>>>(
        static_cast<const int8_t*>(src), n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow, int8_t{-128},
        static_cast<int8_t*>(dst));
  else
    maxpool_nhwc_kernel<uint8_t><<<detail::grid_for(total), detail::kBlock, 0, stream>>>(
        static_cast<const uint8_t*>(src), n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow, uint8_t{0},
        static_cast<uint8_t*>(dst));
  return cudaGetLastError();
}

cudaError_t int8_relu(cudaStream_t stream, void* x, bool is_signed, int64_t count, int32_t zero_point) {
  if (count <= 0)
    return cudaSuccess;
  if (is_signed)
    relu_kernel<int8_t><<<detail::grid_for(count), detail::kBlock, 0, stream>>>(
        static_cast<int8_t*>(x), count,
        static_cast<int8_t>(zero_point < -128 ? -128 : (zero_point > 127 ? 127 : zero_point)));
  else
    relu_kernel<uint8_t><<<detail::grid_for(count), detail::kBlock, 0, stream>>>(
        static_cast<uint8_t*>(x), count,
        static_cast<uint8_t>(zero_point < 0 ? 0 : (zero_point > 255 ? 255 : zero_point)));
  return cudaGetLastError();
}

}  // namespace lathe::kernels
