// Add: elementwise sum of two nodes' outputs (residual connections).
#pragma once

#include "engine/nn/layer.h"

namespace lathe {

class Add final : public Layer {
 public:
  std::string kind() const override { return "add"; }
  std::unique_ptr<Layer> fresh_copy() const override { return std::make_unique<Add>(); }
  int num_inputs() const override { return 2; }
  Shape output_shape(const std::vector<Shape>& inputs) const override {
    if (inputs.at(0) != inputs.at(1))
      throw ConfigError("add needs inputs of one shape, got " + shape_str(inputs[0]) + " and " + shape_str(inputs[1]));
    return inputs[0];
  }
  void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) override {
    if (src[0]->strides() == src[1]->strides()) {
      ctx.backend.add(*src[0], *src[1], dst);
    } else {  // different layouts: bring the second to the first's
      Tensor tmp = ctx.backend.empty(src[1]->shape(), src[1]->dtype(), src[0]->format());
      ctx.backend.reorder(*src[1], tmp);
      ctx.backend.add(*src[0], tmp, dst);
    }
  }
  void backward(LayerContext& ctx, const std::vector<const Tensor*>&, const Tensor&, const Tensor& diff_dst,
                const std::vector<Tensor*>& diff_src) override {
    for (Tensor* d : diff_src)
      if (d)
        ctx.backend.reorder(diff_dst, *d);
  }
};

}  // namespace lathe
