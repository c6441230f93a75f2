// Conv2d: square or rectangular kernels, stride and zero padding; weights [out, in, kh, kw].
#pragma once

#include "engine/nn/matmul_layer.h"

namespace lathe {

class Conv2d final : public MatmulLayer {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
         bool bias = true);
  std::string kind() const override { return "conv2d"; }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) const override;
  MemoryFormat output_format(const Backend& backend, const std::vector<const Tensor*>&) const override {
    return backend.preferred_conv_format();
  }
  std::unique_ptr<Layer> fresh_copy() const override {  // the constructor makes stride and padding square
    return std::make_unique<Conv2d>(m_in, m_out, m_kernel, m_p.stride_h, m_p.pad_h, has_bias());
  }
  void create_params(Backend& backend, DType dtype, Rng& rng) override;
  int64_t flops_per_sample(const std::vector<Shape>& inputs) const override;

  int64_t in_channels() const { return m_in; }
  int64_t out_channels() const { return m_out; }
  int64_t kernel() const { return m_kernel; }
  const ConvParams& conv_params() const { return m_p; }

 private:
  void matmul_forward(Backend& be, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& dst,
                      PostOp post) override {
    be.conv2d_forward(m_p, x, w, bias, dst, post);
  }
  void matmul_backward_data(Backend& be, const Tensor& dy, const Tensor& w, Tensor& dx) override {
    be.conv2d_backward_data(m_p, dy, w, dx);
  }
  void matmul_backward_weights(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db) override {
    be.conv2d_backward_weights(m_p, x, dy, dw, db);
  }

  int64_t m_in, m_out, m_kernel;
  ConvParams m_p;
};

}  // namespace lathe
