// Reference INT8 linear and conv2d: int64 accumulation of (q_x - z_x) * q_w, then the f32
// requantization of int8_layer.h, element by element.
#include "engine/backend/cpu/reference_int8.h"

#include <algorithm>
#include <cmath>

namespace lathe {

namespace {

/// Integer values of an s8/u8 tensor, by element offset.
struct QuantReader {
  const void* base;
  bool is_signed;
  int32_t operator[](int64_t off) const {
    return is_signed ? static_cast<const int8_t*>(base)[off] : static_cast<const uint8_t*>(base)[off];
  }
};

QuantReader reader_of(const Tensor& src, const Int8LayerData& layer, const char* who) {
  LATHE_CHECK(src.device().is_cpu() && src.dtype() == layer.src_dtype(), who, ": src must be host ",
              dtype_name(layer.src_dtype()), " (", layer.config.src.describe(), "), got ", src.describe());
  return {src.raw(), src.dtype() == DType::s8};
}

/// Requantizes one accumulator of output channel o and stores it at element offset `off` of dst.
void finish(const Int8LayerData& layer, int64_t o, int64_t acc, Tensor& dst, int64_t off) {
  float y = layer.output_scales[o] * (static_cast<float>(acc) + layer.bias_acc[o]);
  if (layer.config.post == PostOp::relu)
    y = std::max(y, 0.0f);
  if (!layer.config.dst) {
    static_cast<float*>(dst.raw())[off] = y;
    return;
  }
  const QuantParams& q = *layer.config.dst;
  const float shifted = y + static_cast<float>(q.zero_point[0]);
  const double r = std::clamp(static_cast<double>(std::nearbyint(shifted)), static_cast<double>(q.qmin()),
                              static_cast<double>(q.qmax()));
  if (q.is_signed)
    static_cast<int8_t*>(dst.raw())[off] = static_cast<int8_t>(r);
  else
    static_cast<uint8_t*>(dst.raw())[off] = static_cast<uint8_t>(r);
}

}  // namespace

Tensor int8_linear_reference(const Int8LayerData& layer, const Tensor& src) {
  const QuantReader x = reader_of(src, layer, "int8_linear_reference");
  LATHE_CHECK(layer.weights_q.ndim() == 2 && src.ndim() == 2 && src.dim(1) == layer.weights_q.dim(1),
              "int8_linear_reference: src ", src.describe(), " for weights ", layer.weights_q.describe());
  const int64_t N = src.dim(0), K = src.dim(1), O = layer.out_channels();
  const int8_t* w = layer.weights_q.data<int8_t>();
  const int32_t zx = layer.config.src.zero_point[0];
  Tensor dst = Tensor::empty({N, O}, layer.dst_dtype());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<int64_t>(x[n * src.stride(0) + k * src.stride(1)] - zx) * w[o * K + k];
      finish(layer, o, acc, dst, n * O + o);
    }
  return dst;
}

Tensor int8_conv2d_reference(const Int8LayerData& layer, const ConvParams& p, const Tensor& src) {
  const QuantReader x = reader_of(src, layer, "int8_conv2d_reference");
  const Tensor& wq = layer.weights_q;
  LATHE_CHECK(wq.ndim() == 4 && src.ndim() == 4 && src.dim(1) == wq.dim(1), "int8_conv2d_reference: src ",
              src.describe(), " for weights ", wq.describe());
  const int64_t N = src.dim(0), C = src.dim(1), H = src.dim(2), W = src.dim(3);
  const int64_t O = wq.dim(0), KH = wq.dim(2), KW = wq.dim(3);
  const int64_t OH = conv_out_size(H, KH, p.stride_h, p.pad_h), OW = conv_out_size(W, KW, p.stride_w, p.pad_w);
  LATHE_CHECK(OH > 0 && OW > 0, "int8_conv2d_reference: empty output for ", src.describe());
  const int8_t* w = wq.data<int8_t>();
  const int32_t zx = layer.config.src.zero_point[0];
  const int64_t sn = src.stride(0), sc = src.stride(1), sh = src.stride(2), sw = src.stride(3);
  Tensor dst = Tensor::empty({N, O, OH, OW}, layer.dst_dtype(), Device::cpu(), MemoryFormat::channels_last);
  const int64_t dn = dst.stride(0), dc = dst.stride(1), dh = dst.stride(2), dw = dst.stride(3);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t o = 0; o < O; ++o) {
          int64_t acc = 0;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * p.stride_h - p.pad_h + kh;
            if (ih < 0 || ih >= H)
              continue;  // padding: a real zero, nothing to add
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * p.stride_w - p.pad_w + kw;
              if (iw < 0 || iw >= W)
                continue;
              const int64_t xoff = n * sn + ih * sh + iw * sw;
              const int8_t* wrow = w + ((o * C) * KH + kh) * KW + kw;
              for (int64_t c = 0; c < C; ++c)
                acc += static_cast<int64_t>(x[xoff + c * sc] - zx) * wrow[c * KH * KW];
            }
          }
          finish(layer, o, acc, dst, n * dn + o * dc + oh * dh + ow * dw);
        }
  return dst;
}

}  // namespace lathe
