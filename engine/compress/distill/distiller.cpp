// Distiller: teacher outputs (cached or computed), KD + feature losses, student backward.
#include "engine/compress/distill/distiller.h"

#include <sstream>

#include "engine/core/error.h"

namespace lathe {

std::vector<FeaturePairSpec> parse_feature_pairs(const std::string& text) {
  std::vector<FeaturePairSpec> pairs;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    const auto colon = item.find(':');
    if (item.empty() || colon == std::string::npos || colon == 0 || colon + 1 == item.size() ||
        item.find(':', colon + 1) != std::string::npos)
      throw ConfigError("distill.feature_pairs: '" + item +
                        "' is not a pair; allowed: \"student_node:teacher_node\" items separated by commas, "
                        "e.g. \"1:8\" (graph node names, see lathe-cli validate)");
    pairs.push_back({item.substr(0, colon), item.substr(colon + 1)});
  }
  return pairs;
}

namespace {
Shape node_shape(const Model& m, const std::string& node, const char* who, const std::string& pair) {
  for (const LayerInfo& info : m.layer_infos())
    if (info.name == node)
      return info.output_shape;
  std::string names;
  for (const LayerInfo& info : m.layer_infos())
    names += (names.empty() ? "" : ", ") + info.name;
  throw ConfigError(pair + ": the " + std::string(who) + " has no node '" + node + "'; allowed: " + names);
}
}  // namespace

Distiller::Distiller(Model& student, Model& teacher, const DistillOptions& options, Backend& backend, Rng& rng)
    : m_teacher(teacher), m_opt(options) {
  check_kd_options(m_opt.kd);
  if (!(m_opt.feature_weight >= 0))
    throw ConfigError("distill.feature_weight: must be >= 0");
  for (size_t k = 0; k < m_opt.pairs.size(); ++k) {
    const FeaturePairSpec& p = m_opt.pairs[k];
    const std::string where =
        "distill.feature_pairs[" + std::to_string(k) + "] (" + p.student_node + ":" + p.teacher_node + ")";
    const Shape s = node_shape(student, p.student_node, "student", where);
    const Shape t = node_shape(teacher, p.teacher_node, "teacher", where);
    m_proj.emplace_back(s, t, where);
    m_proj.back().create_params(backend, student.dtype(), rng);
    m_student_nodes.push_back(student.find(p.student_node));
  }
  if (!m_opt.pairs.empty()) {  // the feature pairs read intermediate activations in f32
    student.set_low_precision_activations(false);
    teacher.set_low_precision_activations(false);
  }
  for (NamedParam& p : projection_params())
    m_proj_accum.push_back(backend.zeros(p.param->grad.shape(), p.param->grad.dtype()));
}

std::vector<NamedParam> Distiller::projection_params() {
  std::vector<NamedParam> out;
  for (size_t k = 0; k < m_proj.size(); ++k)
    for (Param* p : m_proj[k].params())
      out.push_back({"distill.proj" + std::to_string(k) + "." + p->name, p});
  return out;
}

std::vector<int64_t> Distiller::cache_record_sizes() const {
  std::vector<int64_t> sizes;
  const auto infos = m_teacher.layer_infos();
  sizes.push_back(shape_numel(infos.back().output_shape));
  for (const FeaturePairSpec& p : m_opt.pairs)
    for (const LayerInfo& info : infos)
      if (info.name == p.teacher_node)
        sizes.push_back(shape_numel(info.output_shape));
  return sizes;
}

std::string Distiller::cache_key_suffix() const {
  std::string key = "taps:";
  for (const FeaturePairSpec& p : m_opt.pairs)
    key += p.teacher_node + ";";
  return key;
}

