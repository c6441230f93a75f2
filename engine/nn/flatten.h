// Flatten: [N, C, H, W] -> [N, C*H*W] in PyTorch's (C, H, W) order, whatever the input layout, so
// the next Linear's weights mean the same as in PyTorch (channels-last inputs are reordered).
#pragma once

#include "engine/nn/layer.h"

namespace lathe {

class Flatten final : public Layer {
 public:
  std::string kind() const override { return "flatten"; }
  std::unique_ptr<Layer> fresh_copy() const override { return std::make_unique<Flatten>(); }
  LowPrecisionIo low_precision_io(const Backend& backend, DType precision) const override {
    return backend.supports(Op::reorder, precision) ? LowPrecisionIo::passes_through : LowPrecisionIo::none;
  }
  Shape output_shape(const std::vector<Shape>& inputs) const override {
    const Shape& in = inputs.at(0);
    int64_t rest = 1;
    for (size_t i = 1; i < in.size(); ++i)
      rest *= in[i];
    return {in.at(0), rest};
  }
  MemoryFormat output_format(const Backend&, const std::vector<const Tensor*>&) const override {
    return MemoryFormat::contiguous;
  }
  void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) override {
    Tensor as_src_shape = dst.view(src[0]->shape());
    ctx.backend.reorder(*src[0], as_src_shape);
  }
  void backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor&, const Tensor& diff_dst,
                const std::vector<Tensor*>& diff_src) override {
    if (diff_src[0])
      ctx.backend.reorder(diff_dst.view(src[0]->shape()), *diff_src[0]);
  }
};

}  // namespace lathe
