// Distiller: one distillation training step for a student against a fixed teacher. The teacher runs
// once per batch in evaluation mode (no gradients, no dropout, running BatchNorm statistics) on the
// same images as the student; the student's gradient is that of
//   alpha * T^2 * KL(p_t || p_s) + (1 - alpha) * CE(s, y) + feature_weight * sum_pairs MSE(proj(a_s), a_t)
// (kd_loss.h, feature_loss.h). Feature gradients enter the student graph at the tapped nodes
// (Model::backward with extra gradients). Projection parameters are trained here with their own
// optimizer of the student's type and learning rate, and are not part of the student model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/compress/distill/feature_loss.h"
#include "engine/compress/distill/kd_loss.h"
#include "engine/compress/distill/teacher_cache.h"
#include "engine/nn/model.h"
#include "engine/nn/optimizer.h"

namespace lathe {

struct FeaturePairSpec {
  std::string student_node, teacher_node;
};

/// "s1:t1,s2:t2" -> pairs; "" -> none. Throws ConfigError naming distill.feature_pairs.
std::vector<FeaturePairSpec> parse_feature_pairs(const std::string& text);

struct DistillOptions {
  KdLossOptions kd;
  double feature_weight = 0.3;
  std::vector<FeaturePairSpec> pairs;
};

class Distiller {
 public:
  /// `teacher` must have its weights; `student` its params (shapes are read from both). Builds the
  /// projections (ConfigError for unknown or fused nodes and for shapes no projection maps).
  Distiller(Model& student, Model& teacher, const DistillOptions& options, Backend& backend, Rng& rng);

  /// Teacher forward (or cache lookup), student forward, the losses, student backward. Parameter
  /// gradients of the student (and of the projections, accumulated until step_projections) become
  /// grad_scale * d(loss sum)/d(param). Returns the hard-label CE sum and correct count.
  LossResult forward_backward(Model& student, LayerContext& ctx, const Tensor& images, const Tensor& labels,
                              double grad_scale, Tensor& diff_buf);

  /// One optimizer update of the projections from their accumulated gradients.
  void step_projections(Backend& backend, Optimizer& optimizer, double lr);
  std::vector<NamedParam> projection_params();

  /// Uses (and fills) `cache` for the teacher's outputs; nullptr = run the teacher on every batch.
  void set_cache(TeacherCache* cache) { m_cache = cache; }
  /// Per-sample element counts of what the cache stores (logits, then each pair's teacher tap).
  std::vector<int64_t> cache_record_sizes() const;
  std::string cache_key_suffix() const;
  /// Puts the teacher's outputs for `images` (a batch on the backend's device) in the cache as
  /// forward_backward does on a miss, and nothing when all are cached; counts nothing in the
  /// window. A resumed run replays the batches the interrupted one had cached (stage_distill.cpp).
  void fill_cache(Backend& be, const Tensor& images);

  /// Sums since the last take_window(): soft (T^2 KL) and feature (unweighted MSE) losses, samples.
  struct Window {
    double kd_sum = 0, feature_sum = 0;
    int64_t samples = 0, teacher_correct = 0, cache_hits = 0, batches = 0;
  };
  Window take_window();
  const std::vector<FeatureProjection>& projections() const { return m_proj; }

 private:
  void teacher_outputs(Backend& be, const Tensor& images, const Tensor*& logits, std::vector<const Tensor*>& taps);

  Model& m_teacher;
  DistillOptions m_opt;
  std::vector<FeatureProjection> m_proj;
  std::vector<int> m_student_nodes;
  TeacherCache* m_cache = nullptr;
  std::vector<Tensor> m_cached;  // host buffers the cache fills: logits, then taps
  std::vector<Tensor> m_diff_proj, m_diff_act, m_proj_accum;
  Tensor m_scratch;
  bool m_accum_fresh = true;
  Window m_window;
};

}  // namespace lathe
