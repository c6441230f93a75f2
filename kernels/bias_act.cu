// Bias + ReLU and bias-gradient kernels (see bias_act.cuh).
// bias_act: inner == 1 runs columns across threads (coalesced rows); inner > 1 runs one (o, c)
// plane per grid row with threads along the plane. channel_sums: two deterministic passes, partial
// sums per chunk of `outer` rows into scratch (double), then one thread block per channel group.
#include "kernels/bias_act.cuh"

#include <algorithm>

#include "kernels/kernel_common.cuh"

namespace lathe::kernels {

// ------------------------------------------------------------------ kernels
namespace {

constexpr int kMaxGridY = 65535;
constexpr int64_t kRowsPerChunk = 256;
constexpr int64_t kMaxChunks = 1024;

__global__ void bias_act_rows_kernel(float* y, int64_t rows, int64_t cols, int64_t ld, const float* bias, bool relu) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols)
    return;
  const float b = bias ? bias[c] : 0.0f;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float v = y[r * ld + c] + b;
    if (relu && v < 0.0f)
      v = 0.0f;
    y[r * ld + c] = v;
  }
}

__global__ void bias_act_planes_kernel(float* y, int64_t planes, int64_t channels, int64_t inner, int64_t row_stride,
                                       const float* bias, bool relu) {
  for (int64_t p = blockIdx.y; p < planes; p += gridDim.y) {
    const int64_t o = p / channels, c = p % channels;
    const float b = bias ? bias[c] : 0.0f;
    float* plane = y + o * row_stride + c * inner;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < inner;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      float v = plane[i] + b;
      if (relu && v < 0.0f)
        v = 0.0f;
      plane[i] = v;
    }
  }
}

// Pass 1 for inner == 1: block (32, 8) covers 32 columns; grid.y = chunk of kRowsPerChunk rows.
__global__ void column_partials_kernel(const float* src, int64_t rows, int64_t cols, int64_t ld, int64_t rows_per_chunk,
                                       double* partials) {
  __shared__ double acc[8][33];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  double s = 0;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8)
      s += src[r * ld + c];
  acc[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    double t = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k)
      t += acc[k][threadIdx.x];
    partials[static_cast<int64_t>(blockIdx.y) * cols + c] = t;
  }
}

// Pass 1 for inner > 1: block per (channel, chunk of outer rows), threads along the plane.
__global__ void plane_partials_kernel(const float* src, int64_t outer, int64_t channels, int64_t inner,
                                      int64_t row_stride, int64_t rows_per_chunk, double* partials) {
  __shared__ double shared[32];
  const int64_t c = blockIdx.x;
  const int64_t o0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t o1 = min(outer, o0 + rows_per_chunk);
  double s = 0;
  for (int64_t o = o0; o < o1; ++o) {
    const float* plane = src + o * row_stride + c * inner;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
      s += plane[i];
  }
  s = detail::block_sum(s, shared);
  if (threadIdx.x == 0)
    partials[static_cast<int64_t>(blockIdx.y) * channels + c] = s;
}

// Pass 2: dst[c] = sum over chunks of partials[chunk, c], in chunk order.
__global__ void sum_partials_kernel(const double* partials, int64_t chunks, int64_t channels, float* dst) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels)
    return;
  double s = 0;
  for (int64_t k = 0; k < chunks; ++k)
    s += partials[k * channels + c];
  dst[c] = static_cast<float>(s);
}

int64_t chunks_for(int64_t outer) {
  return std::clamp<int64_t>((outer + kRowsPerChunk - 1) / kRowsPerChunk, 1, kMaxChunks);
}

}  // namespace

// ------------------------------------------------------------------ launchers
cudaError_t bias_act(cudaStream_t stream, float* y, int64_t outer, int64_t channels, int64_t inner, int64_t row_stride,
                     const float* bias, bool relu) {
  if (outer <= 0 || channels <= 0 || inner <= 0)
    return cudaSuccess;
  if (!bias && !relu)
    return cudaSuccess;
  if (inner == 1) {
    const dim3 grid(static_cast<unsigned>((channels + detail::kBlock - 1) / detail::kBlock),
                    static_cast<unsigned>(std::min<int64_t>(outer, kMaxGridY)));
    bias_act_rows_kernel<<<grid, detail::kBlock, 0, stream>>>(y, outer, channels, row_stride, bias, relu);
  } else {
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((inner + detail::kBlock - 1) / detail::kBlock, 64)),
                    static_cast<unsigned>(std::min<int64_t>(outer * channels, kMaxGridY)));
    bias_act_planes_kernel<<<grid, detail::kBlock, 0, stream>>>(y, outer * channels, channels, inner, row_stride, bias,
                                                                relu);
  }
  return cudaGetLastError();
}

size_t channel_sums_scratch_bytes(int64_t outer, int64_t channels, int64_t inner) {
  return static_cast<size_t>(chunks_for(outer) * channels) * sizeof(double);
}

cudaError_t channel_sums(cudaStream_t stream, const float* src, int64_t outer, int64_t channels, int64_t inner,
                         int64_t row_stride, float* dst, void* scratch) {
  if (channels <= 0)
    return cudaSuccess;
  double* partials = static_cast<double*>(scratch);
  const int64_t chunks = chunks_for(outer);
  if (outer <= 0 || inner <= 0)
    return cudaMemsetAsync(dst, 0, channels * sizeof(float), stream);
  const int64_t rows_per_chunk = (outer + chunks - 1) / chunks;
  if (inner == 1) {
    const dim3 grid(static_cast<unsigned>((channels + 31) / 32), static_cast<unsigned>(chunks));
    column_partials_kernel<<<grid, dim3(32, 8), 0, stream>>>(src, outer, channels, row_stride, rows_per_chunk,
                                                             partials);
  } else {
    const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(chunks));
    plane_partials_kernel<<<grid, detail::kBlock, 0, stream>>>(src, outer, channels, inner, row_stride, rows_per_chunk,
                                                               partials);
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return e;
  sum_partials_kernel<<<static_cast<unsigned>((channels + detail::kBlock - 1) / detail::kBlock), detail::kBlock, 0,
                        stream>>>(partials, chunks, channels, dst);
  return cudaGetLastError();
}

}  // namespace lathe::kernels
