// Linear: y = x W^T + b, W [out, in] as in PyTorch.
#pragma once

#include "engine/nn/matmul_layer.h"

namespace lathe {

class Linear final : public MatmulLayer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::string kind() const override { return "linear"; }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) const override;
  MemoryFormat output_format(const Backend&, const std::vector<const Tensor*>&) const override {
    return MemoryFormat::contiguous;
  }
  std::unique_ptr<Layer> fresh_copy() const override { return std::make_unique<Linear>(m_in, m_out, has_bias()); }
  void create_params(Backend& backend, DType dtype, Rng& rng) override;
  int64_t flops_per_sample(const std::vector<Shape>& inputs) const override { return 2 * m_in * m_out; }

  int64_t in_features() const { return m_in; }
  int64_t out_features() const { return m_out; }

 private:
  void matmul_forward(Backend& be, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& dst,
                      PostOp post) override {
    be.linear_forward(x, w, bias, dst, post);
  }
  void matmul_backward_data(Backend& be, const Tensor& dy, const Tensor& w, Tensor& dx) override {
    be.linear_backward_data(dy, w, dx);
  }
  void matmul_backward_weights(Backend& be, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db) override {
    be.linear_backward_weights(x, dy, dw, db);
  }

  int64_t m_in, m_out;
};

}  // namespace lathe
