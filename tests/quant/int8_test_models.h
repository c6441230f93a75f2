// Test fixtures shared by the INT8 executor, QDQ export and QAT tests: a small cnn of the zoo's shape,
// a tiny residual graph with BatchNorms (folding and not), random
// image datasets, the loader's view of them and a min-max calibration (the element-mismatch count is in
// tests/support/random_tensor.h).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "engine/compress/quant/calibration_set.h"
#include "engine/compress/quant/int8_model.h"
#include "engine/data/loader.h"
#include "engine/nn/add.h"
#include "engine/nn/batchnorm2d.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/maxpool2d.h"
#include "engine/nn/relu.h"
#include "tests/support/random_tensor.h"

namespace lathe::test {

/// A small cnn of the zoo's shape: conv-relu-pool x2, flatten, linear-relu, (dropout), linear.
inline std::unique_ptr<Model> small_cnn(Backend& be, uint64_t seed, bool dropout = false) {
  auto m = std::make_unique<Model>(Shape{1, 12, 12});
  m->add("0", std::make_unique<Conv2d>(1, 6, 3, 1, 1));
  m->add("1", std::make_unique<ReLU>());
  m->add("2", std::make_unique<MaxPool2d>(2));
  m->add("3", std::make_unique<Conv2d>(6, 8, 3, 1, 1));
  m->add("4", std::make_unique<ReLU>());
  m->add("5", std::make_unique<MaxPool2d>(2));
  m->add("6", std::make_unique<Flatten>());
  m->add("7", std::make_unique<Linear>(8 * 3 * 3, 24));
  m->add("8", std::make_unique<ReLU>());
  if (dropout)
    m->add("d", std::make_unique<Dropout>(0.5, 1));
  m->add("9", std::make_unique<Linear>(24, 10));
  Rng rng(seed);
  m->create_params(be, DType::f32, rng);
  return m;
}

/// Random evaluation-mode statistics and affine parameters for every BatchNorm of `m` (host backends).
inline void randomize_batchnorms(Model& m, uint64_t seed) {
  Rng rng(seed);
  for (const NamedParam& p : m.named_params()) {
    const bool gamma = p.name.ends_with(".weight"), beta = p.name.ends_with(".bias");
    if (m.layer(m.find(p.name.substr(0, p.name.rfind('.')))).kind() != "batchnorm2d")
      continue;
    for (int64_t i = 0; i < p.param->value.numel(); ++i)
      p.param->value.set_flat(i, gamma ? rng.uniform(0.5, 1.5) : beta ? rng.uniform(-0.3, 0.3) : 0.0);
  }
  for (const NamedBuffer& b : m.named_buffers()) {
    if (b.buffer->value.dtype() != DType::f32)
      continue;
    const bool var = b.name.ends_with("running_var");
    for (int64_t i = 0; i < b.buffer->value.numel(); ++i)
      b.buffer->value.set_flat(i, var ? rng.uniform(0.3, 2.0) : rng.uniform(-0.3, 0.3));
  }
}

/// stem conv -> {bn1 -> relu -> c1 -> bn2 (foldable) -> relu -> c2, stem} -> add -> bn -> relu -> pool
/// -> flatten -> fc: a pre-activation block as torch exports it, BatchNorms that fold and that do not.
inline std::unique_ptr<Model> residual_graph(Backend& be, uint64_t seed) {
  auto m = std::make_unique<Model>(Shape{1, 8, 8});
  m->add("stem", std::make_unique<Conv2d>(1, 4, 3, 1, 1));
  m->add("bn1", std::make_unique<BatchNorm2d>(4));
  m->add("r1", std::make_unique<ReLU>());
  m->add("c1", std::make_unique<Conv2d>(4, 4, 3, 1, 1));
  m->add("bn2", std::make_unique<BatchNorm2d>(4));
  m->add("r2", std::make_unique<ReLU>());
  m->add("c2", std::make_unique<Conv2d>(4, 4, 3, 1, 1));
  m->add("add", std::make_unique<Add>(), {"stem", "c2"});
  m->add("bn", std::make_unique<BatchNorm2d>(4));
  m->add("r3", std::make_unique<ReLU>());
  m->add("pool", std::make_unique<MaxPool2d>(2));
  m->add("flat", std::make_unique<Flatten>());
  m->add("fc", std::make_unique<Linear>(4 * 4 * 4, 10));
  Rng rng(seed);
  m->create_params(be, DType::f32, rng);
  randomize_batchnorms(*m, seed + 1);
  return m;
}

inline Dataset random_images(int64_t n, int64_t side, uint64_t seed) {
  Dataset d;
  d.count = n;
  d.rows = d.cols = side;
  d.num_classes = 10;
  Rng rng(seed);
  d.images.resize(n * side * side);
  for (auto& p : d.images)
    p = static_cast<uint8_t>(rng.below(256));
  for (int64_t i = 0; i < n; ++i)
    d.labels.push_back(static_cast<int32_t>(rng.below(10)));
  return d;
}

/// The images of a dataset as the loader gives them (normalised f32 [N, 1, H, W]).
inline Tensor images_of(const Dataset& d) {
  LoaderOptions lo;
  lo.batch_size = d.count;
  lo.shuffle = false;
  DataLoader loader(d, lo);
  loader.start_epoch(0);
  Batch b;
  EXPECT_TRUE(loader.next(b));
  return b.images;
}

inline ActivationParams calibrate_minmax(Model& m, Backend& be, const Dataset& d) {
  return derive_activation_params(collect_activation_stats(m, be, d, 16), CalibrationMethod::minmax);
}

}  // namespace lathe::test
