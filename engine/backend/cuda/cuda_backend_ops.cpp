// CudaBackend ops that run on our kernels (kernels/*.cu): elementwise, max pooling, batch norm,
// dropout, the loss, optimizer updates and reductions. Each checks its arguments, brings operands
// to one dense layout where a kernel needs it (staging copies only when layouts differ), launches,
// and checks the launch.
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "engine/backend/cuda/cuda_tensor_util.h"
#include "kernels/batchnorm.cuh"
#include "kernels/dropout.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/maxpool.cuh"
#include "kernels/optimizers.cuh"
#include "kernels/reductions.cuh"
#include "kernels/softmax_xent.cuh"

namespace lathe::cuda {

namespace {

/// Runs `launch(inputs, out, n)` on dense operands of one layout: dst's when dst is contiguous or
/// channels-last, else a
/// contiguous temporary copied into dst afterwards. Inputs in another layout are staged; when
/// `reads_dst`, dst's old values are the last input.
template <class Launch>
void elementwise(CudaContext& ctx, std::initializer_list<const Tensor*> inputs, Tensor& dst, bool reads_dst,
                 const char* what, Launch&& launch) {
  check_f32(ctx, dst, what);
  for (const Tensor* t : inputs)
    check_f32(ctx, *t, what);  // shapes: the op contract (Backend's entry point)
  const StreamScope scope = ctx.activate();
  const bool direct = is_standard_dense(dst);
  Tensor out = direct ? dst : device_empty(ctx, dst.shape(), DType::f32);
  if (!direct && reads_dst)
    device_strided_copy(ctx, dst, out);
  std::vector<Tensor> staged;
  std::vector<const float*> ptrs;
  staged.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    staged.push_back(same_dense_layout(*t, out) ? *t : match_layout(ctx, *t, out));
    ptrs.push_back(ptr<float>(staged.back()));
  }
  LATHE_CUDA_CHECK(launch(ptrs, ptr<float>(out), out.numel()));
  if (!direct)
    device_strided_copy(ctx, out, dst);
}

/// A dense view of `t` in its own memory when dense, else a contiguous device copy.
Tensor dense(CudaContext& ctx, const Tensor& t) { return t.is_dense() ? t : make_contiguous(ctx, t); }

template <class T>
T read_back(CudaContext& ctx, const void* device_value) {
  static_assert(sizeof(T) <= 64, "pinned buffer is 64 bytes");
  LATHE_CUDA_CHECK(cudaMemcpyAsync(ctx.pinned_host(), device_value, sizeof(T), cudaMemcpyDeviceToHost, ctx.stream()));
  LATHE_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  T value;
  std::memcpy(&value, ctx.pinned_host(), sizeof(T));
  return value;
}

void check_vector(const CudaContext& ctx, const Tensor& t, int64_t C, const char* what) {
  check_f32(ctx, t, what);
  LATHE_CHECK(t.stride(0) == 1 || C == 1, what, ": expected a dense [", C, "] vector, got ", t.describe());
}

}  // namespace

// ------------------------------------------------------------------ elementwise
void CudaBackend::relu_forward_impl(const Tensor& src, Tensor& dst) {
  elementwise(*m_ctx, {&src}, dst, false, "relu_forward", [&](const auto& in, float* out, int64_t n) {
    return kernels::relu_forward(m_ctx->stream(), in[0], out, n);
  });
}

void CudaBackend::relu_backward_impl(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) {
  elementwise(*m_ctx, {&dst, &diff_dst}, diff_src, false, "relu_backward", [&](const auto& in, float* out, int64_t n) {
    return kernels::relu_backward(m_ctx->stream(), in[0], in[1], out, n);
  });
}

void CudaBackend::add_impl(const Tensor& a, const Tensor& b, Tensor& dst) {
  elementwise(*m_ctx, {&a, &b}, dst, false, "add", [&](const auto& in, float* out, int64_t n) {
    return kernels::add(m_ctx->stream(), in[0], in[1], out, n);
  });
}

void CudaBackend::axpy_impl(double alpha, const Tensor& src, Tensor& dst) {
  elementwise(*m_ctx, {&src}, dst, true, "axpy", [&](const auto& in, float* out, int64_t n) {
    return kernels::axpy(m_ctx->stream(), static_cast<float>(alpha), in[0], out, n);
  });
}

void CudaBackend::scale_impl(Tensor& t, double alpha) {
  elementwise(*m_ctx, {}, t, true, "scale", [&](const auto&, float* out, int64_t n) {
    return kernels::scale(m_ctx->stream(), out, static_cast<float>(alpha), n);
  });
}

