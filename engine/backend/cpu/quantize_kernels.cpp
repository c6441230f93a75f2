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

}  // namespace

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
