// The distillation stage: when distill.teacher is set, the main training phase trains the student
// against a teacher (engine/compress/distill) instead of the labels alone. prepare_distill_stage
// runs from the stage's prepare() (a bad teacher, feature pair or backend fails before anything is
// written); attach_distill_stage from its attach(), before the main training: it trains a zoo
// teacher first (its metrics under teacher/*; a resumed run takes the trained teacher's weights
// from its checkpoint instead), measures the teacher's test accuracy (distill/teacher_accuracy),
// makes the student's augmentation distill.student_augment_factor times stronger (the teacher
// sees the same, more strongly augmented images: one loader feeds both) and replaces the training
// step through TrainHooks. Metrics: distill/kd_loss (T^2 KL per sample), distill/feature_loss (MSE per sample,
// before feature_weight), distill/teacher_accuracy.
#pragma once

#include <memory>
#include <string>

#include "engine/compress/distill/distiller.h"
#include "engine/compress/distill/teacher_cache.h"
#include "engine/compress/distill/teacher_source.h"
#include "engine/run/pipeline.h"

namespace lathe {

class DistillStage {
 public:
  TeacherSpec spec;
  SavedTeacher saved;  ///< for run: and file teachers
  std::string onnx_file, onnx_sha256;   ///< the teacher's graph came from this ONNX file ("" otherwise)
  std::unique_ptr<Model> teacher;
  std::unique_ptr<Distiller> distiller;
  std::unique_ptr<TeacherCache> cache;  ///< null when the teacher runs on every batch
  std::string cache_path;               ///< "" = memory only
  std::string cache_note;               ///< why the cache is used or not, for the run's events
  std::unique_ptr<Optimizer> projection_optimizer;
  LrSchedule schedule;  ///< the student phase's, for the projections
  int64_t first_step = 0;
  bool cache_saved = false;
  /// The cache holds what the interrupted run had cached (refill_teacher_cache), or needs not.
  bool cache_refilled = false;
  /// A zoo teacher's weights came from the checkpoint a resumed run continues from: attach does
  /// not train it again.
  bool teacher_restored = false;
  /// A zoo teacher is trained (or restored): checkpoints carry its weights (stage/distill/teacher/*).
  bool teacher_trained = false;
  /// A stop request cut the zoo teacher's training short: attach returned without the student's
  /// setup, and the run ends there (Stage::stopped_in_attach).
  bool teacher_stopped = false;
};

/// The teacher cache's key (teacher_cache.h): the backend and the distiller's taps, the saved
/// weights' sha256 and, when the teacher's graph came from an ONNX file, that file's sha256, so a
/// changed file (or changed weights) is never served another teacher's outputs. "" = not part of it.
std::string teacher_cache_key(const std::string& backend, const std::string& distiller_suffix,
                              const std::string& weights_sha256, const std::string& onnx_sha256);

/// nullptr when distill.teacher is "". Loads a saved teacher (ConfigError / DataError naming
/// distill.teacher otherwise), checks feature pairs against both graphs and the backend.
std::unique_ptr<DistillStage> prepare_distill_stage(const ExperimentConfig& cfg, Backend& backend,
                                                    const TrainTest& data, Model& student, const RunOptions& options);

/// Trains a zoo teacher first (advancing ctx.step; a teacher restored from a resumed run's
/// checkpoint is not trained again, ctx.step advances the same), logs the teacher's accuracy, sets
/// the student's augmentation on `phase` and the distillation hooks on `hooks`. A stop request
/// during the teacher's training returns right after it (stage.teacher_stopped: the run ends).
void attach_distill_stage(DistillStage& stage, StageContext& ctx, TrainPhase& phase, TrainHooks& hooks);

}  // namespace lathe