// ------------------------------------------------------------------ max pooling
void CudaBackend::maxpool2d_forward_impl(const PoolParams& p, const Tensor& src, Tensor& dst, Tensor& workspace) {
  check_f32(*m_ctx, src, "maxpool2d_forward src");
  check_f32(*m_ctx, dst, "maxpool2d_forward dst");
  const int64_t H = src.dim(2), W = src.dim(3);
  const int64_t OH = dst.dim(2), OW = dst.dim(3);  // the op contract checked them against p
  LATHE_CHECK(H * W <= INT32_MAX, "maxpool2d: plane of ", H, "x", W, " too large for s32 argmax");
  const StreamScope scope = m_ctx->activate();
  if (!workspace.defined() || workspace.shape() != dst.shape() || workspace.dtype() != DType::s32 ||
      workspace.device() != device() || !workspace.is_contiguous())
    workspace = device_empty(*m_ctx, dst.shape(), DType::s32);
  const kernels::PoolWindow win{p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w};
  LATHE_CUDA_CHECK(kernels::maxpool2d_forward(m_ctx->stream(), dims4(src), OH, OW, win, ptr<float>(src), strides4(src),
                                              ptr<float>(dst), strides4(dst), ptr<int32_t>(workspace),
                                              dst.is_channels_last() && !dst.is_contiguous()));
}

void CudaBackend::maxpool2d_backward_impl(const PoolParams& p, const Tensor& diff_dst, const Tensor& workspace,
                                          Tensor& diff_src) {
  check_f32(*m_ctx, diff_dst, "maxpool2d_backward diff_dst");
  check_f32(*m_ctx, diff_src, "maxpool2d_backward diff_src");
  check_on_device(*m_ctx, workspace, "maxpool2d_backward workspace");
  LATHE_CHECK(workspace.dtype() == DType::s32 && workspace.shape() == diff_dst.shape() && workspace.is_contiguous(),
              "maxpool2d_backward: workspace does not come from maxpool2d_forward of this backend");
  const StreamScope scope = m_ctx->activate();
  const kernels::PoolWindow win{p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w};
  LATHE_CUDA_CHECK(kernels::maxpool2d_backward(m_ctx->stream(), dims4(diff_src), diff_dst.dim(2), diff_dst.dim(3), win,
                                               ptr<float>(diff_dst), strides4(diff_dst), ptr<int32_t>(workspace),
                                               ptr<float>(diff_src), strides4(diff_src),
                                               diff_src.is_channels_last() && !diff_src.is_contiguous()));
}

// ------------------------------------------------------------------ batch norm
void CudaBackend::batchnorm_forward_training_impl(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                                  const Tensor& beta, Tensor& dst, Tensor& save_mean,
                                                  Tensor& save_invstd, Tensor& running_mean, Tensor& running_var) {
  check_f32(*m_ctx, src, "batchnorm_forward_training src");
  check_f32(*m_ctx, dst, "batchnorm_forward_training dst");
  const int64_t C = src.dim(1);
  check_vector(*m_ctx, gamma, C, "batchnorm gamma");
  check_vector(*m_ctx, beta, C, "batchnorm beta");
  check_vector(*m_ctx, save_mean, C, "batchnorm save_mean");
  check_vector(*m_ctx, save_invstd, C, "batchnorm save_invstd");
  check_vector(*m_ctx, running_mean, C, "batchnorm running_mean");
  check_vector(*m_ctx, running_var, C, "batchnorm running_var");
  const StreamScope scope = m_ctx->activate();
  LATHE_CUDA_CHECK(kernels::batchnorm_forward_training(
      m_ctx->stream(), dims4(src), ptr<float>(src), strides4(src), ptr<float>(dst), strides4(dst), ptr<float>(gamma),
      ptr<float>(beta), ptr<float>(save_mean), ptr<float>(save_invstd), ptr<float>(running_mean),
      ptr<float>(running_var), p.eps, p.momentum));
}

void CudaBackend::batchnorm_forward_inference_impl(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                                   const Tensor& beta, const Tensor& running_mean,
                                                   const Tensor& running_var, Tensor& dst) {
  check_f32(*m_ctx, src, "batchnorm_forward_inference src");
  check_f32(*m_ctx, dst, "batchnorm_forward_inference dst");
  const int64_t C = src.dim(1);
  check_vector(*m_ctx, gamma, C, "batchnorm gamma");
  check_vector(*m_ctx, beta, C, "batchnorm beta");
  check_vector(*m_ctx, running_mean, C, "batchnorm running_mean");
  check_vector(*m_ctx, running_var, C, "batchnorm running_var");
  const StreamScope scope = m_ctx->activate();
  LATHE_CUDA_CHECK(kernels::batchnorm_forward_inference(
      m_ctx->stream(), dims4(src), ptr<float>(src), strides4(src), ptr<float>(dst), strides4(dst), ptr<float>(gamma),
      ptr<float>(beta), ptr<float>(running_mean), ptr<float>(running_var), p.eps));
}

