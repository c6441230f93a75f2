// Linear layer forward/backward through the backend's matmul ops.
#include "engine/nn/linear.h"

#include <cmath>

namespace lathe {

using Slot = MatmulPrecision::Slot;

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : m_in(in_features), m_out(out_features), m_has_bias(bias) {
  LATHE_CHECK(in_features > 0 && out_features > 0, "linear needs positive sizes, got ", in_features, " -> ",
              out_features);
}

std::string Linear::describe() const {
  return "linear(" + std::to_string(m_in) + " -> " + std::to_string(m_out) + (m_has_bias ? "" : ", no bias") + ")";
}

Shape Linear::output_shape(const std::vector<Shape>& inputs) const {
  const Shape& in = inputs.at(0);
  if (in.size() != 2 || in[1] != m_in)
    throw ConfigError(describe() + " expects input [N, " + std::to_string(m_in) + "], got " + shape_str(in) +
                      (in.size() == 4 ? " (add a flatten layer before it)" : ""));
  return {in[0], m_out};
}

void Linear::create_params(Backend& backend, DType dtype, Rng& rng) {
  // PyTorch: kaiming_uniform(a = sqrt(5)) gives bound 1/sqrt(fan_in) for the weight; the bias too.
  const double bound = 1.0 / std::sqrt(static_cast<double>(m_in));
  m_weight = make_param(backend, "weight", {m_out, m_in}, dtype);
  init_uniform(backend, m_weight.value, bound, rng);
  if (m_has_bias) {
    m_bias = make_param(backend, "bias", {m_out}, dtype);
    init_uniform(backend, m_bias.value, bound, rng);
  }
}

void Linear::forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) {
  Backend& be = ctx.backend;
  const Tensor& x = m_precision.forward_operand(Slot::input, be, Op::linear, input_operand(be, *src[0]), m_src_low,
                                                ctx.training, ctx.step);
  const Tensor& w = m_precision.forward_operand(Slot::weights, be, Op::linear, weight_operand(be), m_weight_low,
                                                ctx.training, ctx.step);
  be.linear_forward(x, w, m_has_bias ? &m_bias.value : nullptr, dst, m_post);
  m_precision.round_result(be, dst);
}

void Linear::backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor& dst,
                      const Tensor& diff_dst, const std::vector<Tensor*>& diff_src) {
  // The input's low-precision copy is reused only when it was made from this very tensor in this
  // training step (MatmulPrecision::backward_operand), and so are the weights'; diff_dst is cast here.
  Backend& be = ctx.backend;
  const Tensor& dy = m_precision.operand(be, Op::linear, diff_dst, m_diff_dst_low);
  const Tensor& x = m_precision.backward_operand(Slot::input, be, Op::linear, input_operand(be, *src[0]), m_src_low,
                                                 ctx.training, ctx.step);
  be.linear_backward_weights(x, dy, m_weight.grad, m_has_bias ? &m_bias.grad : nullptr);
  m_precision.round_result(be, m_weight.grad);
  if (m_has_bias)
    m_precision.round_result(be, m_bias.grad);
  if (diff_src[0]) {
    const Tensor& w = m_precision.backward_operand(Slot::weights, be, Op::linear, weight_operand(be), m_weight_low,
                                                   ctx.training, ctx.step);
    be.linear_backward_data(dy, w, *diff_src[0]);
    m_precision.round_result(be, *diff_src[0]);
    if (m_transform)
      m_transform->input_grad(be, *src[0], *diff_src[0]);
  }
}

std::vector<Param*> Linear::params() {
  if (m_has_bias)
    return {&m_weight, &m_bias};
  return {&m_weight};
}

}  // namespace lathe
