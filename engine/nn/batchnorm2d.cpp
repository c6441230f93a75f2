// BatchNorm2d through the backend's batchnorm ops; evaluation uses the running statistics.
#include "engine/nn/batchnorm2d.h"

namespace lathe {

BatchNorm2d::BatchNorm2d(int64_t channels, double eps, double momentum) : m_channels(channels) {
  LATHE_CHECK(channels > 0, "batchnorm2d needs channels > 0");
  m_p.eps = eps;
  m_p.momentum = momentum;
}

Shape BatchNorm2d::output_shape(const std::vector<Shape>& inputs) const {
  const Shape& in = inputs.at(0);
  if (in.size() != 4 || in[1] != m_channels)
    throw ConfigError(describe() + " expects input [N, " + std::to_string(m_channels) + ", H, W], got " +
                      shape_str(in));
  return in;
}

void BatchNorm2d::create_params(Backend& backend, DType dtype, Rng&) {
  m_gamma = make_param(backend, "weight", {m_channels}, dtype);
  m_beta = make_param(backend, "bias", {m_channels}, dtype);
  Tensor ones = Tensor::empty({m_channels}, dtype);
  ones.fill(1.0);
  backend.copy(ones, m_gamma.value);
  m_running_mean = {"running_mean", backend.zeros({m_channels}, dtype)};
  m_running_var = {"running_var", backend.empty({m_channels}, dtype)};
  backend.copy(ones, m_running_var.value);
  m_num_batches = {"num_batches_tracked", Tensor::zeros({1}, DType::s32)};  // host counter, PyTorch's name
  m_save_mean = backend.zeros({m_channels}, dtype);
  m_save_invstd = backend.zeros({m_channels}, dtype);
}

void BatchNorm2d::forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) {
  if (ctx.training) {
    ctx.backend.batchnorm_forward_training(m_p, *src[0], m_gamma.value, m_beta.value, dst, m_save_mean, m_save_invstd,
                                           m_running_mean.value, m_running_var.value);
    m_num_batches.value.set({0}, m_num_batches.value.get({0}) + 1);
  } else {
    ctx.backend.batchnorm_forward_inference(m_p, *src[0], m_gamma.value, m_beta.value, m_running_mean.value,
                                            m_running_var.value, dst);
  }
}

void BatchNorm2d::backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor&,
                           const Tensor& diff_dst, const std::vector<Tensor*>& diff_src) {
  // The batch-statistics gradient is wrong for a pass that normalised with running statistics.
  LATHE_CHECK(ctx.training, "batchnorm2d backward after an evaluation-mode forward is not supported");
  Tensor* dx = diff_src[0];
  if (!dx) {
    if (!m_scratch.defined() || m_scratch.shape() != src[0]->shape())
      m_scratch = ctx.backend.empty(src[0]->shape(), src[0]->dtype(), src[0]->format());
    dx = &m_scratch;
  }
  ctx.backend.batchnorm_backward(*src[0], diff_dst, m_gamma.value, m_save_mean, m_save_invstd, *dx, m_gamma.grad,
                                 m_beta.grad);
}

}  // namespace lathe
