// SGD-momentum and AdamW kernels (see optimizers.cuh). Memory-bound grid-stride loops; the
// arithmetic order follows engine/backend/cpu/reference_backend.cpp term by term (f32 for SGD,
// double for AdamW). Explicit _rn intrinsics keep nvcc from contracting SGD's a*b+c into an FMA, so
// each SGD step rounds where the reference's plain f32 expressions round.
#include "kernels/optimizers.cuh"

#include "kernels/kernel_common.cuh"

namespace lathe::kernels {

// ------------------------------------------------------------------ kernels
namespace {

template <bool kMomentum>
__global__ void sgd_kernel(float* w, const float* g, float* buf, int64_t n, float lr, float mu, float wd,
                           bool nesterov) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) {
    const float wi = w[i];
    float d = __fadd_rn(g[i], __fmul_rn(wd, wi));
    if constexpr (kMomentum) {
      const float b = __fadd_rn(__fmul_rn(mu, buf[i]), d);
      buf[i] = b;
      d = nesterov ? __fadd_rn(d, __fmul_rn(mu, b)) : b;
    }
    w[i] = __fsub_rn(wi, __fmul_rn(lr, d));
  }
}

__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, int64_t n, double lr, double b1, double b2,
                             double eps, double wd, double bc1, double bc2) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads()) {
    const double gi = g[i];
    const float wi = static_cast<float>(w[i] * (1.0 - lr * wd));
    const float mi = static_cast<float>(b1 * m[i] + (1 - b1) * gi);
    const float vi = static_cast<float>(b2 * v[i] + (1 - b2) * gi * gi);
    m[i] = mi;
    v[i] = vi;
    const double mhat = mi / bc1, vhat = vi / bc2;
    w[i] = static_cast<float>(wi - lr * mhat / (sqrt(vhat) + eps));
  }
}

}  // namespace

// ------------------------------------------------------------------ launchers
cudaError_t sgd_update(cudaStream_t stream, float* param, const float* grad, float* momentum_buf, int64_t n, float lr,
                       float momentum, float weight_decay, bool nesterov) {
  if (n <= 0)
    return cudaSuccess;
  if (momentum_buf) {
    sgd_kernel<true><<<detail::grid_for(n), detail::kBlock, 0, stream>>>(param, grad, momentum_buf, n, lr, momentum,
                                                                         weight_decay, nesterov);
  } else {
    sgd_kernel<false><<<detail::grid_for(n), detail::kBlock, 0, stream>>>(param, grad, nullptr, n, lr, momentum,
                                                                          weight_decay, nesterov);
  }
  return cudaGetLastError();
}

cudaError_t adamw_update(cudaStream_t stream, float* param, const float* grad, float* m, float* v, int64_t n, double lr,
                         double beta1, double beta2, double eps, double weight_decay, double bias_correction1,
                         double bias_correction2) {
  if (n <= 0)
    return cudaSuccess;
  adamw_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(param, grad, m, v, n, lr, beta1, beta2, eps,
                                                                   weight_decay, bias_correction1, bias_correction2);
  return cudaGetLastError();
}

}  // namespace lathe::kernels
