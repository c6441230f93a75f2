// Non-overlapping max pooling over channels-last f32/bf16 with one-byte argmax (see maxpool_kernels.h).
// Plain loops over the channels that the compiler vectorises (-march=native: AVX-512 compares and
// masked blends); bf16 values are compared as the f32 they widen to and copied as their bits.
#include "engine/backend/cpu/maxpool_kernels.h"

#include <algorithm>
#include <cstdint>

#include "engine/core/dtype.h"

namespace lathe::cpu {

namespace {

inline float key(float v) { return v; }
inline float key(uint16_t v) { return bf16_to_f32(v); }  // a bf16's value: the top half of the f32's bits

constexpr int64_t kParallelMin = 65536;  // elements below which one thread is faster

struct PoolGeometry {
  int64_t N, C, H, W, OH, OW, KH, KW;
};

/// 2x2 windows: the four taps of a channel vector compared in registers.
template <typename T>
void forward_2x2(const PoolGeometry& g, const T* src, T* dst, uint8_t* idx) {
  const int64_t C = g.C, W = g.W, H = g.H, OH = g.OH, OW = g.OW;
#pragma omp parallel for schedule(static) if (g.N * OH * OW * C > kParallelMin)
  for (int64_t row = 0; row < g.N * OH; ++row) {
    const int64_t n = row / OH, oh = row % OH;
    const T* r0 = src + (n * H + 2 * oh) * W * C;
    const T* r1 = r0 + W * C;
    T* out = dst + row * OW * C;
    uint8_t* at = idx + row * OW * C;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const T* a = r0 + 2 * ow * C;
      const T* b = r1 + 2 * ow * C;
      T* o = out + ow * C;
      uint8_t* x = at + ow * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        T best = a[c];
        float bk = key(best);
        uint8_t where = 0;
        const T v1 = a[C + c], v2 = b[c], v3 = b[C + c];
        if (key(v1) > bk) {  // strictly greater: the first maximum wins; a NaN never replaces nor is replaced
          best = v1;
          bk = key(v1);
          where = 1;
        }
        if (key(v2) > bk) {
          best = v2;
          bk = key(v2);
          where = 2;
        }
        if (key(v3) > bk) {
          best = v3;
          where = 3;
        }
        o[c] = best;
        x[c] = where;
      }
    }
  }
}

/// Any non-overlapping window: the taps in (kh, kw) order against the running maximum in dst.
template <typename T>
void forward_any(const PoolGeometry& g, const T* src, T* dst, uint8_t* idx) {
  const int64_t C = g.C, W = g.W, H = g.H, OH = g.OH, OW = g.OW, taps = g.KH * g.KW;
#pragma omp parallel for schedule(static) if (g.N * OH * OW * C > kParallelMin)
  for (int64_t row = 0; row < g.N * OH; ++row) {
    const int64_t n = row / OH, oh = row % OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const T* base = src + ((n * H + oh * g.KH) * W + ow * g.KW) * C;
      T* o = dst + (row * OW + ow) * C;
      uint8_t* x = idx + (row * OW + ow) * C;
      std::copy(base, base + C, o);
      std::fill(x, x + C, uint8_t{0});
      for (int64_t t = 1; t < taps; ++t) {
        const T* in = base + ((t / g.KW) * W + t % g.KW) * C;
        const auto tap = static_cast<uint8_t>(t);
#pragma omp simd
        for (int64_t c = 0; c < C; ++c)
          if (key(in[c]) > key(o[c])) {
            o[c] = in[c];
            x[c] = tap;
          }
      }
    }
  }
}

/// The input rows of output row (n, oh): zero the columns no window covers, and after the last
/// output row of an image the rows no window covers.
template <typename T>
void zero_uncovered(const PoolGeometry& g, T* dsrc, int64_t n, int64_t oh) {
  const int64_t C = g.C, W = g.W;
  if (g.OW * g.KW < W)
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      T* r = dsrc + ((n * g.H + oh * g.KH + kh) * W + g.OW * g.KW) * C;
      std::fill(r, r + (W - g.OW * g.KW) * C, T{0});
    }
  if (oh == g.OH - 1 && g.OH * g.KH < g.H) {
    T* r = dsrc + (n * g.H + g.OH * g.KH) * W * C;
    std::fill(r, r + (g.H - g.OH * g.KH) * W * C, T{0});
  }
}

template <typename T>
void backward_2x2(const PoolGeometry& g, const T* ddst, const uint8_t* idx, T* dsrc) {
  const int64_t C = g.C, W = g.W, H = g.H, OH = g.OH, OW = g.OW;
#pragma omp parallel for schedule(static) if (g.N * OH * OW * C > kParallelMin)
  for (int64_t row = 0; row < g.N * OH; ++row) {
    const int64_t n = row / OH, oh = row % OH;
    T* r0 = dsrc + (n * H + 2 * oh) * W * C;
    T* r1 = r0 + W * C;
    const T* dy = ddst + row * OW * C;
    const uint8_t* at = idx + row * OW * C;
    for (int64_t ow = 0; ow < OW; ++ow) {
      T* a = r0 + 2 * ow * C;
      T* b = r1 + 2 * ow * C;
      const T* d = dy + ow * C;
      const uint8_t* x = at + ow * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const T v = d[c];
        const uint8_t w = x[c];
        a[c] = w == 0 ? v : T{0};
        a[C + c] = w == 1 ? v : T{0};
        b[c] = w == 2 ? v : T{0};
        b[C + c] = w == 3 ? v : T{0};
      }
    }
    zero_uncovered(g, dsrc, n, oh);
  }
}

