// Device-side helpers shared by the kernels in this folder (included by .cu files only): launch
// sizing for grid-stride loops, warp-shuffle and block reductions, and strided offset arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/reorder.cuh"

namespace lathe::kernels::detail {

constexpr int kBlock = 256;
/// Grid-stride loops cap the grid: 8192 blocks of 256 threads keep every SM of an H200 busy
/// (132 SMs x 2048 resident threads) while bounding launch size for huge tensors.
constexpr int64_t kMaxBlocks = 8192;

inline int grid_for(int64_t n, int block = kBlock) {
  int64_t blocks = (n + block - 1) / block;
  if (blocks < 1)
    blocks = 1;
  if (blocks > kMaxBlocks)
    blocks = kMaxBlocks;
  return static_cast<int>(blocks);
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
/// `shared` needs 32 elements. Deterministic: a fixed tree for a given block size.
template <class T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  T r = lane < warps ? shared[lane] : T(0);
  r = warp_sum(r);
  return r;
}

/// Element offset of the logical row-major index `i` in a right-aligned layout (fixed trip count,
/// so the layout stays in registers / the parameter bank instead of local memory).
__device__ __forceinline__ int64_t offset_of(const TensorLayout& l, int64_t i) {
  if (l.contiguous)
    return i;
  int64_t off = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    const int64_t s = l.sizes[d];
    if (s != 1) {
      off += (i % s) * l.strides[d];
      i /= s;
    }
  }
  return off;
}

}  // namespace lathe::kernels::detail
