// Launchers for inverted dropout. The keep mask comes from a counter-based hash of (seed, logical
// element index), so it needs no RNG state, is the same for any grid, and can be recomputed on the
// host (dropout_keep below) by tests. It is NOT the mask of ReferenceBackend, which draws from one
// sequential lathe::Rng stream: parity tests compare statistics and the masked relationship
// dst == mask ? src / (1 - p) : 0, never the masks themselves.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/reorder.cuh"

#ifdef __CUDACC__
#define LATHE_HOST_DEVICE __host__ __device__
#else
#define LATHE_HOST_DEVICE
#endif

namespace lathe::kernels {

/// splitmix64's finaliser: a bijective 64-bit mix.
LATHE_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Whether element `index` is kept: u = 53 random bits of mix(mix(seed) + (index + 1) * golden)
/// scaled to [0, 1), kept when u >= p (so p = 0 keeps everything).
LATHE_HOST_DEVICE inline bool dropout_keep(uint64_t seed, uint64_t index, double p) {
  const uint64_t h = mix64(mix64(seed ^ 0x9e3779b97f4a7c15ull) + (index + 1) * 0x9e3779b97f4a7c15ull);
  return static_cast<double>(h >> 11) * 0x1.0p-53 >= p;
}

/// mask[i] = keep(seed, i); dst[i] = mask[i] ? src[i] / (1 - p) : 0, i the logical row-major index;
/// mask is dense u8 in logical order, src and dst any layout of the same shape.
[[nodiscard]] cudaError_t dropout_forward(cudaStream_t stream, const float* src, const TensorLayout& src_layout,
                                          float* dst, const TensorLayout& dst_layout, uint8_t* mask, int64_t n,
                                          double p, uint64_t seed);
/// diff_src[i] = mask[i] ? diff_dst[i] / (1 - p) : 0
[[nodiscard]] cudaError_t dropout_backward(cudaStream_t stream, const float* diff_dst,
                                           const TensorLayout& diff_dst_layout, const uint8_t* mask, float* diff_src,
                                           const TensorLayout& diff_src_layout, int64_t n, double p);

}  // namespace lathe::kernels