void CudaBackend::batchnorm_backward_impl(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma,
                                          const Tensor& save_mean, const Tensor& save_invstd, Tensor& diff_src,
                                          Tensor& diff_gamma, Tensor& diff_beta) {
  check_f32(*m_ctx, src, "batchnorm_backward src");
  check_f32(*m_ctx, diff_dst, "batchnorm_backward diff_dst");
  check_f32(*m_ctx, diff_src, "batchnorm_backward diff_src");
  const int64_t C = src.dim(1);
  check_vector(*m_ctx, gamma, C, "batchnorm gamma");
  check_vector(*m_ctx, save_mean, C, "batchnorm save_mean");
  check_vector(*m_ctx, save_invstd, C, "batchnorm save_invstd");
  check_vector(*m_ctx, diff_gamma, C, "batchnorm diff_gamma");
  check_vector(*m_ctx, diff_beta, C, "batchnorm diff_beta");
  const StreamScope scope = m_ctx->activate();
  LATHE_CUDA_CHECK(kernels::batchnorm_backward(m_ctx->stream(), dims4(src), ptr<float>(src), strides4(src),
                                               ptr<float>(diff_dst), strides4(diff_dst), ptr<float>(gamma),
                                               ptr<float>(save_mean), ptr<float>(save_invstd), ptr<float>(diff_src),
                                               strides4(diff_src), ptr<float>(diff_gamma), ptr<float>(diff_beta)));
}

// ------------------------------------------------------------------ dropout
void CudaBackend::dropout_forward_impl(double p, uint64_t seed, const Tensor& src, Tensor& dst, Tensor& mask) {
  check_f32(*m_ctx, src, "dropout_forward src");
  check_f32(*m_ctx, dst, "dropout_forward dst");
  const StreamScope scope = m_ctx->activate();
  if (!mask.defined() || mask.shape() != src.shape() || mask.dtype() != DType::u8 || mask.device() != device() ||
      !mask.is_contiguous())
    mask = device_empty(*m_ctx, src.shape(), DType::u8);
  LATHE_CUDA_CHECK(kernels::dropout_forward(m_ctx->stream(), ptr<float>(src), layout_of(src), ptr<float>(dst),
                                            layout_of(dst), ptr<uint8_t>(mask), src.numel(), p, seed));
}

void CudaBackend::dropout_backward_impl(double p, const Tensor& diff_dst, const Tensor& mask, Tensor& diff_src) {
  check_f32(*m_ctx, diff_dst, "dropout_backward diff_dst");
  check_f32(*m_ctx, diff_src, "dropout_backward diff_src");
  check_on_device(*m_ctx, mask, "dropout_backward mask");
  LATHE_CHECK(mask.is_contiguous(), "dropout_backward: mask ", mask.describe(),
              " does not come from dropout_forward of this backend");
  const StreamScope scope = m_ctx->activate();
  LATHE_CUDA_CHECK(kernels::dropout_backward(m_ctx->stream(), ptr<float>(diff_dst), layout_of(diff_dst),
                                             ptr<uint8_t>(mask), ptr<float>(diff_src), layout_of(diff_src),
                                             diff_dst.numel(), p));
}

