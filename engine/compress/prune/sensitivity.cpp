// Sensitivity curves and the per-layer ratio pick.
#include "engine/compress/prune/sensitivity.h"

#include <algorithm>
#include <set>

namespace lathe {

namespace {

std::string layer_of(const std::string& param) { return param.substr(0, param.rfind('.')); }

/// Every prunable layer except `keep`, as an exclusion list for magnitude_masks.
std::vector<std::string> all_but(Model& model, const std::string& keep) {
  std::vector<std::string> out;
  for (const NamedParam& np : prunable_weights(model))
    if (layer_of(np.name) != keep)
      out.push_back(layer_of(np.name));
  return out;
}

}  // namespace

std::vector<SensitivityCurve> sensitivity_analysis(Model& model, const std::vector<double>& ratios,
                                                   const std::vector<std::string>& exclude,
                                                   const std::function<double()>& accuracy) {
  const std::set<std::string> skip(exclude.begin(), exclude.end());
  std::vector<SensitivityCurve> curves;
  for (const NamedParam& np : prunable_weights(model)) {
    const std::string layer = layer_of(np.name);
    if (skip.count(layer) || skip.count(np.name))
      continue;
    LATHE_CHECK(np.param->value.device().is_cpu(), "sensitivity analysis: ", np.name, " is not a host tensor");
    const Tensor saved = np.param->value.contiguous_copy();
    SensitivityCurve c{layer, np.param->value.numel(), {}, {}};
    for (double r : ratios) {
      apply_masks(model, magnitude_masks(model, r, /*global=*/false, all_but(model, layer)));
      c.ratios.push_back(r);
      c.accuracy.push_back(accuracy());
      saved.copy_to(np.param->value);
    }
    curves.push_back(std::move(c));
  }
  return curves;
}

std::map<std::string, double> pick_layer_ratios(const std::vector<SensitivityCurve>& curves, double baseline,
                                                double target) {
  LATHE_CHECK(target >= 0 && target < 1, "pick_layer_ratios: target ", target, " outside [0, 1)");
  int64_t total = 0;
  for (const auto& c : curves)
    total += c.weights;
  auto ratios_at = [&](double tolerance) {
    std::map<std::string, double> r;
    for (const auto& c : curves) {
      double best = 0;
      for (size_t i = 0; i < c.ratios.size(); ++i)
        if (baseline - c.accuracy[i] <= tolerance)
          best = std::max(best, c.ratios[i]);
      r[c.layer] = best;
    }
    return r;
  };
  auto overall = [&](const std::map<std::string, double>& r) {
    double pruned = 0;
    for (const auto& c : curves)
      pruned += r.at(c.layer) * c.weights;
    return total ? pruned / total : 0.0;
  };
  std::vector<double> tolerances = {0.0};
  for (const auto& c : curves)
    for (double a : c.accuracy)
      tolerances.push_back(std::max(0.0, baseline - a));
  std::sort(tolerances.begin(), tolerances.end());
  std::map<std::string, double> pick = ratios_at(tolerances.back());
  for (double t : tolerances) {
    auto r = ratios_at(t);
    if (overall(r) >= target) {
      pick = r;
      break;
    }
  }
  const double reached = overall(pick);
  if (reached <= 0)  // nothing can be pruned within the curves: spread the target evenly
    for (auto& [_, v] : pick)
      v = target;
  else
    for (auto& [_, v] : pick)
      v = std::min(1.0, v * target / reached);
  return pick;
}

std::vector<PruneMask> layerwise_magnitude_masks(Model& model, const std::map<std::string, double>& ratio_by_layer) {
  std::vector<PruneMask> out;
  for (const auto& [layer, ratio] : ratio_by_layer) {
    std::vector<PruneMask> m = magnitude_masks(model, ratio, /*global=*/false, all_but(model, layer));
    out.insert(out.end(), std::make_move_iterator(m.begin()), std::make_move_iterator(m.end()));
  }
  return out;
}

}  // namespace lathe
