// Quantization parameters from ranges, and the reference quantize/dequantize loops.
#include "engine/backend/formats/quant_params.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace lathe {

namespace {

void check_bits(int bits) {
  LATHE_CHECK(bits >= 2 && bits <= 8, "quantization bits must be in 2..8 (stored in s8/u8), got ", bits);
}

/// One channel's scale and zero point; the rules are documented on make_quant_params.
void channel_params(double lo, double hi, int bits, bool symmetric, bool is_signed, float& scale, int32_t& zp) {
  LATHE_CHECK(std::isfinite(lo) && std::isfinite(hi), "quantization range must be finite, got [", lo, ", ", hi, "]");
  LATHE_CHECK(lo <= hi, "quantization range has min > max: [", lo, ", ", hi, "]");
  const int32_t qmin = quant_qmin(bits, symmetric, is_signed), qmax = quant_qmax(bits, symmetric, is_signed);
  double s = 0;
  zp = 0;
  if (symmetric && is_signed) {
    s = std::max(std::fabs(lo), std::fabs(hi)) / qmax;
  } else if (symmetric) {
    LATHE_CHECK(lo >= 0, "unsigned symmetric quantization needs min >= 0 (e.g. after ReLU), got [", lo, ", ", hi,
                "]; use signed or asymmetric");
    s = hi / qmax;
  } else {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
    s = (hi - lo) / (static_cast<double>(qmax) - qmin);
  }
  // Zero-width range: any scale represents it; 1 keeps the arithmetic tame. Tiny ranges keep a
  // normal float scale so x / scale stays finite.
  if (s == 0)
    s = 1;
  s = std::max(s, static_cast<double>(std::numeric_limits<float>::min()));
  scale = static_cast<float>(s);
  if (!symmetric) {
    const double z = qmin - std::nearbyint(lo / static_cast<double>(scale));
    zp = static_cast<int32_t>(std::clamp(z, static_cast<double>(qmin), static_cast<double>(qmax)));
  }
}

/// A source laid out densely as contiguous or channels-last (the input itself or a contiguous copy).
Tensor dense_source(const Tensor& src) {
  if (src.is_contiguous() || src.is_channels_last())
    return src;
  return src.contiguous_copy();
}

/// Walks the dense memory of `src` once, calling f(memory offset, channel index).
template <class F>
void for_each_element(const Tensor& src, const QuantParams& p, F&& f) {
  const int64_t n = src.numel();
  if (!p.per_channel()) {
    for (int64_t m = 0; m < n; ++m)
      f(m, 0);
    return;
  }
  // In a dense layout, the coordinate along `axis` of memory offset m is (m / stride) % size.
  const int64_t stride = src.stride(p.axis), size = src.dim(p.axis);
  for (int64_t m = 0; m < n; ++m)
    f(m, (m / stride) % size);
}

void check_against(const Tensor& t, const QuantParams& p, const char* what) {
  p.validate();
  LATHE_CHECK(t.device().is_cpu(), what, " runs on host tensors, got ", t.describe());
  if (p.per_channel()) {
    LATHE_CHECK(p.axis < t.ndim(), what, ": channel axis ", p.axis, " out of range for ", t.describe());
    LATHE_CHECK(t.dim(p.axis) == p.channels(), what, ": ", p.channels(), " per-channel scales for dimension ", p.axis,
                " of ", t.describe());
  }
}

}  // namespace

int32_t quant_qmin(int bits, bool symmetric, bool is_signed) {
  check_bits(bits);
  if (!is_signed)
    return 0;
  return symmetric ? -((1 << (bits - 1)) - 1) : -(1 << (bits - 1));
}

int32_t quant_qmax(int bits, bool symmetric, bool is_signed) {
  check_bits(bits);
  return is_signed ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
}

int32_t QuantParams::qmin() const { return quant_qmin(bits, symmetric, is_signed); }
int32_t QuantParams::qmax() const { return quant_qmax(bits, symmetric, is_signed); }

