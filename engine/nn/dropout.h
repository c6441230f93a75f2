// Dropout: inverted dropout in training, identity in evaluation.
#pragma once

#include "engine/nn/layer.h"

namespace lathe {

class Dropout final : public Layer {
 public:
  explicit Dropout(double p, uint64_t seed = 0) : m_p(p), m_seed(seed) {
    if (!(p >= 0 && p < 1))
      throw ConfigError("dropout p must be in [0, 1), got " + std::to_string(p));
  }
  std::string kind() const override { return "dropout"; }
  std::unique_ptr<Layer> fresh_copy() const override { return std::make_unique<Dropout>(m_p, m_seed); }
  std::string describe() const override { return "dropout(" + std::to_string(m_p) + ")"; }
  Shape output_shape(const std::vector<Shape>& inputs) const override { return inputs.at(0); }
  void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) override {
    if (!ctx.training || m_p == 0) {
      ctx.backend.reorder(*src[0], dst);
      m_last_training = false;
      return;
    }
    ctx.backend.dropout_forward(m_p, m_seed * 0x9e3779b97f4a7c15ull + ctx.step, *src[0], dst, m_mask);
    m_last_training = true;
  }
  void backward(LayerContext& ctx, const std::vector<const Tensor*>&, const Tensor&, const Tensor& diff_dst,
                const std::vector<Tensor*>& diff_src) override {
    if (!diff_src[0])
      return;
    if (m_last_training) {
      ctx.backend.dropout_backward(m_p, diff_dst, m_mask, *diff_src[0]);
    } else {
      ctx.backend.reorder(diff_dst, *diff_src[0]);
    }
  }
  void set_seed(uint64_t seed) { m_seed = seed; }
  double p() const { return m_p; }
  uint64_t seed() const { return m_seed; }

 private:
  double m_p;
  uint64_t m_seed;
  Tensor m_mask;
  bool m_last_training = false;
};

}  // namespace lathe
