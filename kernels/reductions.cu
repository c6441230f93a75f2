// Sum and sum-of-squares kernels (see reductions.cuh): pass 1 runs a capped grid-stride loop with
// float4 loads into per-thread double accumulators and writes one partial per block; pass 2 sums
// the partials in one block.
#include "kernels/reductions.cuh"

#include <algorithm>

#include "kernels/kernel_common.cuh"

namespace lathe::kernels {

// ------------------------------------------------------------------ kernels
namespace {

constexpr int kReduceBlocks = 1024;

template <bool kSquares>
__device__ __forceinline__ double term(float x) {
  const double d = x;
  return kSquares ? d * d : d;
}

template <bool kSquares, bool kVec>
__global__ void reduce_partials_kernel(const float* src, int64_t n, double* partials) {
  __shared__ double shared[32];
  const int64_t start = detail::global_thread(), stride = detail::grid_threads();
  double acc = 0;
  int64_t tail = 0;
  if constexpr (kVec) {
    const int64_t n4 = n / 4;
    const float4* s4 = reinterpret_cast<const float4*>(src);
    for (int64_t i = start; i < n4; i += stride) {
      const float4 v = s4[i];
      acc += term<kSquares>(v.x) + term<kSquares>(v.y) + term<kSquares>(v.z) + term<kSquares>(v.w);
    }
    tail = n4 * 4;
  }
  for (int64_t i = tail + start; i < n; i += stride)
    acc += term<kSquares>(src[i]);
  acc = detail::block_sum(acc, shared);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = acc;
}

__global__ void reduce_final_kernel(const double* partials, int count, double* result) {
  __shared__ double shared[32];
  double acc = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x)
    acc += partials[i];
  acc = detail::block_sum(acc, shared);
  if (threadIdx.x == 0)
    *result = acc;
}

template <bool kSquares>
void launch_partials(cudaStream_t stream, const float* src, int64_t n, double* partials, int blocks, bool vec) {
  if (vec) {
    reduce_partials_kernel<kSquares, true><<<blocks, detail::kBlock, 0, stream>>>(src, n, partials);
  } else {
    reduce_partials_kernel<kSquares, false><<<blocks, detail::kBlock, 0, stream>>>(src, n, partials);
  }
}

}  // namespace

// ------------------------------------------------------------------ launchers
size_t reduce_scratch_bytes() { return kReduceBlocks * sizeof(double); }

cudaError_t reduce_sum(cudaStream_t stream, const float* src, int64_t n, bool squares, void* scratch, double* result) {
  double* partials = static_cast<double*>(scratch);
  const bool vec = detail::aligned16(src);
  // Each thread of pass 1 handles at least 4 float4s before the grid reaches its cap.
  const int blocks =
      n <= 0
          ? 0
          : static_cast<int>(std::min<int64_t>((n + 16 * detail::kBlock - 1) / (16 * detail::kBlock), kReduceBlocks));
  if (blocks > 0) {
    if (squares) {
      launch_partials<true>(stream, src, n, partials, blocks, vec);
    } else {
      launch_partials<false>(stream, src, n, partials, blocks, vec);
    }
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
      return e;
  }
  reduce_final_kernel<<<1, 1024, 0, stream>>>(partials, blocks, result);
  return cudaGetLastError();
}

}  // namespace lathe::kernels