void QuantParams::validate() const {
  check_bits(bits);
  LATHE_CHECK(!scale.empty() && scale.size() == zero_point.size(), "QuantParams: ", scale.size(), " scales and ",
              zero_point.size(), " zero points");
  LATHE_CHECK(axis >= -1, "QuantParams: axis must be -1 (per tensor) or a dimension, got ", axis);
  LATHE_CHECK(axis >= 0 || scale.size() == 1, "QuantParams: per-tensor parameters with ", scale.size(), " scales");
  const int32_t lo = qmin(), hi = qmax();
  for (size_t c = 0; c < scale.size(); ++c) {
    LATHE_CHECK(std::isfinite(scale[c]) && scale[c] > 0, "QuantParams: scale[", c, "] = ", scale[c],
                " (must be finite and > 0)");
    LATHE_CHECK(zero_point[c] >= lo && zero_point[c] <= hi, "QuantParams: zero_point[", c, "] = ", zero_point[c],
                " outside [", lo, ", ", hi, "]");
    LATHE_CHECK(!symmetric || zero_point[c] == 0, "QuantParams: symmetric with zero_point[", c, "] = ", zero_point[c]);
  }
}

std::string QuantParams::describe() const {
  std::ostringstream os;
  os << (is_signed ? "s" : "u") << bits << (symmetric ? " symmetric" : " asymmetric");
  if (per_channel())
    os << " per-channel(axis " << axis << ", " << scale.size() << ")";
  else if (!scale.empty())
    os << " scale " << scale[0] << " zero_point " << zero_point[0];
  return os.str();
}

QuantParams make_quant_params(double lo, double hi, int bits, bool symmetric, bool is_signed) {
  check_bits(bits);
  QuantParams p;
  p.bits = bits;
  p.symmetric = symmetric;
  p.is_signed = is_signed;
  p.scale.resize(1);
  p.zero_point.resize(1);
  channel_params(lo, hi, bits, symmetric, is_signed, p.scale[0], p.zero_point[0]);
  return p;
}

QuantParams make_quant_params_per_channel(const std::vector<double>& lo, const std::vector<double>& hi, int axis,
                                          int bits, bool symmetric, bool is_signed) {
  check_bits(bits);
  LATHE_CHECK(axis >= 0, "per-channel quantization needs a channel axis >= 0, got ", axis);
  LATHE_CHECK(!lo.empty() && lo.size() == hi.size(), "per-channel ranges: ", lo.size(), " minima and ", hi.size(),
              " maxima");
  QuantParams p;
  p.axis = axis;
  p.bits = bits;
  p.symmetric = symmetric;
  p.is_signed = is_signed;
  p.scale.resize(lo.size());
  p.zero_point.resize(lo.size());
  for (size_t c = 0; c < lo.size(); ++c)
    channel_params(lo[c], hi[c], bits, symmetric, is_signed, p.scale[c], p.zero_point[c]);
  return p;
}

Tensor quantize(const Tensor& src, const QuantParams& params) {
  check_against(src, params, "quantize");
  LATHE_CHECK(src.dtype() == DType::f32, "quantize takes f32, got ", src.describe());
  const Tensor x = dense_source(src);
  Tensor dst = Tensor::empty(x.shape(), params.storage_dtype(), Device::cpu(), x.format());
  const float* in = x.data<float>();
  const int32_t qmin = params.qmin(), qmax = params.qmax();
  if (params.is_signed) {
    int8_t* out = dst.data<int8_t>();
    for_each_element(x, params, [&](int64_t m, int64_t c) {
      out[m] = static_cast<int8_t>(quantize_value(in[m], params.scale[c], params.zero_point[c], qmin, qmax));
    });
  } else {
    uint8_t* out = dst.data<uint8_t>();
    for_each_element(x, params, [&](int64_t m, int64_t c) {
      out[m] = static_cast<uint8_t>(quantize_value(in[m], params.scale[c], params.zero_point[c], qmin, qmax));
    });
  }
  return dst;
}

Tensor dequantize(const Tensor& src, const QuantParams& params) {
  check_against(src, params, "dequantize");
  LATHE_CHECK(src.dtype() == params.storage_dtype(), "dequantize: ", src.describe(), " does not match ",
              params.describe());
  const Tensor q = dense_source(src);
  Tensor dst = Tensor::empty(q.shape(), DType::f32, Device::cpu(), q.format());
  float* out = dst.data<float>();
  if (params.is_signed) {
    const int8_t* in = q.data<int8_t>();
    for_each_element(q, params, [&](int64_t m, int64_t c) {
      out[m] = dequantize_value(in[m], params.scale[c], params.zero_point[c]);
    });
  } else {
    const uint8_t* in = q.data<uint8_t>();
    for_each_element(q, params, [&](int64_t m, int64_t c) {
      out[m] = dequantize_value(in[m], params.scale[c], params.zero_point[c]);
    });
  }
  return dst;
}

}  // namespace lathe
