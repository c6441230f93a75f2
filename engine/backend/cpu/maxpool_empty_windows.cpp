// The windows oneDNN's max pooling leaves at its starting value, redone by the reference's rule
// (see maxpool_empty_windows.h). The scan is a branch-free OR over dst (vectorised, threads for
// large outputs); only when it finds one does a second pass visit the outputs by their coordinates.
#include "engine/backend/cpu/maxpool_empty_windows.h"

#include <cfloat>

#include "engine/core/dtype.h"

namespace lathe::cpu {

namespace {

inline float value(float v) { return v; }
inline float value(uint16_t v) { return bf16_to_f32(v); }

constexpr int64_t kScanParallelMin = 1 << 18;  // outputs below which one thread scans faster

/// True when some element of dense t (n elements of T) is not above -FLT_MAX (NaN included).
template <typename T>
bool any_empty(const T* t, int64_t n) {
  int found = 0;
#pragma omp parallel for simd reduction(| : found) schedule(static) if (n > kScanParallelMin)
  for (int64_t i = 0; i < n; ++i)
    found |= !(value(t[i]) > -FLT_MAX);
  return found != 0;
}

template <typename T>
void fix(const PoolParams& p, const Tensor& src, Tensor& dst, uint8_t* ws, const std::array<int64_t, 4>& wst) {
  const T* s = static_cast<const T*>(src.raw());
  T* d = static_cast<T*>(dst.raw());
  if (dst.is_dense() && !any_empty(d, dst.numel()))
    return;
  const int64_t N = dst.dim(0), C = dst.dim(1), OH = dst.dim(2), OW = dst.dim(3), H = src.dim(2), W = src.dim(3);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          T& out = d[n * dst.stride(0) + c * dst.stride(1) + oh * dst.stride(2) + ow * dst.stride(3)];
          if (value(out) > -FLT_MAX)
            continue;
          int64_t where = -1;  // the reference's rule: the first valid tap, then strictly greater ones
          for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
            const int64_t ih = oh * p.stride_h - p.pad_h + kh;
            for (int64_t kw = 0; ih >= 0 && ih < H && kw < p.kernel_w; ++kw) {
              const int64_t iw = ow * p.stride_w - p.pad_w + kw;
              if (iw < 0 || iw >= W)
                continue;
              const T v = s[n * src.stride(0) + c * src.stride(1) + ih * src.stride(2) + iw * src.stride(3)];
              if (where < 0 || value(v) > value(out)) {
                out = v;
                where = kh * p.kernel_w + kw;
              }
            }
          }
          if (where >= 0)
            ws[n * wst[0] + c * wst[1] + oh * wst[2] + ow * wst[3]] = static_cast<uint8_t>(where);
        }
}

}  // namespace

void fix_empty_max_windows(const PoolParams& p, const Tensor& src, Tensor& dst, uint8_t* ws,
                           const std::array<int64_t, 4>& ws_strides) {
  LATHE_CHECK(src.dtype() == dst.dtype() && (src.dtype() == DType::f32 || src.dtype() == DType::bf16) &&
                  src.ndim() == 4 && dst.ndim() == 4 && src.device().is_cpu() && dst.device().is_cpu(),
              "fix_empty_max_windows: host f32 or bf16 [N, C, H, W] tensors of one dtype, got ", src.describe(), " -> ",
              dst.describe());
  LATHE_CHECK(p.kernel_h * p.kernel_w <= 256, "fix_empty_max_windows: a window of ", p.kernel_h, "x", p.kernel_w,
              " has more taps than a workspace byte can name");
  if (src.dtype() == DType::f32)
    fix<float>(p, src, dst, ws, ws_strides);
  else
    fix<uint16_t>(p, src, dst, ws, ws_strides);
}

}  // namespace lathe::cpu
