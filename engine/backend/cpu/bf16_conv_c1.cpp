// See bf16_conv_c1.h. 3x3 kernels: the nine taps' weights of a 16-channel block (forward) or the nine
// gradient sums of one (weight gradient) stay in registers while the pixels of an image stream by.
// GCC 12 warns about its own AVX-512 headers here (a known false positive of -Wmaybe-uninitialized).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "engine/backend/cpu/bf16_conv_c1.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "engine/core/error.h"

namespace lathe::cpu {

namespace {

constexpr int64_t kK = 3, kTaps = kK * kK, kBf16Block = 16;

struct Bf16Geometry {
  int64_t N, H, W, O, OH, OW, Hp, Wp, sh, sw, ph, pw;
};

Bf16Geometry geometry(const ConvParams& p, const Tensor& src, int64_t O, const Tensor& out) {
  Bf16Geometry g{src.dim(0), src.dim(2), src.dim(3), O,          out.dim(2), out.dim(3),
                 0,          0,          p.stride_h, p.stride_w, p.pad_h,    p.pad_w};
  g.Hp = std::max(g.H + 2 * g.ph, (g.OH - 1) * g.sh + kK);
  g.Wp = std::max(g.W + 2 * g.pw, (g.OW - 1) * g.sw + kK);
  return g;
}

bool cpu_has_bf16() {
  static const bool has = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & need) == need;
  }();
  return has;
}

/// Image n of src (bf16, rows of W values) widened into its place in pad (Hp x Wp f32, zero border).
void fill_padded(const Bf16Geometry& g, const Tensor& src, int64_t n, std::vector<float>& pad) {
  std::fill(pad.begin(), pad.end(), 0.f);
  const auto* x = static_cast<const uint16_t*>(src.raw()) + n * src.stride(0);
  for (int64_t h = 0; h < g.H; ++h) {
    float* row = pad.data() + (h + g.ph) * g.Wp + g.pw;
    const uint16_t* in = x + h * g.W;
    for (int64_t w = 0; w < g.W; ++w) {
      const uint32_t u = static_cast<uint32_t>(in[w]) << 16;
      std::memcpy(row + w, &u, 4);
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void forward_image(const Bf16Geometry& g, const float* pad,
                                                                          const float* wt, const float* bias, bool relu,
                                                                          bool out_bf16, void* out) {
  for (int64_t ob = 0; ob < g.O; ob += kBf16Block) {
    __m512 w[kTaps];
    for (int64_t t = 0; t < kTaps; ++t)
      w[t] = _mm512_loadu_ps(wt + t * g.O + ob);
    const __m512 b = bias ? _mm512_loadu_ps(bias + ob) : _mm512_setzero_ps();
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const float* r = pad + oh * g.sh * g.Wp;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const float* x = r + ow * g.sw;
        __m512 acc = b;
        for (int64_t kh = 0; kh < kK; ++kh)
          for (int64_t kw = 0; kw < kK; ++kw)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(x[kh * g.Wp + kw]), w[kh * kK + kw], acc);
        if (relu)
          acc = _mm512_max_ps(acc, _mm512_setzero_ps());
        const int64_t at = (oh * g.OW + ow) * g.O + ob;
        if (out_bf16)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(out) + at),
                              reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(acc)));
        else
          _mm512_storeu_ps(static_cast<float*>(out) + at, acc);
      }
    }
  }
}

/// Adds image n's weight-gradient sums into part ([tap][O], then the bias sums [O]).
__attribute__((target("avx512f,avx512bw"))) void backward_weights_image(const Bf16Geometry& g, const float* pad,
                                                                        const uint16_t* dy, float* part) {
  for (int64_t ob = 0; ob < g.O; ob += kBf16Block) {
    __m512 acc[kTaps];
    for (int64_t t = 0; t < kTaps; ++t)
      acc[t] = _mm512_setzero_ps();
    __m512 accb = _mm512_setzero_ps();
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const float* r = pad + oh * g.sh * g.Wp;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dy + (oh * g.OW + ow) * g.O + ob));
        const __m512 d = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // exact widening
        accb = _mm512_add_ps(accb, d);
        const float* x = r + ow * g.sw;
        for (int64_t kh = 0; kh < kK; ++kh)
          for (int64_t kw = 0; kw < kK; ++kw)
            acc[kh * kK + kw] = _mm512_fmadd_ps(_mm512_set1_ps(x[kh * g.Wp + kw]), d, acc[kh * kK + kw]);
      }
    }
    for (int64_t t = 0; t < kTaps; ++t)
      _mm512_storeu_ps(part + t * g.O + ob, _mm512_add_ps(_mm512_loadu_ps(part + t * g.O + ob), acc[t]));
    float* pb = part + kTaps * g.O + ob;
    _mm512_storeu_ps(pb, _mm512_add_ps(_mm512_loadu_ps(pb), accb));
  }
}