template <typename T>
void backward_any(const PoolGeometry& g, const T* ddst, const uint8_t* idx, T* dsrc) {
  const int64_t C = g.C, W = g.W, H = g.H, OH = g.OH, OW = g.OW, taps = g.KH * g.KW;
#pragma omp parallel for schedule(static) if (g.N * OH * OW * C > kParallelMin)
  for (int64_t row = 0; row < g.N * OH; ++row) {
    const int64_t n = row / OH, oh = row % OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      T* base = dsrc + ((n * H + oh * g.KH) * W + ow * g.KW) * C;
      const T* d = ddst + (row * OW + ow) * C;
      const uint8_t* x = idx + (row * OW + ow) * C;
      for (int64_t t = 0; t < taps; ++t) {
        T* out = base + ((t / g.KW) * W + t % g.KW) * C;
        const auto tap = static_cast<uint8_t>(t);
#pragma omp simd
        for (int64_t c = 0; c < C; ++c)
          out[c] = x[c] == tap ? d[c] : T{0};
      }
    }
    zero_uncovered(g, dsrc, n, oh);
  }
}

PoolGeometry geometry(const PoolParams& p, const Tensor& big, const Tensor& small) {
  return {big.dim(0), big.dim(1), big.dim(2), big.dim(3), small.dim(2), small.dim(3), p.kernel_h, p.kernel_w};
}

bool dense_nhwc(const Tensor& t) { return t.ndim() == 4 && t.is_channels_last() && t.is_dense(); }

}  // namespace

bool maxpool_nhwc_applies(const PoolParams& p, const Tensor& src, const Tensor& dst) {
  return src.device().is_cpu() && dst.device().is_cpu() && src.dtype() == dst.dtype() &&
         (src.dtype() == DType::f32 || src.dtype() == DType::bf16) && dense_nhwc(src) && dense_nhwc(dst) &&
         p.kernel_h == p.stride_h && p.kernel_w == p.stride_w && p.pad_h == 0 && p.pad_w == 0 &&
         p.kernel_h * p.kernel_w <= 255 && dst.dim(2) * p.kernel_h <= src.dim(2) &&
         dst.dim(3) * p.kernel_w <= src.dim(3);
}

void maxpool_nhwc_forward(const PoolParams& p, const Tensor& src, Tensor& dst, Tensor& index) {
  LATHE_CHECK(maxpool_nhwc_applies(p, src, dst),
              "maxpool_nhwc_forward: not a case these kernels take: ", src.describe(), " -> ", dst.describe());
  if (!is_maxpool_nhwc_index(index, dst))
    index = Tensor::empty(dst.shape(), DType::u8, Device::cpu(), MemoryFormat::channels_last);
  const PoolGeometry g = geometry(p, src, dst);
  const bool two = g.KH == 2 && g.KW == 2;
  auto* at = static_cast<uint8_t*>(index.raw());
  if (src.dtype() == DType::f32) {
    const auto* s = static_cast<const float*>(src.raw());
    auto* d = static_cast<float*>(dst.raw());
    two ? forward_2x2(g, s, d, at) : forward_any(g, s, d, at);
  } else {
    const auto* s = static_cast<const uint16_t*>(src.raw());
    auto* d = static_cast<uint16_t*>(dst.raw());
    two ? forward_2x2(g, s, d, at) : forward_any(g, s, d, at);
  }
}

bool is_maxpool_nhwc_index(const Tensor& index, const Tensor& diff_dst) {
  return index.defined() && index.dtype() == DType::u8 && index.shape() == diff_dst.shape() && dense_nhwc(index);
}

void maxpool_nhwc_backward(const PoolParams& p, const Tensor& diff_dst, const Tensor& index, Tensor& diff_src) {
  LATHE_CHECK(maxpool_nhwc_applies(p, diff_src, diff_dst) && is_maxpool_nhwc_index(index, diff_dst),
              "maxpool_nhwc_backward: not a case these kernels take: ", diff_dst.describe(), " -> ",
              diff_src.describe(), " with index ", index.describe());
  const PoolGeometry g = geometry(p, diff_src, diff_dst);
  const bool two = g.KH == 2 && g.KW == 2;
  const auto* at = static_cast<const uint8_t*>(index.raw());
  if (diff_dst.dtype() == DType::f32) {
    const auto* s = static_cast<const float*>(diff_dst.raw());
    auto* d = static_cast<float*>(diff_src.raw());
    two ? backward_2x2(g, s, at, d) : backward_any(g, s, at, d);
  } else {
    const auto* s = static_cast<const uint16_t*>(diff_dst.raw());
    auto* d = static_cast<uint16_t*>(diff_src.raw());
    two ? backward_2x2(g, s, at, d) : backward_any(g, s, at, d);
  }
}

}  // namespace lathe::cpu