void Distiller::teacher_outputs(Backend& be, const Tensor& images, const Tensor*& logits,
                                std::vector<const Tensor*>& taps) {
  taps.clear();
  const int64_t b = images.dim(0);
  std::vector<uint64_t> hashes;
  if (m_cache) {
    hashes.resize(b);
    for (int64_t i = 0; i < b; ++i)
      hashes[i] = TeacherCache::hash_image(images, i);
    const std::vector<int64_t> sizes = cache_record_sizes();
    if (m_cached.size() != sizes.size() || m_cached[0].dim(0) != b) {
      m_cached.clear();
      const auto infos = m_teacher.layer_infos();
      Shape ls = infos.back().output_shape;
      ls[0] = b;
      m_cached.push_back(Tensor::empty(ls, DType::f32));
      for (const FeaturePairSpec& p : m_opt.pairs)
        for (const LayerInfo& info : infos)
          if (info.name == p.teacher_node) {
            Shape s = info.output_shape;
            s[0] = b;
            m_cached.push_back(Tensor::empty(s, DType::f32));
          }
    }
    if (m_cache->lookup(hashes, m_cached)) {
      logits = &m_cached[0];
      for (size_t k = 1; k < m_cached.size(); ++k)
        taps.push_back(&m_cached[k]);
      ++m_window.cache_hits;
      return;
    }
  }
  LayerContext eval_ctx{be, false, 0};  // evaluation mode: no dropout, running BatchNorm statistics
  logits = &m_teacher.forward(eval_ctx, images);
  for (const FeaturePairSpec& p : m_opt.pairs)
    taps.push_back(&m_teacher.activation(p.teacher_node));
  if (m_cache) {
    std::vector<const Tensor*> outs{logits};
    outs.insert(outs.end(), taps.begin(), taps.end());
    m_cache->insert(hashes, outs);
  }
}

void Distiller::fill_cache(Backend& be, const Tensor& images) {
  if (!m_cache)
    return;
  const Window window = m_window;
  const Tensor* logits = nullptr;
  std::vector<const Tensor*> taps;
  teacher_outputs(be, images, logits, taps);
  m_window = window;
}

LossResult Distiller::forward_backward(Model& student, LayerContext& ctx, const Tensor& images, const Tensor& labels,
                                       double grad_scale, Tensor& diff_buf) {
  Backend& be = ctx.backend;
  const Tensor* t_logits = nullptr;
  std::vector<const Tensor*> taps;
  teacher_outputs(be, images, t_logits, taps);

  const Tensor& s_logits = student.forward(ctx, images);
  if (!diff_buf.defined() || diff_buf.shape() != s_logits.shape() || diff_buf.dtype() != s_logits.dtype())
    diff_buf = be.empty(s_logits.shape(), s_logits.dtype());
  const KdLossResult kd = kd_loss(s_logits, *t_logits, labels, m_opt.kd, &diff_buf, grad_scale);
  m_window.kd_sum += kd.soft_sum;
  m_window.teacher_correct += kd.teacher_correct;
  m_window.samples += labels.dim(0);
  ++m_window.batches;

  std::vector<std::pair<int, const Tensor*>> extra;
  m_diff_proj.resize(m_proj.size());
  m_diff_act.resize(m_proj.size());
  for (size_t k = 0; k < m_proj.size(); ++k) {
    const Tensor& act = student.activation(m_opt.pairs[k].student_node);
    const Tensor& projected = m_proj[k].forward(ctx, act);
    const bool want_grad = m_opt.feature_weight > 0;
    m_window.feature_sum += feature_mse(be, projected, *taps[k], m_opt.feature_weight, grad_scale,
                                        want_grad ? &m_diff_proj[k] : nullptr, m_scratch);
    if (!want_grad)
      continue;
    Tensor& da = m_diff_act[k];
    if (!da.defined() || da.shape() != act.shape() || da.dtype() != act.dtype() || da.format() != act.format())
      da = be.empty(act.shape(), act.dtype(), act.format());
    m_proj[k].backward(ctx, act, m_diff_proj[k], da);
    extra.push_back({m_student_nodes[k], &da});
  }
  // Projection gradients add up over the micro-batches of one optimizer step.
  auto params = projection_params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (m_opt.feature_weight <= 0)
      break;
    if (m_accum_fresh)
      be.copy(params[i].param->grad, m_proj_accum[i]);
    else
      be.axpy(1.0, params[i].param->grad, m_proj_accum[i]);
  }
  m_accum_fresh = false;
  student.backward(ctx, diff_buf, extra);
  return LossResult{kd.hard_sum, kd.correct};
}

void Distiller::step_projections(Backend& be, Optimizer& optimizer, double lr) {
  auto params = projection_params();
  if (params.empty() || m_accum_fresh)
    return;
  for (size_t i = 0; i < params.size(); ++i)
    std::swap(params[i].param->grad, m_proj_accum[i]);
  optimizer.step(be, params, lr);
  for (size_t i = 0; i < params.size(); ++i)
    std::swap(params[i].param->grad, m_proj_accum[i]);
  m_accum_fresh = true;
}

Distiller::Window Distiller::take_window() {
  Window w = m_window;
  m_window = {};
  return w;
}

}  // namespace lathe
