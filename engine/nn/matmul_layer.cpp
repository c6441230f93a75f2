// Forward/backward of Linear and Conv2d around their backend matmuls (see matmul_layer.h).
#include "engine/nn/matmul_layer.h"

namespace lathe {

using Slot = MatmulPrecision::Slot;

void MatmulLayer::forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) {
  Backend& be = ctx.backend;
  const Tensor& x =
      m_precision.forward_operand(Slot::input, be, m_op, input_operand(be, *src[0]), m_src_low, ctx.training, ctx.step);
  const Tensor& w =
      m_precision.forward_operand(Slot::weights, be, m_op, weight_operand(be), m_weight_low, ctx.training, ctx.step);
  matmul_forward(be, x, w, m_has_bias ? &m_bias.value : nullptr, dst, m_post);
  m_precision.round_result(be, dst);
}

void MatmulLayer::backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor& dst,
                           const Tensor& diff_dst, const std::vector<Tensor*>& diff_src) {
  // The input's low-precision copy is reused only when it was made from this very tensor in this
  // training step (MatmulPrecision::backward_operand), and so are the weights'; diff_dst is cast here.
  Backend& be = ctx.backend;
  const Tensor& dy = m_precision.operand(be, m_op, diff_dst, m_diff_dst_low);
  const Tensor& x = m_precision.backward_operand(Slot::input, be, m_op, input_operand(be, *src[0]), m_src_low,
                                                 ctx.training, ctx.step);
  matmul_backward_weights(be, x, dy, m_weight.grad, m_has_bias ? &m_bias.grad : nullptr);
  m_precision.round_result(be, m_weight.grad);
  if (m_has_bias)
    m_precision.round_result(be, m_bias.grad);
  if (diff_src[0]) {
    const Tensor& w =
        m_precision.backward_operand(Slot::weights, be, m_op, weight_operand(be), m_weight_low, ctx.training, ctx.step);
    matmul_backward_data(be, dy, w, *diff_src[0]);
    m_precision.round_result(be, *diff_src[0]);
    if (m_transform)
      m_transform->input_grad(be, *src[0], *diff_src[0]);
  }
}

std::vector<Param*> MatmulLayer::params() {
  if (m_has_bias)
    return {&m_weight, &m_bias};
  return {&m_weight};
}

Layer::LowPrecisionIo MatmulLayer::low_precision_io(const Backend& backend, DType precision) const {
  return precision == m_precision.precision() && m_precision.native(backend, m_op) &&
                 backend.writes_matmul_results_in(precision) && !m_transform
             ? LowPrecisionIo::converts
             : LowPrecisionIo::none;
}

}  // namespace lathe
