// Packing, epilogue and quantization kernels of the GPU INT8 linear layer (see int8_gemm_io.cuh).
// Every kernel is a grid-stride loop over elements; the float steps use explicit round-to-nearest
// intrinsics so nvcc cannot contract them into FMAs (the CPU reference rounds each step).
#include "kernels/int8_gemm_io.cuh"

#include "kernels/kernel_common.cuh"

namespace lathe::kernels {

// ------------------------------------------------------------------ kernels
namespace {

__global__ void pack_rows_kernel(const void* src, bool src_unsigned, int64_t rows, int64_t cols, int64_t ld_src,
                                 int8_t* dst, int64_t ld_dst) {
  const int64_t n = rows * ld_dst;
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) {
    const int64_t r = i / ld_dst, c = i % ld_dst;
    int v = 0;
    if (c < cols)
      v = src_unsigned ? static_cast<int>(static_cast<const uint8_t*>(src)[r * ld_src + c]) - 128
                       : static_cast<int>(static_cast<const int8_t*>(src)[r * ld_src + c]);
    dst[i] = static_cast<int8_t>(v);
  }
}

__global__ void epilogue_kernel(const int32_t* acc, int64_t rows, int64_t cols, int64_t ld_acc, const int32_t* comp,
                                const float* bias_acc, const float* out_scale, bool relu, Int8Out out, float zero_point,
                                int qmin, int qmax, void* dst) {
  const int64_t n = rows * cols;
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) {
    const int64_t r = i / cols, o = i % cols;
    const int32_t a = acc[r * ld_acc + o] + comp[o];
    float y = __fmul_rn(out_scale[o], __fadd_rn(__int2float_rn(a), bias_acc[o]));
    if (relu)
      y = fmaxf(y, 0.0f);
    if (out == Int8Out::f32) {
      static_cast<float*>(dst)[i] = y;
      continue;
    }
    int q = __float2int_rn(__fadd_rn(y, zero_point));
    q = min(max(q, qmin), qmax);
    if (out == Int8Out::s8)
      static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(q);
    else
      static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(q);
  }
}

__global__ void quantize_kernel(const float* x, int64_t n, float scale, int zero_point, int qmin, int qmax,
                                bool out_unsigned, void* dst) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) {
    const double r = rint(__ddiv_rn(static_cast<double>(x[i]), static_cast<double>(scale))) + zero_point;
    const int q = !(r >= qmin) ? qmin : (r > qmax ? qmax : static_cast<int>(r));
    if (out_unsigned)
      static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(q);
    else
      static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(q);
  }
}

__global__ void im2col_nhwc_kernel(const uint8_t* src, int64_t n, int64_t c, int64_t h, int64_t w, int64_t stride_n,
                                   int64_t stride_h, int64_t stride_w, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                                   int64_t ph, int64_t pw, int64_t oh, int64_t ow, uint8_t pad_value, uint8_t* dst) {
  const int64_t cols = kh * kw * c, total = n * oh * ow * cols;
  for (int64_t i = detail::global_thread(); i < total; i += detail::grid_threads()) {
    const int64_t row = i / cols, col = i % cols;
    const int64_t ch = col % c, kx = (col / c) % kw, ky = col / (c * kw);
    const int64_t x = row % ow, y = (row / ow) % oh, b = row / (ow * oh);
    const int64_t iy = y * sh - ph + ky, ix = x * sw - pw + kx;
    dst[i] =
        (iy < 0 || iy >= h || ix < 0 || ix >= w) ? pad_value : src[b * stride_n + iy * stride_h + ix * stride_w + ch];
  }
}

}  // namespace

// ------------------------------------------------------------------ launchers

cudaError_t int8_im2col_nhwc(cudaStream_t stream, const uint8_t* src, int64_t n, int64_t c, int64_t h, int64_t w,
                             int64_t stride_n, int64_t stride_h, int64_t stride_w, int64_t kh, int64_t kw, int64_t sh,
                             int64_t sw, int64_t ph, int64_t pw, int64_t oh, int64_t ow, uint8_t pad_value,
                             uint8_t* dst) {
  const int64_t total = n * oh * ow * kh * kw * c;
  if (total <= 0)
    return cudaSuccess;
  im2col_nhwc_kernel<<<detail::grid_for(total), detail::kBlock, 0, stream>>>(
      src, n, c, h, w, stride_n, stride_h, stride_w, kh, kw, sh, sw, ph, pw, oh, ow, pad_value, dst);
  return cudaGetLastError();
}

cudaError_t int8_pack_rows(cudaStream_t stream, const void* src, bool src_unsigned, int64_t rows, int64_t cols,
                           int64_t ld_src, int8_t* dst, int64_t ld_dst) {
  if (rows <= 0 || ld_dst <= 0)
    return cudaSuccess;
  pack_rows_kernel<<<detail::grid_for(rows * ld_dst), detail::kBlock, 0, stream>>>(src, src_unsigned, rows, cols,
                                                                                   ld_src, dst, ld_dst);
  return cudaGetLastError();
}

cudaError_t int8_epilogue(cudaStream_t stream, const int32_t* acc, int64_t rows, int64_t cols, int64_t ld_acc,
                          const int32_t* comp, const float* bias_acc, const float* out_scale, bool relu, Int8Out out,
                          float zero_point, int qmin, int qmax, void* dst) {
  if (rows <= 0 || cols <= 0)
    return cudaSuccess;
  epilogue_kernel<<<detail::grid_for(rows * cols), detail::kBlock, 0, stream>>>(
      acc, rows, cols, ld_acc, comp, bias_acc, out_scale, relu, out, zero_point, qmin, qmax, dst);
  return cudaGetLastError();
}

cudaError_t int8_quantize(cudaStream_t stream, const float* x, int64_t n, float scale, int zero_point, int qmin,
                          int qmax, bool out_unsigned, void* dst) {
  if (n <= 0)
    return cudaSuccess;
  quantize_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(x, n, scale, zero_point, qmin, qmax, out_unsigned,
                                                                      dst);
  return cudaGetLastError();
}

}  // namespace lathe::kernels
