// MaxPool2d: max over kernel windows; keeps the backend's workspace (argmax) between passes. Fed by
// a ReLU (set_input_relu), its backward applies the ReLU's mask to the pooled gradient (dy where the
// output > 0: the output is the ReLU's output at the maximum), a quarter-size pass for 2x2 windows,
// and the Model skips the ReLU's full-size backward.
#pragma once

#include "engine/nn/layer.h"

namespace lathe {

class MaxPool2d final : public Layer {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0)
      : m_p{kernel, kernel, stride ? stride : kernel, stride ? stride : kernel, padding, padding} {
    LATHE_CHECK(kernel > 0 && padding >= 0 && padding * 2 <= kernel, "maxpool2d: bad kernel ", kernel, " / padding ",
                padding);
  }
  std::string kind() const override { return "maxpool2d"; }
  std::unique_ptr<Layer> fresh_copy() const override {  // the constructor makes the window square
    return std::make_unique<MaxPool2d>(m_p.kernel_h, m_p.stride_h, m_p.pad_h);
  }
  std::string describe() const override {
    return "maxpool2d(k" + std::to_string(m_p.kernel_h) + " s" + std::to_string(m_p.stride_h) + ")";
  }
  LowPrecisionIo low_precision_io(const Backend& backend, DType precision) const override {
    return backend.supports(Op::maxpool2d, precision) ? LowPrecisionIo::passes_through : LowPrecisionIo::none;
  }
  Shape output_shape(const std::vector<Shape>& inputs) const override {
    const Shape& in = inputs.at(0);
    if (in.size() != 4)
      throw ConfigError(describe() + " expects input [N, C, H, W], got " + shape_str(in));
    return {in[0], in[1], conv_out_size(in[2], m_p.kernel_h, m_p.stride_h, m_p.pad_h),
            conv_out_size(in[3], m_p.kernel_w, m_p.stride_w, m_p.pad_w)};
  }
  void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) override {
    ctx.backend.maxpool2d_forward(m_p, *src[0], dst, m_workspace);
  }
  void backward(LayerContext& ctx, const std::vector<const Tensor*>&, const Tensor& dst, const Tensor& diff_dst,
                const std::vector<Tensor*>& diff_src) override {
    if (!diff_src[0])
      return;
    if (!m_input_relu)
      return ctx.backend.maxpool2d_backward(m_p, diff_dst, m_workspace, *diff_src[0]);
    if (!m_masked.defined() || m_masked.shape() != diff_dst.shape() || m_masked.dtype() != diff_dst.dtype() ||
        m_masked.strides() != diff_dst.strides() || m_masked.device() != diff_dst.device())
      m_masked = ctx.backend.empty(diff_dst.shape(), diff_dst.dtype(), diff_dst.format());
    ctx.backend.relu_backward(dst, diff_dst, m_masked);
    ctx.backend.maxpool2d_backward(m_p, m_masked, m_workspace, *diff_src[0]);
  }
  bool can_mask_input_relu() const override { return true; }
  void set_input_relu(bool on) override { m_input_relu = on; }
  const PoolParams& pool_params() const { return m_p; }

 private:
  PoolParams m_p;
  Tensor m_workspace;
  bool m_input_relu = false;
  Tensor m_masked;  // the pooled gradient with the ReLU's mask applied
};

}  // namespace lathe
