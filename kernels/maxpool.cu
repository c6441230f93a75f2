// Max-pooling kernels (see maxpool.cuh). One thread per output (forward) or input (backward)
// element, in the memory order of the destination's layout.
#include "kernels/maxpool.cuh"

#include <cfloat>

#include "kernels/kernel_common.cuh"

namespace lathe::kernels {

// ------------------------------------------------------------------ kernels
namespace {

struct Index4 {
  int64_t n, c, h, w;
};

/// Splits a flat index over [N, C, H, W] in NCHW or NHWC order.
__device__ __forceinline__ Index4 split(int64_t i, int64_t C, int64_t H, int64_t W, bool nhwc) {
  Index4 r;
  if (nhwc) {
    r.c = i % C;
    i /= C;
    r.w = i % W;
    i /= W;
    r.h = i % H;
    r.n = i / H;
  } else {
    r.w = i % W;
    i /= W;
    r.h = i % H;
    i /= H;
    r.c = i % C;
    r.n = i / C;
  }
  return r;
}

__device__ __forceinline__ int64_t at(const Strides4& s, const Index4& i) {
  return i.n * s.n + i.c * s.c + i.h * s.h + i.w * s.w;
}

__global__ void maxpool_forward_kernel(Dims4 in, int64_t OH, int64_t OW, PoolWindow win, const float* x, Strides4 xs,
                                       float* y, Strides4 ys, int32_t* argmax, bool nhwc) {
  const int64_t total = in.n * in.c * OH * OW;
  for (int64_t i = detail::global_thread(); i < total; i += detail::grid_threads()) {
    const Index4 o = split(i, in.c, OH, OW, nhwc);
    float best = -FLT_MAX;
    int32_t where = -1;
    const float* plane = x + o.n * xs.n + o.c * xs.c;
    for (int64_t kh = 0; kh < win.kernel_h; ++kh) {
      const int64_t ih = o.h * win.stride_h - win.pad_h + kh;
      if (ih < 0 || ih >= in.h)
        continue;
      for (int64_t kw = 0; kw < win.kernel_w; ++kw) {
        const int64_t iw = o.w * win.stride_w - win.pad_w + kw;
        if (iw < 0 || iw >= in.w)
          continue;
        const float v = plane[ih * xs.h + iw * xs.w];
        if (where < 0 || v > best) {
          best = v;
          where = static_cast<int32_t>(ih * in.w + iw);
        }
      }
    }
    y[at(ys, o)] = where < 0 ? -INFINITY : best;
    argmax[((o.n * in.c + o.c) * OH + o.h) * OW + o.w] = where;
  }
}

__global__ void maxpool_backward_kernel(Dims4 in, int64_t OH, int64_t OW, PoolWindow win, const float* dy, Strides4 dys,
                                        const int32_t* argmax, float* dx, Strides4 dxs, bool nhwc) {
  const int64_t total = in.n * in.c * in.h * in.w;
  for (int64_t i = detail::global_thread(); i < total; i += detail::grid_threads()) {
    const Index4 p = split(i, in.c, in.h, in.w, nhwc);
    const int32_t me = static_cast<int32_t>(p.h * in.w + p.w);
    // Windows covering row ih: oh*sh - ph <= ih <= oh*sh - ph + kh - 1.
    const int64_t th = p.h + win.pad_h, tw = p.w + win.pad_w;
    const int64_t oh0 = th < win.kernel_h ? 0 : (th - win.kernel_h) / win.stride_h + 1;
    const int64_t oh1 = min(OH - 1, th / win.stride_h);
    const int64_t ow0 = tw < win.kernel_w ? 0 : (tw - win.kernel_w) / win.stride_w + 1;
    const int64_t ow1 = min(OW - 1, tw / win.stride_w);
    const int64_t plane = (p.n * in.c + p.c) * OH;
    float acc = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow)
        if (argmax[(plane + oh) * OW + ow] == me)
          acc += dy[p.n * dys.n + p.c * dys.c + oh * dys.h + ow * dys.w];
    dx[at(dxs, p)] = acc;
  }
}

}  // namespace

// ------------------------------------------------------------------ launchers
cudaError_t maxpool2d_forward(cudaStream_t stream, Dims4 in, int64_t out_h, int64_t out_w, const PoolWindow& win,
                              const float* src, Strides4 src_strides, float* dst, Strides4 dst_strides, int32_t* argmax,
                              bool channels_last_order) {
  const int64_t total = in.n * in.c * out_h * out_w;
  if (total <= 0)
    return cudaSuccess;
  maxpool_forward_kernel<<<detail::grid_for(total), detail::kBlock, 0, stream>>>(
      in, out_h, out_w, win, src, src_strides, dst, dst_strides, argmax, channels_last_order);
  return cudaGetLastError();
}

cudaError_t maxpool2d_backward(cudaStream_t stream, Dims4 in, int64_t out_h, int64_t out_w, const PoolWindow& win,
                               const float* diff_dst, Strides4 diff_dst_strides, const int32_t* argmax, float* diff_src,
                               Strides4 diff_src_strides, bool channels_last_order) {
  const int64_t total = in.n * in.c * in.h * in.w;
  if (total <= 0)
    return cudaSuccess;
  maxpool_backward_kernel<<<detail::grid_for(total), detail::kBlock, 0, stream>>>(
      in, out_h, out_w, win, diff_dst, diff_dst_strides, argmax, diff_src, diff_src_strides, channels_last_order);
  return cudaGetLastError();
}

}  // namespace lathe::kernels
