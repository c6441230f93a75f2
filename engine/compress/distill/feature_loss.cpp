// FeatureProjection (Linear / 1x1 Conv2d / identity) and the feature MSE built from Backend ops.
#include "engine/compress/distill/feature_loss.h"

#include "engine/core/error.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/linear.h"

namespace lathe {

FeatureProjection::FeatureProjection(const Shape& s, const Shape& t, const std::string& pair) {
  if (s.size() != t.size())
    throw ConfigError(pair + ": student activation " + shape_str(s) + " and teacher activation " + shape_str(t) +
                      " differ in rank; allowed: both [N, features] (Linear projection) or both [N, C, H, W] with "
                      "the same H and W (1x1 conv projection); pick a node after a flatten on the 4-D side");
  if (s == t)
    return;  // no projection needed
  if (s.size() == 2) {
    m_layer = std::make_unique<Linear>(s[1], t[1]);
    return;
  }
  if (s.size() == 4 && s[2] == t[2] && s[3] == t[3]) {
    m_layer = std::make_unique<Conv2d>(s[1], t[1], 1);
    return;
  }
  throw ConfigError(pair + ": no linear or 1x1-conv projection maps the student activation " + shape_str(s) +
                    " onto the teacher activation " + shape_str(t) +
                    "; allowed: [N, F] pairs, or [N, C, H, W] pairs with equal H and W");
}

void FeatureProjection::create_params(Backend& backend, DType dtype, Rng& rng) {
  if (m_layer)
    m_layer->create_params(backend, dtype, rng);
}

const Tensor& FeatureProjection::forward(LayerContext& ctx, const Tensor& src) {
  if (!m_layer)
    return src;
  const std::vector<const Tensor*> srcs{&src};
  Shape out = m_layer->output_shape({src.shape()});
  const MemoryFormat fmt = m_layer->output_format(ctx.backend, srcs);
  if (!m_dst.defined() || m_dst.shape() != out || m_dst.dtype() != src.dtype() || m_dst.format() != fmt)
    m_dst = ctx.backend.empty(out, src.dtype(), fmt);
  m_layer->forward(ctx, srcs, m_dst);
  return m_dst;
}

void FeatureProjection::backward(LayerContext& ctx, const Tensor& src, const Tensor& diff_dst, Tensor& diff_src) {
  if (!m_layer) {
    ctx.backend.copy(diff_dst, diff_src);
    return;
  }
  m_layer->backward(ctx, {&src}, m_dst, diff_dst, {&diff_src});
}

double feature_mse(Backend& be, const Tensor& projected, const Tensor& teacher, double weight, double grad_scale,
                   Tensor* diff_projected, Tensor& scratch) {
  LATHE_CHECK(projected.shape() == teacher.shape(), "feature_mse: projected student activation ", projected.describe(),
              " and teacher activation ", teacher.describe(), " differ in shape");
  LATHE_CHECK(projected.dtype() == teacher.dtype(), "feature_mse: dtypes differ: ", projected.describe(), " vs ",
              teacher.describe());
  LATHE_CHECK(projected.ndim() >= 2 && projected.dim(0) > 0, "feature_mse: need [N, ...] activations, got ",
              projected.describe());
  const int64_t features = projected.numel() / projected.dim(0);
  Tensor& d = diff_projected ? *diff_projected : scratch;
  if (!d.defined() || d.shape() != projected.shape() || d.dtype() != projected.dtype() ||
      d.format() != projected.format() || d.device() != be.device())
    d = be.empty(projected.shape(), projected.dtype(), projected.format());
  // d = teacher (in projected's layout) then d = projected - teacher.
  be.copy(teacher, d);
  be.scale(d, -1.0);
  be.axpy(1.0, projected, d);
  const double loss = be.sum_squares(d) / static_cast<double>(features);
  if (diff_projected)
    be.scale(d, 2.0 * weight * grad_scale / static_cast<double>(features));
  return loss;
}

double feature_mse_reference(const std::vector<double>& p, const std::vector<double>& t, int64_t n, int64_t features,
                             std::vector<double>* grad) {
  if (grad)
    grad->assign(n * features, 0.0);
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    double sq = 0;
    for (int64_t k = 0; k < features; ++k) {
      const double e = p[i * features + k] - t[i * features + k];
      sq += e * e;
      if (grad)
        (*grad)[i * features + k] = 2.0 * e / static_cast<double>(features);
    }
    loss += sq / static_cast<double>(features);
  }
  return loss;
}

}  // namespace lathe
