// MatmulLayer: what Linear and Conv2d share around their three matmuls (forward, data gradient,
// weight gradient): weight and optional bias, a fused ReLU, mixed precision (matmul_precision.h),
// the QAT operand transform and low-precision activations. The subclasses say which backend ops
// the matmuls are; forward() and backward() are written once here.
#pragma once

#include <memory>

#include "engine/nn/layer.h"
#include "engine/nn/matmul_precision.h"

namespace lathe {

class MatmulLayer : public Layer {
 public:
  void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) final;
  void backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor& dst, const Tensor& diff_dst,
                const std::vector<Tensor*>& diff_src) final;
  std::vector<Param*> params() final;
  bool can_fuse_relu() const final { return true; }
  void set_fused_relu(bool on) final { m_post = on ? PostOp::relu : PostOp::none; }
  void set_compute_precision(DType precision) final { m_precision.set(precision); }
  /// Low-precision activations in and out when it computes natively at that precision and the
  /// backend writes its results at it (not under QAT, whose transform reads f32 inputs).
  LowPrecisionIo low_precision_io(const Backend& backend, DType precision) const final;
  bool set_operand_transform(std::shared_ptr<OperandTransform> t) final {
    m_transform = std::move(t);
    return true;
  }
  bool has_bias() const { return m_has_bias; }

 protected:
  MatmulLayer(Op op, bool bias) : m_op(op), m_has_bias(bias) {}

  /// The three matmuls on the backend (operands already in the compute precision).
  virtual void matmul_forward(Backend& be, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& dst,
                              PostOp post) = 0;
  virtual void matmul_backward_data(Backend& be, const Tensor& dy, const Tensor& w, Tensor& dx) = 0;
  virtual void matmul_backward_weights(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db) = 0;

  Param m_weight, m_bias;

 private:
  /// The input / weights as the matmuls read them: through the QAT transform when one is set.
  const Tensor& input_operand(Backend& be, const Tensor& src) {
    return m_transform ? m_transform->input(be, src, m_src_fq) : src;
  }
  const Tensor& weight_operand(Backend& be) {
    return m_transform ? m_transform->weights(be, m_weight.value, m_weight_fq) : m_weight.value;
  }

  Op m_op;
  bool m_has_bias;
  PostOp m_post = PostOp::none;
  MatmulPrecision m_precision;
  Tensor m_src_low, m_weight_low, m_diff_dst_low;  // low-precision operands, reused between steps
  std::shared_ptr<OperandTransform> m_transform;   // QAT fake quantization, or null
  Tensor m_src_fq, m_weight_fq;                    // transformed operands, reused between steps
};

}  // namespace lathe
