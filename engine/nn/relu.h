// ReLU: max(x, 0), elementwise, in the input's layout.
#pragma once

#include "engine/nn/layer.h"

namespace lathe {

class ReLU final : public Layer {
 public:
  std::string kind() const override { return "relu"; }
  std::unique_ptr<Layer> fresh_copy() const override { return std::make_unique<ReLU>(); }
  LowPrecisionIo low_precision_io(const Backend& backend, DType precision) const override {
    return backend.supports(Op::relu, precision) ? LowPrecisionIo::passes_through : LowPrecisionIo::none;
  }
  Shape output_shape(const std::vector<Shape>& inputs) const override { return inputs.at(0); }
  void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) override {
    ctx.backend.relu_forward(*src[0], dst);
  }
  void backward(LayerContext& ctx, const std::vector<const Tensor*>&, const Tensor& dst, const Tensor& diff_dst,
                const std::vector<Tensor*>& diff_src) override {
    if (diff_src[0])
      ctx.backend.relu_backward(dst, diff_dst, *diff_src[0]);
  }
};

}  // namespace lathe
