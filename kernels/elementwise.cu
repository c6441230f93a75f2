// Dense f32 elementwise kernels (see elementwise.cuh): grid-stride loops with 16-byte (float4) loads
// and stores when every pointer is 16-byte aligned, and a scalar tail for the last n % 4 elements.
#include "kernels/elementwise.cuh"

#include "kernels/kernel_common.cuh"

namespace lathe::kernels {

// ------------------------------------------------------------------ kernels
namespace {

struct ReluOp {
  __device__ float operator()(float x, float) const { return x > 0.0f ? x : 0.0f; }
};
struct ReluBackwardOp {
  __device__ float operator()(float y, float g) const { return y > 0.0f ? g : 0.0f; }
};
struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct AxpyOp {  // f(src, dst)
  float alpha;
  __device__ float operator()(float x, float d) const { return d + alpha * x; }
};
struct ScaleOp {
  float alpha;
  __device__ float operator()(float x, float) const { return alpha * x; }
};
struct FillOp {
  float value;
  __device__ float operator()(float, float) const { return value; }
};

template <class F>
__device__ __forceinline__ float4 apply4(const float4& a, const float4& b, F f) {
  return make_float4(f(a.x, b.x), f(a.y, b.y), f(a.z, b.z), f(a.w, b.w));
}

/// dst[i] = f(a[i], b[i]); b may be dst itself (read before written, same thread, same index).
template <bool kVec, class F>
__global__ void map_kernel(const float* a, const float* b, float* dst, int64_t n, F f) {
  const int64_t start = detail::global_thread(), stride = detail::grid_threads();
  int64_t tail = 0;
  if constexpr (kVec) {
    const int64_t n4 = n / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* d4 = reinterpret_cast<float4*>(dst);
    for (int64_t i = start; i < n4; i += stride)
      d4[i] = apply4(a4[i], b4[i], f);
    tail = n4 * 4;
  }
  for (int64_t i = tail + start; i < n; i += stride)
    dst[i] = f(a[i], b[i]);
}

template <class F>
cudaError_t launch_map(cudaStream_t stream, const float* a, const float* b, float* dst, int64_t n, F f) {
  if (n <= 0)
    return cudaSuccess;
  if (detail::aligned16(a) && detail::aligned16(b) && detail::aligned16(dst)) {
    map_kernel<true><<<detail::grid_for((n + 3) / 4), detail::kBlock, 0, stream>>>(a, b, dst, n, f);
  } else {
    map_kernel<false><<<detail::grid_for(n), detail::kBlock, 0, stream>>>(a, b, dst, n, f);
  }
  return cudaGetLastError();
}

}  // namespace

// ------------------------------------------------------------------ launchers
cudaError_t relu_forward(cudaStream_t stream, const float* src, float* dst, int64_t n) {
  return launch_map(stream, src, src, dst, n, ReluOp{});
}

cudaError_t relu_backward(cudaStream_t stream, const float* dst, const float* diff_dst, float* diff_src, int64_t n) {
  return launch_map(stream, dst, diff_dst, diff_src, n, ReluBackwardOp{});
}

cudaError_t add(cudaStream_t stream, const float* a, const float* b, float* dst, int64_t n) {
  return launch_map(stream, a, b, dst, n, AddOp{});
}

cudaError_t axpy(cudaStream_t stream, float alpha, const float* src, float* dst, int64_t n) {
  return launch_map(stream, src, dst, dst, n, AxpyOp{alpha});
}

cudaError_t scale(cudaStream_t stream, float* t, float alpha, int64_t n) {
  return launch_map(stream, t, t, t, n, ScaleOp{alpha});
}

cudaError_t fill(cudaStream_t stream, float* t, float value, int64_t n) {
  return launch_map(stream, t, t, t, n, FillOp{value});
}

}  // namespace lathe::kernels
