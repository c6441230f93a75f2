// OperandTransform: a hook that changes what a Linear or Conv2d multiplies, without the layer knowing
// why. Quantization-aware training (compress/quant/fake_quant.h) uses it to fake-quantize the
// layer's input and weights in forward and to apply the straight-through estimator in backward; the
// layer keeps its f32 parameters (the optimizer updates those) and its oneDNN/cuBLAS kernels.
#pragma once

#include "engine/backend/backend.h"

namespace lathe {

class OperandTransform {
 public:
  virtual ~OperandTransform() = default;
  /// The layer input as the matmul should read it; may return `src` itself or a tensor held in `buf`
  /// (same shape and layout as `src`).
  virtual const Tensor& input(Backend& backend, const Tensor& src, Tensor& buf) = 0;
  /// The weights as the matmul should read them (`weights` itself or `buf`).
  virtual const Tensor& weights(Backend& backend, const Tensor& weights, Tensor& buf) = 0;
  /// Turns d(loss)/d(transformed input) into d(loss)/d(src), in place (the straight-through
  /// estimator: pass where the input was inside the representable range, zero where it was clipped).
  virtual void input_grad(Backend& backend, const Tensor& src, Tensor& diff_src) = 0;
};

}  // namespace lathe
