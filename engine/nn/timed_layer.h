// TimedLayer: wraps a Model node's Layer and adds up the wall time (or the calling thread's CPU
// time, LayerClock::thread_cpu: with one thread, immune to a loaded machine) of its forward and
// backward calls (for bench/profile_layers: where a training step's time goes, layer by layer).
// Everything else is delegated, so a timed model computes exactly what the untimed one does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layer.h"
#include "engine/nn/model.h"

namespace lathe {

enum class LayerClock : uint8_t { wall, thread_cpu };

/// Now on that clock, in seconds.
double layer_clock_seconds(LayerClock clock);

class TimedLayer final : public Layer {
 public:
  explicit TimedLayer(std::unique_ptr<Layer> inner, LayerClock clock = LayerClock::wall);

  std::string kind() const override { return m_inner->kind(); }
  std::string describe() const override { return m_inner->describe(); }
  int num_inputs() const override { return m_inner->num_inputs(); }
  Shape output_shape(const std::vector<Shape>& inputs) const override { return m_inner->output_shape(inputs); }
  MemoryFormat output_format(const Backend& backend, const std::vector<const Tensor*>& src) const override {
    return m_inner->output_format(backend, src);
  }
  std::unique_ptr<Layer> fresh_copy() const override { return m_inner->fresh_copy(); }
  void create_params(Backend& backend, DType dtype, Rng& rng) override { m_inner->create_params(backend, dtype, rng); }
  void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) override;
  void backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor& dst, const Tensor& diff_dst,
                const std::vector<Tensor*>& diff_src) override;
  std::vector<Param*> params() override { return m_inner->params(); }
  std::vector<Buffer*> buffers() override { return m_inner->buffers(); }
  int64_t flops_per_sample(const std::vector<Shape>& inputs) const override {
    return m_inner->flops_per_sample(inputs);
  }
  bool can_fuse_relu() const override { return m_inner->can_fuse_relu(); }
  void set_fused_relu(bool on) override { m_inner->set_fused_relu(on); }
  bool can_mask_input_relu() const override { return m_inner->can_mask_input_relu(); }
  void set_input_relu(bool on) override { m_inner->set_input_relu(on); }
  void set_compute_precision(DType precision) override { m_inner->set_compute_precision(precision); }
  LowPrecisionIo low_precision_io(const Backend& backend, DType precision) const override {
    return m_inner->low_precision_io(backend, precision);
  }
  bool set_operand_transform(std::shared_ptr<OperandTransform> t) override {
    return m_inner->set_operand_transform(std::move(t));
  }

  /// Seconds and calls since construction or reset().
  double forward_seconds() const { return m_forward_s; }
  double backward_seconds() const { return m_backward_s; }
  int64_t forward_calls() const { return m_forward_calls; }
  int64_t backward_calls() const { return m_backward_calls; }
  void reset();
  Layer& inner() { return *m_inner; }

 private:
  friend std::vector<TimedLayer*> time_every_layer(Model& model, LayerClock clock);
  std::unique_ptr<Layer> m_inner;
  LayerClock m_clock = LayerClock::wall;
  double m_forward_s = 0, m_backward_s = 0;
  int64_t m_forward_calls = 0, m_backward_calls = 0;
};

/// Wraps every node of `model` (after create_params()) in a TimedLayer; returns them in node order.
/// A ReLU node fused into the layer before it is never called forward (its forward time stays 0);
/// its backward runs as a pass of its own, unless the max pooling after it applies it
/// (Model::relu_backward_folded: then its backward time stays 0 too).
std::vector<TimedLayer*> time_every_layer(Model& model, LayerClock clock = LayerClock::wall);

}  // namespace lathe
