// See int8_conv_c1.h. Per conv window and block of 16 output channels:
//   dot = sum over kernel rows r of vpdpbusd(word r of the padded image, weights of row r)
//   acc = dot - z' * sum(w[o])          = sum (q_x - z_x) * q_w, exactly (int32)
// where the image bytes are q_x + 128 for an s8 source (u8 as vpdpbusd wants) and z' = z_x (+ 128):
// padding holds z', so a padded tap adds (z' - z') * w = 0, the reference's "real zero". The fourth
// byte of a 3-tap word meets a zero weight. The 2x2 windows of one pooled pixel keep their largest
// acc (requantization never decreases with acc: scales >= 0, ReLU, rounding and clamping are all
// monotone, so pooling first gives the same integers). Then y = scale[o] * (float(acc) + bias_acc[o]), ReLU,
// + z_y, clamped to [qmin, qmax] and rounded half to even (vcvtps2dq under the default MXCSR) -
// clamping before rounding gives the reference's round-then-clamp because the bounds are integers.
// Images are spread over the OpenMP threads, each with its own padded copy (a few hundred bytes).
// GCC 12 warns about its own AVX-512 headers here (a known false positive of -Wmaybe-uninitialized).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "engine/backend/cpu/int8_conv_c1.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/backend/cpu/int8_cpu.h"
#include "engine/core/error.h"

namespace lathe::cpu {

namespace {
constexpr int64_t kMaxRows = 8, kMaxTaps = 4, kC1Block = 16;
}  // namespace

/// The layer's constants in the kernel's layout.
struct C1Plan {
  int64_t O = 0, KH = 0, KW = 0;
  ConvParams conv;
  int32_t offset = 0;             // 128 when the source is s8 (its bytes are shifted to u8)
  uint8_t pad_byte = 0;           // the source zero point + offset
  std::vector<int32_t> w;         // [KH][O]: the kernel row's s8 weights packed in one word
  std::vector<int32_t> zcorr;     // [O]: pad_byte * sum of the channel's weights
  std::vector<float> bias, scale; // [O]: bias_acc, output_scales
  bool relu = false;
  float zdst = 0, lo = 0, hi = 0;
  DType dst_dtype = DType::u8;
};

namespace {

struct C1Geometry {
  int64_t N, H, W, OH, OW, Hp, Wp;
};

bool cpu_has_vnni() {
  static const bool has = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                          cpu_int8_dot_is_exact();
  return has;
}

/// The accumulator sum (q_x - z_x) q_w of 16 output channels from `ob` at the window whose top-left
/// byte in the padded image is `at`.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline __m512i window_acc(const C1Plan& k, int64_t Wp,
                                                                                const uint8_t* at, int64_t ob) {
  __m512i acc = _mm512_setzero_si512();
  for (int64_t r = 0; r < k.KH; ++r) {
    int32_t word;
    std::memcpy(&word, at + r * Wp, sizeof word);
    acc = _mm512_dpbusd_epi32(acc, _mm512_set1_epi32(word), _mm512_loadu_si512(k.w.data() + r * k.O + ob));
  }
  return acc;
}

/// Requantizes the accumulators of channels ob..ob+15 and stores their 16 bytes at `out`.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline void requantize_store(const C1Plan& k, __m512i dot,
                                                                                   int64_t ob, uint8_t* out) {
  const __m512i acc = _mm512_sub_epi32(dot, _mm512_loadu_si512(k.zcorr.data() + ob));
  __m512 y = _mm512_add_ps(_mm512_cvtepi32_ps(acc), _mm512_loadu_ps(k.bias.data() + ob));
  y = _mm512_mul_ps(_mm512_loadu_ps(k.scale.data() + ob), y);
  if (k.relu)
    y = _mm512_max_ps(y, _mm512_setzero_ps());
  y = _mm512_add_ps(y, _mm512_set1_ps(k.zdst));
  y = _mm512_min_ps(_mm512_max_ps(y, _mm512_set1_ps(k.lo)), _mm512_set1_ps(k.hi));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(y)));
}

/// One image, `pad` its padded copy (Hp x Wp bytes), out its [OH/2, OW/2, O] channels-last output. The four windows'
/// accumulators are pooled (signed max) and only their maximum is requantized.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void conv_pool_image(const C1Plan& k, const C1Geometry& g,
                                                                            const uint8_t* pad, uint8_t* out) {
  const int64_t sh = k.conv.stride_h * g.Wp, sw = k.conv.stride_w;
  const int64_t PH = g.OH / 2, PW = g.OW / 2;
  for (int64_t ph = 0; ph < PH; ++ph)
    for (int64_t pw = 0; pw < PW; ++pw) {
      const uint8_t* at = pad + 2 * ph * sh + 2 * pw * sw;
      uint8_t* px = out + (ph * PW + pw) * k.O;
      for (int64_t ob = 0; ob < k.O; ob += kC1Block) {
        const __m512i top = _mm512_max_epi32(window_acc(k, g.Wp, at, ob), window_acc(k, g.Wp, at + sw, ob));
        const __m512i bottom =
            _mm512_max_epi32(window_acc(k, g.Wp, at + sh, ob), window_acc(k, g.Wp, at + sh + sw, ob));
        requantize_store(k, _mm512_max_epi32(top, bottom), ob, px + ob);
      }
    }
}