// ------------------------------------------------------------------ loss
LossResult CudaBackend::softmax_cross_entropy_impl(const Tensor& logits, const Tensor& labels, Tensor* diff_logits,
                                                   double grad_scale) {
  check_f32(*m_ctx, logits, "softmax_cross_entropy logits");
  check_on_device(*m_ctx, labels, "softmax_cross_entropy labels");
  const StreamScope scope = m_ctx->activate();
  const int64_t N = logits.dim(0), C = logits.dim(1);
  const Tensor z = logits.stride(1) == 1 || C == 1 ? logits : make_contiguous(*m_ctx, logits);
  const Tensor y = make_contiguous(*m_ctx, labels);
  Tensor g;
  if (diff_logits) {
    check_f32(*m_ctx, *diff_logits, "softmax_cross_entropy diff_logits");
    g = diff_logits->stride(1) == 1 || C == 1 ? *diff_logits : device_empty(*m_ctx, logits.shape(), DType::f32);
  }
  const auto ld = [](const Tensor& t) { return t.dim(0) > 1 ? t.stride(0) : t.dim(1); };
  // One scratch block: totals first (aligned), then the per-row results.
  const size_t totals_bytes = 256;
  char* scratch = static_cast<char*>(m_ctx->scratch(totals_bytes + kernels::softmax_xent_scratch_bytes(N)));
  auto* totals = reinterpret_cast<kernels::XentTotals*>(scratch);
  LATHE_CUDA_CHECK(kernels::softmax_xent(m_ctx->stream(), ptr<float>(z), N, C, ld(z), ptr<int32_t>(y),
                                         diff_logits ? ptr<float>(g) : nullptr, diff_logits ? ld(g) : 0,
                                         static_cast<float>(grad_scale), scratch + totals_bytes, totals));
  if (diff_logits && !g.same_memory(*diff_logits))
    device_strided_copy(*m_ctx, g, *diff_logits);
  const auto t = read_back<kernels::XentTotals>(*m_ctx, totals);
  LATHE_CHECK(t.bad_labels == 0, "softmax_cross_entropy: ", t.bad_labels, " label(s) out of range [0, ", C, ")");
  return LossResult{t.loss_sum, static_cast<int64_t>(t.correct)};
}

// ------------------------------------------------------------------ optimizers
void CudaBackend::sgd_update_impl(const SgdParams& p, Tensor& param, const Tensor& grad, Tensor& momentum_buf) {
  check_f32(*m_ctx, param, "sgd_update param");
  check_f32(*m_ctx, grad, "sgd_update grad");
  LATHE_CHECK(param.is_dense(), "sgd_update: param must be dense, got ", param.describe());
  const bool use_momentum = p.momentum != 0;
  if (use_momentum) {
    check_f32(*m_ctx, momentum_buf, "sgd_update momentum_buf");
    LATHE_CHECK(same_dense_layout(param, momentum_buf), "sgd_update: momentum_buf ", momentum_buf.describe(),
                " must have param's layout ", param.describe());
  }
  const StreamScope scope = m_ctx->activate();
  const Tensor g = match_layout(*m_ctx, grad, param);
  LATHE_CUDA_CHECK(kernels::sgd_update(m_ctx->stream(), ptr<float>(param), ptr<float>(g),
                                       use_momentum ? ptr<float>(momentum_buf) : nullptr, param.numel(),
                                       static_cast<float>(p.lr), static_cast<float>(p.momentum),
                                       static_cast<float>(p.weight_decay), p.nesterov));
}

void CudaBackend::adamw_update_impl(const AdamWParams& p, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) {
  check_f32(*m_ctx, param, "adamw_update param");
  check_f32(*m_ctx, grad, "adamw_update grad");
  check_f32(*m_ctx, m, "adamw_update m");
  check_f32(*m_ctx, v, "adamw_update v");
  LATHE_CHECK(param.is_dense() && same_dense_layout(param, m) && same_dense_layout(param, v),
              "adamw_update: param, m and v must share one dense layout: ", param.describe(), ", ", m.describe(), ", ",
              v.describe());
  LATHE_CHECK(p.step >= 1, "adamw_update: step is 1-based, got ", p.step);
  const StreamScope scope = m_ctx->activate();
  const Tensor g = match_layout(*m_ctx, grad, param);
  const double bc1 = 1.0 - std::pow(p.beta1, static_cast<double>(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, static_cast<double>(p.step));
  LATHE_CUDA_CHECK(kernels::adamw_update(m_ctx->stream(), ptr<float>(param), ptr<float>(g), ptr<float>(m),
                                         ptr<float>(v), param.numel(), p.lr, p.beta1, p.beta2, p.eps, p.weight_decay,
                                         bc1, bc2));
}

// ------------------------------------------------------------------ reductions
namespace {

double reduce(CudaContext& ctx, const Tensor& t, bool squares, const char* what) {
  check_f32(ctx, t, what);
  const StreamScope scope = ctx.activate();
  const Tensor d = dense(ctx, t);  // a flat pass over dense memory visits every element once
  char* scratch = static_cast<char*>(ctx.scratch(256 + kernels::reduce_scratch_bytes()));
  auto* result = reinterpret_cast<double*>(scratch);
  LATHE_CUDA_CHECK(kernels::reduce_sum(ctx.stream(), ptr<float>(d), d.numel(), squares, scratch + 256, result));
  return read_back<double>(ctx, result);
}

}  // namespace

double CudaBackend::sum_impl(const Tensor& t) { return reduce(*m_ctx, t, false, "sum"); }

double CudaBackend::sum_squares_impl(const Tensor& t) { return reduce(*m_ctx, t, true, "sum_squares"); }

}  // namespace lathe::cuda
