// See quantize_kernels.h. The loop body is quantize_value() written so the compiler can vectorise it
// (std::nearbyint is a round instruction under the current, round-to-nearest-even, mode); chunks of
// 16 Ki elements go to the OpenMP threads, so the MNIST batch of 256 (200 Ki values) takes 13 chunks.
#include "engine/backend/cpu/quantize_kernels.h"

#include <algorithm>
#include <cmath>

namespace lathe::cpu {

namespace {

template <typename Q>
void quantize_range(const float* in, Q* out, int64_t n, double scale, double zp, double qmin, double qmax) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    double r = std::nearbyint(static_cast<double>(in[i]) / scale) + zp;
    r = r >= qmin ? r : qmin;  // NaN fails the comparison and goes to qmin, as in quantize_value
    r = r > qmax ? qmax : r;
    out[i] = static_cast<Q>(static_cast<int32_t>(r));
  }
}

/// quantize_range's loop, then back to f32 as dequantize_value: (q - zero point) in f32 times the f32 scale.
void fake_quantize_range(const float* in, float* out, int64_t n, float scale, int32_t zero_point, double qmin,
                         double qmax) {
  const double s = scale, z = zero_point;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    double r = std::nearbyint(static_cast<double>(in[i]) / s) + z;
    r = r >= qmin ? r : qmin;
    r = r > qmax ? qmax : r;
    out[i] = static_cast<float>(static_cast<int32_t>(r) - zero_point) * scale;
  }
}

}  // namespace

void fake_quantize_blocks(const float* in, float* out, int64_t channels, int64_t inner, const float* scale,
                          const int32_t* zero_point, int32_t qmin, int32_t qmax) {
  constexpr int64_t kChunk = 16384;
  const int64_t per_block = std::max<int64_t>(1, (inner + kChunk - 1) / kChunk), units = channels * per_block;
  const double lo = qmin, hi = qmax;
  // Parallel over (block, chunk of the block) pairs, so both a large per-tensor array and a weight of
  // many small channels spread over the threads; small tensors stay on the calling thread.
#pragma omp parallel for schedule(static) if (channels * inner > kChunk)
  for (int64_t u = 0; u < units; ++u) {
    const int64_t c = u / per_block, b = c * inner + (u % per_block) * kChunk;
    const int64_t len = std::min(kChunk, (c + 1) * inner - b);
    if (len > 0)
      fake_quantize_range(in + b, out + b, len, scale[c], zero_point[c], lo, hi);
  }
}

void quantize_per_tensor(const float* in, void* out, bool is_signed, int64_t n, float scale, int32_t zero_point,
                         int32_t qmin, int32_t qmax) {
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const double s = scale, z = zero_point, lo = qmin, hi = qmax;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk, len = std::min(kChunk, n - b);
    if (is_signed)
      quantize_range(in + b, static_cast<int8_t*>(out) + b, len, s, z, lo, hi);
    else
      quantize_range(in + b, static_cast<uint8_t*>(out) + b, len, s, z, lo, hi);
  }
}

}  // namespace lathe::cpu
