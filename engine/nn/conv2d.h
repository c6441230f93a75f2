// Conv2d: square or rectangular kernels, stride and zero padding; weights [out, in, kh, kw].
#pragma once

#include "engine/nn/layer.h"
#include "engine/nn/matmul_precision.h"

namespace lathe {

class Conv2d final : public Layer {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
         bool bias = true);
  std::string kind() const override { return "conv2d"; }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) const override;
  MemoryFormat output_format(const Backend& backend, const std::vector<const Tensor*>&) const override {
    return backend.preferred_conv_format();
  }
  void create_params(Backend& backend, DType dtype, Rng& rng) override;
  void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) override;
  void backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor& dst, const Tensor& diff_dst,
                const std::vector<Tensor*>& diff_src) override;
  std::vector<Param*> params() override;
  bool can_fuse_relu() const override { return true; }
  void set_fused_relu(bool on) override { m_post = on ? PostOp::relu : PostOp::none; }
  void set_compute_precision(DType precision) override { m_precision.set(precision); }
  /// Low-precision activations in and out when it computes natively at that precision and the
  /// backend writes its results at it (not under QAT, whose transform reads f32 inputs).
  LowPrecisionIo low_precision_io(const Backend& backend, DType precision) const override {
    return precision == m_precision.precision() && m_precision.native(backend, Op::conv2d) &&
                   backend.writes_matmul_results_in(precision) && !m_transform
               ? LowPrecisionIo::converts
               : LowPrecisionIo::none;
  }
  bool set_operand_transform(std::shared_ptr<OperandTransform> t) override {
    m_transform = std::move(t);
    return true;
  }
  int64_t flops_per_sample(const std::vector<Shape>& inputs) const override;

  int64_t in_channels() const { return m_in; }
  int64_t out_channels() const { return m_out; }
  int64_t kernel() const { return m_kernel; }
  const ConvParams& conv_params() const { return m_p; }
  bool has_bias() const { return m_has_bias; }

 private:
  /// The input / weights as the matmuls read them: through the QAT transform when one is set.
  const Tensor& input_operand(Backend& be, const Tensor& src) {
    return m_transform ? m_transform->input(be, src, m_src_fq) : src;
  }
  const Tensor& weight_operand(Backend& be) {
    return m_transform ? m_transform->weights(be, m_weight.value, m_weight_fq) : m_weight.value;
  }

  int64_t m_in, m_out, m_kernel;
  ConvParams m_p;
  bool m_has_bias;
  PostOp m_post = PostOp::none;
  Param m_weight, m_bias;
  MatmulPrecision m_precision;
  Tensor m_src_low, m_weight_low, m_diff_dst_low;  // low-precision operands, reused between steps
  std::shared_ptr<OperandTransform> m_transform;   // QAT fake quantization, or null
  Tensor m_src_fq, m_weight_fq;                    // transformed operands, reused between steps
};

}  // namespace lathe
