// Calibration-set selection (random + highest-loss images) and the one statistics pass.
#include "engine/compress/quant/calibration_set.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/core/rng.h"
#include "engine/data/loader.h"
#include "engine/exec/batch_loop.h"

namespace lathe {

namespace {

/// Runs `fn(batch, model output)` over `data` in order, evaluation mode.
template <typename Fn>
void for_each_output(Model& model, Backend& be, const Dataset& data, int64_t batch_size, Fn&& fn) {
  LayerContext ctx{be, false, 0};
  for_each_batch(be, data, batch_size, [&](const Batch& b, DeviceBatch& db) {
    const Tensor& out = model.forward(ctx, db.images);
    be.synchronize();
    fn(b, out);
  });
}

/// The tensor itself when it is on the host, else a host copy made by its backend (a model on a GPU).
Tensor to_host(const Tensor& t, Backend& be) {
  if (t.device().is_cpu())
    return t;
  Tensor h = Tensor::empty(t.shape(), t.dtype(), Device::cpu(), t.format());
  be.copy(t, h);
  return h;
}

}  // namespace

std::vector<double> per_sample_losses(Model& model, Backend& be, const Dataset& data, int64_t batch_size) {
  std::vector<double> losses;
  losses.reserve(data.count);
  for_each_output(model, be, data, batch_size, [&](const Batch& b, const Tensor& out) {
    const Tensor logits = to_host(out, be);
    const int64_t n = logits.dim(0), k = logits.dim(1);
    for (int64_t i = 0; i < n; ++i) {
      double mx = -1e300;
      for (int64_t j = 0; j < k; ++j)
        mx = std::max(mx, logits.get({i, j}));
      double sum = 0;
      for (int64_t j = 0; j < k; ++j)
        sum += std::exp(logits.get({i, j}) - mx);
      const int64_t label = static_cast<int64_t>(b.labels.get({i}));
      losses.push_back(std::log(sum) + mx - logits.get({i, label}));
    }
  });
  return losses;
}

CalibrationSet select_calibration_set(Model& model, Backend& be, const Dataset& train, const CalibrationSetOptions& o) {
  LATHE_CHECK(o.samples >= 1 && o.batch_size >= 1 && o.outlier_fraction >= 0 && o.outlier_fraction <= 1,
              "calibration set: samples and batch_size must be >= 1 and outlier_fraction in [0, 1]");
  LATHE_CHECK(train.count > 0, "calibration set: empty training set");
  const int64_t n = std::min(o.samples, train.count);
  const int64_t outliers = static_cast<int64_t>(std::llround(o.outlier_fraction * static_cast<double>(n)));
  CalibrationSet set;
  std::vector<char> taken(train.count, 0);
  if (outliers > 0) {
    const std::vector<double> loss = per_sample_losses(model, be, train);
    std::vector<int64_t> order(train.count);
    std::iota(order.begin(), order.end(), 0);
    // Highest loss first; ties by index so the choice is deterministic.
    std::partial_sort(order.begin(), order.begin() + outliers, order.end(),
                      [&](int64_t a, int64_t b) { return loss[a] != loss[b] ? loss[a] > loss[b] : a < b; });
    for (int64_t i = 0; i < outliers; ++i) {
      set.indices.push_back(order[i]);
      taken[order[i]] = 1;
    }
    set.outliers = outliers;
    set.outlier_min_loss = loss[order[outliers - 1]];
  }
  // The rest: a seeded Fisher-Yates draw over the images not taken.
  std::vector<int64_t> rest;
  rest.reserve(train.count - outliers);
  for (int64_t i = 0; i < train.count; ++i)
    if (!taken[i])
      rest.push_back(i);
  Rng rng(o.seed ^ 0x9e3779b97f4a7c15ULL);
  const int64_t want = n - outliers;
  for (int64_t i = 0; i < want; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(rest.size() - i));
    std::swap(rest[i], rest[j]);
    set.indices.push_back(rest[i]);
  }
  return set;
}

Dataset gather(const Dataset& data, const std::vector<int64_t>& indices) {
  return select_samples(data, indices, " (calibration subset)");
}

ActivationStats collect_activation_stats(Model& model, Backend& be, const Dataset& images, int64_t batch_size) {
  ActivationStats stats;
  const std::vector<std::string> taps = int8_activation_taps(model);
  for (const std::string& t : taps)
    stats.taps.emplace(t, HistogramObserver());
  // The observers read every tapped activation in f32; a bf16-trained model keeps its setting after.
  struct Restore {
    Model& m;
    bool on;
    ~Restore() { m.set_low_precision_activations(on); }
  } restore{model, model.low_precision_activations()};
  model.set_low_precision_activations(false);
  for_each_output(model, be, images, batch_size, [&](const Batch& b, const Tensor&) {
    for (const std::string& t : taps)
      stats.taps.at(t).observe(t == kInputTap ? b.images : to_host(model.activation(t), be));
    stats.samples += b.labels.dim(0);
  });
  return stats;
}

ActivationParams derive_activation_params(const ActivationStats& stats, CalibrationMethod method, double percentile,
                                          std::map<std::string, CalibrationResult>* results) {
  ActivationParams acts;
  for (const auto& [name, obs] : stats.taps) {
    if (obs.empty())
      continue;
    const CalibrationResult r = calibrate(obs, method, percentile, 8, /*symmetric=*/false);
    acts.emplace(name, r.params());
    if (results)
      results->emplace(name, r);
  }
  return acts;
}

}  // namespace lathe
