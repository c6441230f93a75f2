// Pruning sensitivity analysis: prune one layer alone (magnitude, per layer) at a series of ratios,
// measure accuracy, restore it; and a pick of per-layer ratios from those curves that reaches a
// target overall sparsity while keeping the worst accuracy drop as small as the curves allow.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/compress/prune/mask.h"

namespace lathe {

struct SensitivityCurve {
  std::string layer;  ///< node name, "0"
  int64_t weights = 0;
  std::vector<double> ratios, accuracy;  ///< accuracy[i] with this layer alone pruned at ratios[i]
};

/// For every prunable layer not in `exclude`: prunes it alone at each ratio, calls `accuracy()`,
/// and puts its weights back exactly (host tensors). The model is unchanged afterwards.
std::vector<SensitivityCurve> sensitivity_analysis(Model& model, const std::vector<double>& ratios,
                                                   const std::vector<std::string>& exclude,
                                                   const std::function<double()>& accuracy);

/// Per-layer ratios whose weight-weighted mean over the curves' layers is `target` (in [0, 1)):
/// the smallest accuracy-drop tolerance t (below `baseline`) at which the largest ratio of each
/// layer with drop <= t reaches the target, then scaled down to hit it exactly. When even the
/// largest measured ratios fall short, they are scaled up (capped at 1).
std::map<std::string, double> pick_layer_ratios(const std::vector<SensitivityCurve>& curves, double baseline,
                                                double target);

/// Magnitude masks with a sparsity per layer (node name -> ratio); layers not named get no mask.
std::vector<PruneMask> layerwise_magnitude_masks(Model& model, const std::map<std::string, double>& ratio_by_layer);

}  // namespace lathe