bool dense_nhw(const Tensor& src) {  // [N, 1, H, W] whose values lie in (n, h, w) order without gaps
  return src.ndim() == 4 && src.dim(1) == 1 && src.stride(3) == 1 && src.stride(2) == src.dim(3) &&
         src.stride(0) == src.dim(2) * src.dim(3);
}

bool dense_channels_last(const Tensor& t) { return t.ndim() == 4 && t.is_channels_last() && t.is_dense(); }

}  // namespace

bool bf16_conv_c1_applies(const ConvParams& p, const Tensor& src, const Tensor& weights_or_grad, const Tensor& out) {
  const Tensor& w = weights_or_grad;
  return src.device().is_cpu() && src.dtype() == DType::bf16 && dense_nhw(src) && w.ndim() == 4 && w.dim(1) == 1 &&
         w.dim(2) == kK && w.dim(3) == kK && w.dim(0) % kBf16Block == 0 && w.is_contiguous() &&
         out.dim(1) == w.dim(0) && dense_channels_last(out) && p.stride_h > 0 && p.stride_w > 0 && cpu_has_bf16();
}

void bf16_conv_c1_forward(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                          Tensor& dst, PostOp post) {
  LATHE_CHECK(bf16_conv_c1_applies(p, src, weights, dst) && weights.dtype() == DType::bf16 &&
                  (dst.dtype() == DType::bf16 || dst.dtype() == DType::f32) &&
                  (!bias || (bias->dtype() == DType::f32 && bias->is_contiguous())),
              "bf16 conv2d c1 forward: not a case this kernel takes: ", src.describe(), " * ", weights.describe(),
              " -> ", dst.describe());
  const int64_t O = weights.dim(0);
  const Bf16Geometry g = geometry(p, src, O, dst);
  std::vector<float> wt(kTaps * O);  // [tap][O], widened exactly
  const auto* w = static_cast<const uint16_t*>(weights.raw());
  for (int64_t o = 0; o < O; ++o)
    for (int64_t t = 0; t < kTaps; ++t) {
      const uint32_t u = static_cast<uint32_t>(w[o * kTaps + t]) << 16;
      std::memcpy(&wt[t * O + o], &u, 4);
    }
  const float* b = bias ? bias->data<float>() : nullptr;
  const bool out_bf16 = dst.dtype() == DType::bf16;
  const int64_t per_image = g.OH * g.OW * O * (out_bf16 ? 2 : 4);
  auto* out = static_cast<char*>(dst.raw());
#pragma omp parallel if (g.N > 1)
  {
    std::vector<float> pad(g.Hp * g.Wp);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < g.N; ++n) {
      fill_padded(g, src, n, pad);
      forward_image(g, pad.data(), wt.data(), b, post == PostOp::relu, out_bf16, out + n * per_image);
    }
  }
}

void bf16_conv_c1_backward_weights(const ConvParams& p, const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                                   Tensor* diff_bias) {
  LATHE_CHECK(bf16_conv_c1_applies(p, src, diff_weights, diff_dst) && diff_dst.dtype() == DType::bf16 &&
                  diff_weights.dtype() == DType::f32 &&
                  (!diff_bias || (diff_bias->dtype() == DType::f32 && diff_bias->is_contiguous())),
              "bf16 conv2d c1 weight gradient: not a case this kernel takes: ", src.describe(), " and ",
              diff_dst.describe(), " -> ", diff_weights.describe());
  const int64_t O = diff_weights.dim(0);
  const Bf16Geometry g = geometry(p, src, O, diff_dst);
  const auto* dy = static_cast<const uint16_t*>(diff_dst.raw());
  const int64_t per_image = g.OH * g.OW * O;
  std::vector<std::vector<float>> parts(omp_get_max_threads());
#pragma omp parallel if (g.N > 1)
  {
    std::vector<float>& part = parts[omp_get_thread_num()];
    part.assign((kTaps + 1) * O, 0.f);
    std::vector<float> pad(g.Hp * g.Wp);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < g.N; ++n) {
      fill_padded(g, src, n, pad);
      backward_weights_image(g, pad.data(), dy + n * per_image, part.data());
    }
  }
  std::vector<float> sum((kTaps + 1) * O, 0.f);
  for (const std::vector<float>& part : parts)  // thread order: the same sums for the same thread count
    for (size_t i = 0; i < part.size(); ++i)
      sum[i] += part[i];
  float* dw = diff_weights.data<float>();
  for (int64_t o = 0; o < O; ++o)
    for (int64_t t = 0; t < kTaps; ++t)
      dw[o * kTaps + t] = sum[t * O + o];
  if (diff_bias)
    std::copy(sum.begin() + kTaps * O, sum.end(), diff_bias->data<float>());
}

}  // namespace lathe::cpu
