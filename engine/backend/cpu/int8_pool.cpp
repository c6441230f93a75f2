// Integer max pooling over channels-last s8/u8 tensors (channels innermost: vectorised max) and ReLU.
#include "engine/backend/cpu/int8_pool.h"

#include <algorithm>
#include <limits>

namespace lathe {

namespace {

template <typename T>
void maxpool_nhwc(const T* src, T* dst, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW,
                  const PoolParams& p) {
#pragma omp parallel for schedule(static) if (N * OH * OW * C > 32768)
  for (int64_t row = 0; row < N * OH; ++row) {
    const int64_t n = row / OH, oh = row % OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      T* out = dst + ((n * OH + oh) * OW + ow) * C;
      std::fill(out, out + C, std::numeric_limits<T>::lowest());
      for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
        const int64_t ih = oh * p.stride_h - p.pad_h + kh;
        if (ih < 0 || ih >= H)
          continue;
        for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
          const int64_t iw = ow * p.stride_w - p.pad_w + kw;
          if (iw < 0 || iw >= W)
            continue;
          const T* in = src + ((n * H + ih) * W + iw) * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c)
            out[c] = std::max(out[c], in[c]);
        }
      }
    }
  }
}

/// 2x2, stride 2, no padding: out[c] = max of the four taps, channels innermost (vpmaxub/vpmaxsb).
template <typename T>
void maxpool_2x2_nhwc(const T* src, T* dst, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW) {
#pragma omp parallel for schedule(static) if (N * OH * OW * C > 262144)
  for (int64_t row = 0; row < N * OH; ++row) {
    const int64_t n = row / OH, oh = row % OH;
    const T* r0 = src + (n * H + 2 * oh) * W * C;
    const T* r1 = r0 + W * C;
    T* out = dst + row * OW * C;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const T* a = r0 + 2 * ow * C;
      const T* b = r1 + 2 * ow * C;
      T* o = out + ow * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        o[c] = std::max(std::max(a[c], a[C + c]), std::max(b[c], b[C + c]));
    }
  }
}

}  // namespace

Tensor int8_maxpool2d(const Tensor& src, const PoolParams& p) {
  LATHE_CHECK(src.device().is_cpu() && src.ndim() == 4 && (src.dtype() == DType::s8 || src.dtype() == DType::u8) &&
                  src.is_channels_last(),
              "int8_maxpool2d: src must be host [N, C, H, W] s8/u8 channels-last, got ", src.describe());
  const int64_t OH = conv_out_size(src.dim(2), p.kernel_h, p.stride_h, p.pad_h);
  const int64_t OW = conv_out_size(src.dim(3), p.kernel_w, p.stride_w, p.pad_w);
  Tensor dst = Tensor::empty({src.dim(0), src.dim(1), OH, OW}, src.dtype(), Device::cpu(), MemoryFormat::channels_last);
  int8_maxpool2d_into(src, p, dst);
  return dst;
}

void int8_maxpool2d_into(const Tensor& src, const PoolParams& p, Tensor& dst) {
  const int64_t N = src.dim(0), C = src.dim(1), H = src.dim(2), W = src.dim(3), OH = dst.dim(2), OW = dst.dim(3);
  if (src.dtype() == DType::s8)
    maxpool_nhwc(static_cast<const int8_t*>(src.raw()), static_cast<int8_t*>(dst.raw()), N, C, H, W, OH, OW, p);
  else
    maxpool_nhwc(static_cast<const uint8_t*>(src.raw()), static_cast<uint8_t*>(dst.raw()), N, C, H, W, OH, OW, p);
}

void int8_maxpool2d_fast_into(const Tensor& src, const PoolParams& p, Tensor& dst) {
  const int64_t N = src.dim(0), C = src.dim(1), H = src.dim(2), W = src.dim(3), OH = dst.dim(2), OW = dst.dim(3);
  const bool two_by_two = p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 &&
                          p.pad_w == 0 && 2 * OH <= H && 2 * OW <= W;
  if (!two_by_two || !src.is_channels_last() || !dst.is_channels_last() || !src.is_dense() || !dst.is_dense()) {
    int8_maxpool2d_into(src, p, dst);
    return;
  }
  if (src.dtype() == DType::s8)
    maxpool_2x2_nhwc(static_cast<const int8_t*>(src.raw()), static_cast<int8_t*>(dst.raw()), N, C, H, W, OH, OW);
  else
    maxpool_2x2_nhwc(static_cast<const uint8_t*>(src.raw()), static_cast<uint8_t*>(dst.raw()), N, C, H, W, OH, OW);
}

void int8_relu_inplace(Tensor& t, int32_t zero_point) {
  LATHE_CHECK(t.device().is_cpu() && t.is_dense() && (t.dtype() == DType::s8 || t.dtype() == DType::u8),
              "int8_relu_inplace: needs a dense host s8/u8 tensor, got ", t.describe());
  const int64_t n = t.numel();
  if (t.dtype() == DType::s8) {
    int8_t* d = static_cast<int8_t*>(t.raw());
    const int8_t z = static_cast<int8_t>(std::clamp(zero_point, -128, 127));
    for (int64_t i = 0; i < n; ++i)
      d[i] = std::max(d[i], z);
  } else {
    uint8_t* d = static_cast<uint8_t*>(t.raw());
    const uint8_t z = static_cast<uint8_t>(std::clamp(zero_point, 0, 255));
    for (int64_t i = 0; i < n; ++i)
      d[i] = std::max(d[i], z);
  }
}

}  // namespace lathe