/// Copies image n of src (bytes shifted by the plan's offset) into its place in `pad`; the border
/// keeps the padding byte.
void fill_padded(const C1Plan& k, const C1Geometry& g, const Tensor& src, int64_t n, std::vector<uint8_t>& pad) {
  std::fill(pad.begin(), pad.end(), k.pad_byte);
  const auto* x = static_cast<const uint8_t*>(src.raw());
  const int64_t sn = src.stride(0), sh = src.stride(2), sw = src.stride(3);
  for (int64_t h = 0; h < g.H; ++h) {
    uint8_t* row = pad.data() + (h + k.conv.pad_h) * g.Wp + k.conv.pad_w;
    const uint8_t* in = x + n * sn + h * sh;
    for (int64_t w = 0; w < g.W; ++w)
      row[w] = static_cast<uint8_t>(in[w * sw] + k.offset);  // s8 + 128 wraps to the u8 of the same order
  }
}

}  // namespace

Int8ConvC1Pool::Int8ConvC1Pool(const Int8LayerData& layer, const ConvParams& conv, const PoolParams& pool)
    : m_k(std::make_unique<C1Plan>()) {
  LATHE_CHECK(int8_conv_c1_pool_applies(layer, &conv, pool), "int8 conv2d + maxpool kernel: the layer ",
              layer.weights_q.describe(), " is not a single-channel conv followed by a 2x2 stride-2 pooling that ",
              "this CPU's kernel takes");
  C1Plan& k = *m_k;
  const Tensor& wq = layer.weights_q;
  k.O = wq.dim(0);
  k.KH = wq.dim(2);
  k.KW = wq.dim(3);
  k.conv = conv;
  k.offset = layer.config.src.is_signed ? 128 : 0;
  k.pad_byte = static_cast<uint8_t>(layer.config.src.zero_point[0] + k.offset);
  k.w.assign(k.KH * k.O, 0);
  k.zcorr.assign(k.O, 0);
  const int8_t* w = wq.data<int8_t>();
  for (int64_t o = 0; o < k.O; ++o) {
    int32_t sum = 0;
    for (int64_t r = 0; r < k.KH; ++r) {
      int8_t bytes[kMaxTaps] = {0, 0, 0, 0};
      for (int64_t t = 0; t < k.KW; ++t) {
        bytes[t] = w[(o * k.KH + r) * k.KW + t];
        sum += bytes[t];
      }
      std::memcpy(&k.w[r * k.O + o], bytes, sizeof bytes);
    }
    k.zcorr[o] = static_cast<int32_t>(k.pad_byte) * sum;
  }
  k.bias = layer.bias_acc;
  k.scale = layer.output_scales;
  k.relu = layer.config.post == PostOp::relu;
  const QuantParams& q = *layer.config.dst;
  k.zdst = static_cast<float>(q.zero_point[0]);
  k.lo = static_cast<float>(q.qmin());
  k.hi = static_cast<float>(q.qmax());
  k.dst_dtype = layer.dst_dtype();
}

Int8ConvC1Pool::~Int8ConvC1Pool() = default;

Tensor Int8ConvC1Pool::run(const Tensor& src) const {
  const C1Plan& k = *m_k;
  C1Geometry g{src.dim(0), src.dim(2), src.dim(3), 0, 0, 0, 0};
  const ConvParams& p = k.conv;
  g.OH = conv_out_size(g.H, k.KH, p.stride_h, p.pad_h);
  g.OW = conv_out_size(g.W, k.KW, p.stride_w, p.pad_w);
  LATHE_CHECK(g.OH >= 2 && g.OW >= 2, "int8 conv2d + maxpool: the conv output ", g.OH, "x", g.OW, " of src ",
              src.describe(), " is smaller than the 2x2 window");
  // rows and columns the windows reach, plus the 4-byte word read from the last window's start
  g.Hp = std::max(g.H + p.pad_h, (g.OH - 1) * p.stride_h + k.KH);
  g.Wp = std::max(g.W + p.pad_w, (g.OW - 1) * p.stride_w + kMaxTaps);
  const int64_t PH = g.OH / 2, PW = g.OW / 2;
  Tensor dst = Tensor::empty({g.N, k.O, PH, PW}, k.dst_dtype, Device::cpu(), MemoryFormat::channels_last);
  auto* out = static_cast<uint8_t*>(dst.raw());
  const int64_t per_image = PH * PW * k.O;
#pragma omp parallel if (g.N > 1)
  {
    std::vector<uint8_t> pad(g.Hp * g.Wp);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < g.N; ++n) {
      fill_padded(k, g, src, n, pad);
      conv_pool_image(k, g, pad.data(), out + n * per_image);
    }
  }
  return dst;
}


bool int8_conv_c1_pool_applies(const Int8LayerData& layer, const ConvParams* conv, const PoolParams& pool) {
  const Tensor& wq = layer.weights_q;
  return conv && wq.ndim() == 4 && wq.dim(1) == 1 && wq.dim(2) <= kMaxRows && wq.dim(3) <= kMaxTaps &&
         wq.dim(0) % kC1Block == 0 && layer.config.dst.has_value() && layer.config.src.scale.size() == 1 &&
         pool.kernel_h == 2 && pool.kernel_w == 2 && pool.stride_h == 2 && pool.stride_w == 2 && pool.pad_h == 0 &&
         pool.pad_w == 0 &&
         std::all_of(layer.output_scales.begin(), layer.output_scales.end(), [](float s) { return s >= 0; }) &&
         cpu_has_vnni();
}

}  // namespace lathe::cpu
