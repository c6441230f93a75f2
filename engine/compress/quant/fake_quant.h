// Fake quantization for quantization-aware training (QAT): values are rounded to the INT8 grid and
// back to f32 (x' = (clamp(round(x / s) + z, qmin, qmax) - z) * s), so f32 training sees the error
// the real INT8 model will make, and gradients flow through the straight-through estimator (STE):
// d x' / d x = 1 where round(x / s) + z lies in [qmin, qmax], 0 where the value was clipped
// (PyTorch's fake_quantize_per_tensor_affine backward, the same mask).
//
// FakeQuantOperands is the OperandTransform (engine/nn/operand_transform.h) a Linear/Conv2d gets in
// QAT: its input is fake-quantized with fixed per-tensor parameters (the PTQ ranges of the value
// that feeds it, as the INT8 executor will quantize it); its weights per output channel with scales
// recomputed from the current weights at every step (int8_weight_params, the rule the INT8 layer
// uses when it is built). The weights' gradient is the gradient at the fake-quantized weights (STE
// with nothing clipped: symmetric max-abs ranges cover every weight). Host (CPU) tensors only.
#pragma once

#include <memory>

#include "engine/backend/formats/quant_params.h"
#include "engine/nn/operand_transform.h"

namespace lathe {

/// dequantize(quantize(src, p), p) in one pass, f32, same shape and layout as `src` (dense host
/// tensors: contiguous or channels-last). Writes into `dst` (allocated when its shape or layout
/// differ).
void fake_quantize(const Tensor& src, const QuantParams& params, Tensor& dst);
Tensor fake_quantize(const Tensor& src, const QuantParams& params);

/// STE: grad[i] = 0 where round(src[i] / s) + z falls outside [qmin, qmax] (per tensor params).
/// `src` and `grad` have the same shape and layout.
void fake_quantize_ste_mask(const Tensor& src, const QuantParams& params, Tensor& grad);

class FakeQuantOperands final : public OperandTransform {
 public:
  /// input: per-tensor 8-bit parameters of the layer input; weight_bits / per_channel_weights: as
  /// the INT8 layer will quantize the weights (Int8LayerData::weights.bits).
  FakeQuantOperands(QuantParams input, int weight_bits, bool per_channel_weights);

  const Tensor& input(Backend& backend, const Tensor& src, Tensor& buf) override;
  const Tensor& weights(Backend& backend, const Tensor& weights, Tensor& buf) override;
  void input_grad(Backend& backend, const Tensor& src, Tensor& diff_src) override;

  const QuantParams& input_params() const { return m_input; }
  int weight_bits() const { return m_weight_bits; }

 private:
  QuantParams m_input;
  int m_weight_bits;
  bool m_per_channel;
};

}  // namespace lathe
