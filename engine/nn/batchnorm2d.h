// BatchNorm2d: per-channel normalisation with learned scale/shift and running statistics (PyTorch
// semantics: momentum 0.1, eps 1e-5, unbiased running variance).
#pragma once

#include "engine/nn/layer.h"

namespace lathe {

class BatchNorm2d final : public Layer {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1);
  std::string kind() const override { return "batchnorm2d"; }
  std::unique_ptr<Layer> fresh_copy() const override {
    return std::make_unique<BatchNorm2d>(m_channels, m_p.eps, m_p.momentum);
  }
  std::string describe() const override { return "batchnorm2d(" + std::to_string(m_channels) + ")"; }
  Shape output_shape(const std::vector<Shape>& inputs) const override;
  void create_params(Backend& backend, DType dtype, Rng& rng) override;
  void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) override;
  void backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor& dst, const Tensor& diff_dst,
                const std::vector<Tensor*>& diff_src) override;
  std::vector<Param*> params() override { return {&m_gamma, &m_beta}; }
  std::vector<Buffer*> buffers() override { return {&m_running_mean, &m_running_var, &m_num_batches}; }
  int64_t channels() const { return m_channels; }
  const BatchNormParams& bn_params() const { return m_p; }

 private:
  int64_t m_channels;
  BatchNormParams m_p;
  Param m_gamma, m_beta;
  Buffer m_running_mean, m_running_var, m_num_batches;
  Tensor m_save_mean, m_save_invstd;
  Tensor m_scratch;  // diff_src target when the input needs no gradient
};

}  // namespace lathe
