// Affine integer quantization: the parameters (scale, zero point, per tensor or per channel) and the
// plain reference quantize/dequantize loops every INT8 path is checked against.
//
//   q = clamp(round(x / scale) + zero_point, qmin, qmax)      x' = (q - zero_point) * scale
//
// round() is round-half-to-even: std::nearbyint in the default FE_TONEAREST mode, the same rule as
// oneDNN's f32 -> int conversions (vcvtps2dq under the default MXCSR), so our quantized inputs and
// oneDNN's requantized outputs agree on ties.
//
// Integer ranges for b bits (2..8, stored in s8 or u8):
//   signed symmetric     [-(2^(b-1)-1), 2^(b-1)-1]  (restricted: -127..127, no -128, so -x is exact)
//   signed asymmetric    [-2^(b-1), 2^(b-1)-1]
//   unsigned (any)       [0, 2^b-1]                  (symmetric unsigned = zero point 0, for x >= 0)
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tensor.h"

namespace lathe {

struct QuantParams {
  std::vector<float> scale;         // one per tensor, or one per channel along `axis`
  std::vector<int32_t> zero_point;  // same length as scale
  int axis = -1;                    // -1 per tensor, else the channel axis
  int bits = 8;
  bool symmetric = true;
  bool is_signed = true;

  int32_t qmin() const;
  int32_t qmax() const;
  bool per_channel() const { return axis >= 0; }
  int64_t channels() const { return static_cast<int64_t>(scale.size()); }
  /// s8 when signed, else u8.
  DType storage_dtype() const { return is_signed ? DType::s8 : DType::u8; }
  /// Throws lathe::Error when the fields are inconsistent (sizes, bits, zero points out of range).
  void validate() const;
  std::string describe() const;
};

/// Integer range for `bits` (2..8) under the rules in the header comment.
int32_t quant_qmin(int bits, bool symmetric, bool is_signed);
int32_t quant_qmax(int bits, bool symmetric, bool is_signed);

/// Per-tensor parameters covering [lo, hi]:
///   symmetric signed:   scale = max(|lo|, |hi|) / qmax, zero point 0
///   symmetric unsigned: scale = hi / qmax, zero point 0 (needs lo >= 0)
///   asymmetric:         the range is widened to include 0, scale = (hi - lo) / (qmax - qmin),
///                       zero point = qmin - round(lo / scale) (in [qmin, qmax], so 0 is exact)
/// A zero-width range gets scale 1 (everything quantizes to the zero point). Throws lathe::Error on
/// lo > hi, non-finite bounds or bits outside 2..8.
QuantParams make_quant_params(double lo, double hi, int bits = 8, bool symmetric = true, bool is_signed = true);

/// Per-channel parameters: channel c covers [lo[c], hi[c]] along `axis` (same rules per channel).
QuantParams make_quant_params_per_channel(const std::vector<double>& lo, const std::vector<double>& hi, int axis,
                                          int bits = 8, bool symmetric = true, bool is_signed = true);

/// One value: clamp(nearbyint(x / scale) + zp, qmin, qmax); x / scale is computed in double.
/// NaN maps to qmin.
inline int32_t quantize_value(float x, float scale, int32_t zero_point, int32_t qmin, int32_t qmax) {
  const double r = std::nearbyint(static_cast<double>(x) / static_cast<double>(scale)) + zero_point;
  if (!(r >= qmin))
    return qmin;
  return r > qmax ? qmax : static_cast<int32_t>(r);
}
inline float dequantize_value(int32_t q, float scale, int32_t zero_point) {
  return static_cast<float>(q - zero_point) * scale;
}

/// f32 tensor (any layout) -> s8/u8 tensor of the same shape. A contiguous or channels-last input
/// keeps its layout; any other strided input gives a contiguous result. Per-channel parameters
/// must have one entry per element of dimension `axis`.
Tensor quantize(const Tensor& src, const QuantParams& params);
/// s8/u8 tensor -> f32 tensor of the same shape and layout rule as quantize().
Tensor dequantize(const Tensor& src, const QuantParams& params);

}  // namespace lathe
