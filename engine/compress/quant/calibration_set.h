// The calibration set and the activation statistics collected over it, once, for every
// calibration method (calibrator.h derives each method's ranges from the same histograms).
//
// The set: `samples` training images, of which `outlier_fraction` are the highest-loss training
// images under the trained model (the hard cases whose activations reach the tails a random
// sample misses) and the rest a seeded random draw from the remaining images.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/compress/quant/calibrator.h"
#include "engine/compress/quant/int8_model.h"
#include "engine/compress/quant/observer.h"
#include "engine/data/dataset.h"

namespace lathe {

struct CalibrationSetOptions {
  int64_t samples = 512;
  int64_t batch_size = 64;
  double outlier_fraction = 0.05;
  uint64_t seed = 0;
};

struct CalibrationSet {
  std::vector<int64_t> indices;  ///< into the training set; the outliers first
  int64_t outliers = 0;          ///< how many of them are highest-loss images
  double outlier_min_loss = 0;   ///< the smallest loss among the outliers (0 when none)
};

/// Per-sample cross-entropy of every image of `data` under `model` (evaluation mode).
std::vector<double> per_sample_losses(Model& model, Backend& be, const Dataset& data, int64_t batch_size = 500);

/// Chooses the calibration images (see the header). Throws lathe::Error on bad options.
CalibrationSet select_calibration_set(Model& model, Backend& be, const Dataset& train,
                                      const CalibrationSetOptions& options);

/// The images of `data` at `indices`, in that order.
Dataset gather(const Dataset& data, const std::vector<int64_t>& indices);

/// One HistogramObserver per tap (int8_activation_taps(model)), filled by evaluation-mode forward
/// passes over `images` in batches: the statistics every calibration method reads.
struct ActivationStats {
  std::map<std::string, HistogramObserver> taps;
  int64_t samples = 0;
};
ActivationStats collect_activation_stats(Model& model, Backend& be, const Dataset& images, int64_t batch_size);

/// Per-tensor 8-bit activation parameters for every tap by `method`: asymmetric u8 (a zero point;
/// 0 for ReLU outputs, whose range starts at 0). Also returns each tap's CalibrationResult.
ActivationParams derive_activation_params(const ActivationStats& stats, CalibrationMethod method,
                                          double percentile = 99.99,
                                          std::map<std::string, CalibrationResult>* results = nullptr);

}  // namespace lathe
