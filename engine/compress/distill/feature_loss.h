// Feature (intermediate-layer) distillation: the mean squared error between a student activation,
// passed through a learned projection when its shape differs from the teacher's, and the teacher
// activation of the same batch (FitNets, Romero et al. 2015). Per sample the loss is the mean over
// the teacher activation's elements of (proj(s) - t)^2; losses are summed over the batch like the
// cross-entropy's, so the trainer's grad_scale (1 / batch) turns sums into means.
//
// The projection is a Linear layer for [N, F] activations and a 1x1 Conv2d for [N, C, H, W] ones
// (same H and W), none when the shapes already match. Its parameters train with the student but
// are not part of the student model (they are not saved with it).
//
// feature_mse is composed from Backend ops (copy, axpy, sum_squares, scale), so it runs on every
// backend that has them; feature_mse_reference is its plain double oracle.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layer.h"

namespace lathe {

class FeatureProjection {
 public:
  /// Per-sample shapes at batch 1 ([1, F] or [1, C, H, W]). Throws ConfigError naming `pair` (e.g.
  /// "distill.feature_pairs[0] (1:8)") when no linear / 1x1-conv projection maps one onto the other.
  FeatureProjection(const Shape& student_shape, const Shape& teacher_shape, const std::string& pair);

  void create_params(Backend& backend, DType dtype, Rng& rng);
  /// proj(src); returns src itself when there is no projection.
  const Tensor& forward(LayerContext& ctx, const Tensor& src);
  /// Overwrites diff_src with d/d(src) and the projection's parameter gradients (forward first).
  void backward(LayerContext& ctx, const Tensor& src, const Tensor& diff_dst, Tensor& diff_src);

  bool is_identity() const { return !m_layer; }
  std::vector<Param*> params() { return m_layer ? m_layer->params() : std::vector<Param*>{}; }
  std::string describe() const { return m_layer ? m_layer->describe() : "identity"; }
  Layer* layer() { return m_layer.get(); }

 private:
  std::unique_ptr<Layer> m_layer;
  Tensor m_dst;
};

/// Sum over the batch of mean((projected - teacher)^2) per sample. When `diff_projected` is given it
/// is overwritten with weight * grad_scale * d(loss)/d(projected), in projected's layout. `scratch`
/// is reused between calls. Both tensors must have the same shape on the backend's device (any layouts).
double feature_mse(Backend& backend, const Tensor& projected, const Tensor& teacher, double weight, double grad_scale,
                   Tensor* diff_projected, Tensor& scratch);

/// The oracle on row-major doubles: n samples of `features` elements each.
double feature_mse_reference(const std::vector<double>& projected, const std::vector<double>& teacher, int64_t n,
                             int64_t features, std::vector<double>* grad);

}  // namespace lathe
