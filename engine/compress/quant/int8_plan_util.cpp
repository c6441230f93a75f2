// See int8_plan_util.h.
#include "engine/compress/quant/int8_plan_util.h"

#include <cstring>

namespace lathe {

Tensor int8_host_copy(const Tensor& t, Backend& be) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  if (t.device().is_cpu())
    t.copy_to(h);
  else
    be.copy(t, h);
  return h;
}

Tensor permute_flat_columns(const Tensor& w, const Shape& chw, bool to_hwc) {
  const int64_t C = chw.at(0), H = chw.at(1), W = chw.at(2);
  LATHE_CHECK(w.ndim() == 2 && w.dim(1) == C * H * W && (w.dtype() == DType::f32 || w.dtype() == DType::s8),
              "INT8 plan: weights ", w.describe(), " are not f32/s8 columns flattening [", C, ", ", H, ", ", W, "]");
  const int64_t O = w.dim(0), K = C * H * W;
  const size_t e = w.dtype() == DType::f32 ? sizeof(float) : sizeof(int8_t);
  const Tensor src = w.is_contiguous() ? w : w.contiguous_copy();
  Tensor out = Tensor::empty(w.shape(), w.dtype());
  const auto* s = static_cast<const char*>(src.raw());
  auto* d = static_cast<char*>(out.raw());
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t x = 0; x < W; ++x) {
          const int64_t chw_at = o * K + (c * H + h) * W + x, hwc_at = o * K + (h * W + x) * C + c;
          const int64_t from = to_hwc ? chw_at : hwc_at, to = to_hwc ? hwc_at : chw_at;
          std::memcpy(d + to * e, s + from * e, e);
        }
  return out;
}

}  // namespace lathe
