// The accuracy-driven mixed-precision search (see mixed_precision_search.h).
#include "engine/compress/quant/mixed_precision_search.h"

#include <algorithm>

namespace lathe {

std::vector<std::string> quantizable_layers(Model& model) {
  std::vector<std::string> names;
  for (size_t i = 0; i < model.size(); ++i) {
    const std::string kind = model.layer(i).kind();
    if (kind == "linear" || kind == "conv2d")
      names.push_back(model.node_name(i));
  }
  return names;
}

MixedPrecisionResult search_mixed_precision(Model& model, Backend& be, const ActivationParams& acts,
                                            const MixedPrecisionSearch& search) {
  LATHE_CHECK(search.evaluate && search.ms_per_batch, "mixed-precision search needs an evaluator and a timer");
  const std::vector<std::string> layers = quantizable_layers(model);
  if (layers.empty())
    throw ConfigError("quant.mixed_precision: the model has no linear or conv2d layer to quantize");
  MixedPrecisionResult r;
  auto meets = [&](double acc) { return 100.0 * (search.f32_accuracy - acc) <= search.max_drop_points + 1e-12; };
  auto try_point = [&](const std::set<std::string>& keep) -> const MixedPrecisionPoint& {
    Int8ModelOptions o = search.options;
    o.keep_f32 = keep;
    Int8Model q(model, be, acts, o);
    MixedPrecisionPoint p;
    p.keep_f32 = keep;
    p.accuracy = search.evaluate(q);
    p.bytes = q.serialized_bytes();
    p.ms_per_batch = search.ms_per_batch(q);
    p.meets_goal = meets(p.accuracy);
    r.points.push_back(p);
    if (search.on_point)
      search.on_point(r.points.back(), static_cast<int>(r.points.size()) - 1);
    return r.points.back();
  };

  const MixedPrecisionPoint all_int8 = try_point({});
  if (!all_int8.meets_goal && layers.size() > 0) {
    // Sensitivity: each layer alone in f32.
    std::vector<int> alone;  // point index per layer
    for (const std::string& l : layers) {
      const MixedPrecisionPoint& p = try_point({l});
      r.sensitivity.emplace_back(l, p.accuracy);
      alone.push_back(static_cast<int>(r.points.size()) - 1);
    }
    std::vector<size_t> order(layers.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return r.sensitivity[a].second > r.sensitivity[b].second; });
    // Greedy: the most sensitive first; a single layer was measured already.
    std::set<std::string> keep;
    for (size_t k = 0; k < order.size(); ++k) {
      keep.insert(layers[order[k]]);
      const MixedPrecisionPoint& p = k == 0 ? r.points[alone[order[0]]] : try_point(keep);
      if (p.meets_goal)
        break;
    }
  }

  // The best point: smallest meeting the goal (then faster); else the most accurate (then smaller).
  int best = -1;
  for (int i = 0; i < static_cast<int>(r.points.size()); ++i) {
    const MixedPrecisionPoint& p = r.points[i];
    if (best < 0) {
      best = i;
      continue;
    }
    const MixedPrecisionPoint& b = r.points[best];
    const bool better = p.meets_goal != b.meets_goal ? p.meets_goal
                        : p.meets_goal ? (p.bytes != b.bytes ? p.bytes < b.bytes : p.ms_per_batch < b.ms_per_batch)
                                       : (p.accuracy != b.accuracy ? p.accuracy > b.accuracy : p.bytes < b.bytes);
    if (better)
      best = i;
  }
  r.best = best;
  r.goal_met = r.points[best].meets_goal;
  return r;
}

}  // namespace lathe
