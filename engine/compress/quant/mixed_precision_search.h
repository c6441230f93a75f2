// Accuracy-driven mixed precision: keep the most sensitive Linear/Conv2d layers in f32 until the
// INT8 model is within a maximum accuracy drop of the f32 model.
//
//   1. every layer INT8: done if the goal holds;
//   2. sensitivity: each layer alone kept in f32 (one configuration per layer); the accuracy it
//      wins back ranks the layers;
//   3. greedy: keep the top-ranked layers in f32, one more at a time, until the goal holds (or every
//      layer is f32).
// Every configuration tried is a point (accuracy, serialized bytes, measured latency), so the whole
// accuracy/size/latency front is visible. The best point is the smallest one meeting the goal (then
// the faster); when none does, the most accurate one (then the smaller): it is still returned,
// and the caller saves it, with goal_met false.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "engine/compress/quant/int8_model.h"

namespace lathe {

struct MixedPrecisionPoint {
  std::set<std::string> keep_f32;  ///< Linear/Conv2d nodes left in f32
  double accuracy = 0;             ///< fraction in [0, 1], from the evaluator
  int64_t bytes = 0;               ///< Int8Model::serialized_bytes()
  double ms_per_batch = 0;         ///< from the timer
  bool meets_goal = false;
};

struct MixedPrecisionResult {
  std::vector<MixedPrecisionPoint> points;                  ///< in the order they were tried
  std::vector<std::pair<std::string, double>> sensitivity;  ///< layer -> accuracy with it alone in f32
  int best = 0;                                             ///< index into points
  bool goal_met = false;
};

struct MixedPrecisionSearch {
  double f32_accuracy = 0;                         ///< the reference, fraction in [0, 1]
  double max_drop_points = 1.0;                    ///< goal: 100 * (f32_accuracy - accuracy) <= this
  Int8ModelOptions options;                        ///< base options (weights granularity); keep_f32 is set per point
  std::function<double(Int8Model&)> evaluate;      ///< accuracy of a configuration
  std::function<double(Int8Model&)> ms_per_batch;  ///< latency of a configuration
  /// Called after each point (progress, metrics); optional.
  std::function<void(const MixedPrecisionPoint&, int index)> on_point;
};

/// Runs the search on `model` (see the header). Throws ConfigError when the model has no
/// Linear/Conv2d layer, lathe::Error on a missing evaluator or timer.
MixedPrecisionResult search_mixed_precision(Model& model, Backend& be, const ActivationParams& acts,
                                            const MixedPrecisionSearch& search);

/// The Linear/Conv2d node names of `model`, in order.
std::vector<std::string> quantizable_layers(Model& model);

}  // namespace lathe
