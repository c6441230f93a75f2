// Conv2d forward/backward through the backend's convolution ops.
#include "engine/nn/conv2d.h"

#include <cmath>

namespace lathe {

using Slot = MatmulPrecision::Slot;

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding, bool bias)
    : m_in(in_channels),
      m_out(out_channels),
      m_kernel(kernel),
      m_p{stride, stride, padding, padding},
      m_has_bias(bias) {
  LATHE_CHECK(in_channels > 0 && out_channels > 0 && kernel > 0 && stride > 0 && padding >= 0,
              "conv2d: channels, kernel and stride must be positive and padding >= 0");
}

std::string Conv2d::describe() const {
  return "conv2d(" + std::to_string(m_in) + " -> " + std::to_string(m_out) + ", k" + std::to_string(m_kernel) + " s" +
         std::to_string(m_p.stride_h) + " p" + std::to_string(m_p.pad_h) + ")";
}

Shape Conv2d::output_shape(const std::vector<Shape>& inputs) const {
  const Shape& in = inputs.at(0);
  if (in.size() != 4 || in[1] != m_in)
    throw ConfigError(describe() + " expects input [N, " + std::to_string(m_in) + ", H, W], got " + shape_str(in));
  return {in[0], m_out, conv_out_size(in[2], m_kernel, m_p.stride_h, m_p.pad_h),
          conv_out_size(in[3], m_kernel, m_p.stride_w, m_p.pad_w)};
}

void Conv2d::create_params(Backend& backend, DType dtype, Rng& rng) {
  const double fan_in = static_cast<double>(m_in * m_kernel * m_kernel);
  const double bound = 1.0 / std::sqrt(fan_in);  // kaiming_uniform(a = sqrt(5)), as PyTorch
  m_weight = make_param(backend, "weight", {m_out, m_in, m_kernel, m_kernel}, dtype);
  init_uniform(backend, m_weight.value, bound, rng);
  if (m_has_bias) {
    m_bias = make_param(backend, "bias", {m_out}, dtype);
    init_uniform(backend, m_bias.value, bound, rng);
  }
}

void Conv2d::forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) {
  Backend& be = ctx.backend;
  const Tensor& x = m_precision.forward_operand(Slot::input, be, Op::conv2d, input_operand(be, *src[0]), m_src_low,
                                                ctx.training, ctx.step);
  const Tensor& w = m_precision.forward_operand(Slot::weights, be, Op::conv2d, weight_operand(be), m_weight_low,
                                                ctx.training, ctx.step);
  be.conv2d_forward(m_p, x, w, m_has_bias ? &m_bias.value : nullptr, dst, m_post);
  m_precision.round_result(be, dst);
}

void Conv2d::backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor& dst,
                      const Tensor& diff_dst, const std::vector<Tensor*>& diff_src) {
  // The input's low-precision copy is reused only when it was made from this very tensor in this
  // training step (MatmulPrecision::backward_operand), and so are the weights'; diff_dst is cast here.
  Backend& be = ctx.backend;
  const Tensor& dy = m_precision.operand(be, Op::conv2d, diff_dst, m_diff_dst_low);
  const Tensor& x = m_precision.backward_operand(Slot::input, be, Op::conv2d, input_operand(be, *src[0]), m_src_low,
                                                 ctx.training, ctx.step);
  be.conv2d_backward_weights(m_p, x, dy, m_weight.grad, m_has_bias ? &m_bias.grad : nullptr);
  m_precision.round_result(be, m_weight.grad);
  if (m_has_bias)
    m_precision.round_result(be, m_bias.grad);
  if (diff_src[0]) {
    const Tensor& w = m_precision.backward_operand(Slot::weights, be, Op::conv2d, weight_operand(be), m_weight_low,
                                                   ctx.training, ctx.step);
    be.conv2d_backward_data(m_p, dy, w, *diff_src[0]);
    m_precision.round_result(be, *diff_src[0]);
    if (m_transform)
      m_transform->input_grad(be, *src[0], *diff_src[0]);
  }
}

std::vector<Param*> Conv2d::params() {
  if (m_has_bias)
    return {&m_weight, &m_bias};
  return {&m_weight};
}

int64_t Conv2d::flops_per_sample(const std::vector<Shape>& inputs) const {
  const Shape out = output_shape(inputs);
  return 2 * m_in * m_kernel * m_kernel * m_out * out[2] * out[3];
}

}  // namespace lathe
