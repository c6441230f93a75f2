// Shared pieces of the structured-pruning tests: small models (conv -> bn -> relu -> conv, conv ->
// flatten -> linear, residual Adds in conv and flat space) and the oracle: the ORIGINAL model with
// the removed channels zeroed (producer rows, biases and BatchNorm scale/shift set to 0), which must
// compute exactly what the smaller model computes.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/compress/prune/structured.h"
#include "engine/nn/zoo.h"
#include "tests/support/random_tensor.h"

namespace lathe::test {

/// conv -> bn -> relu -> conv -> relu -> maxpool -> flatten -> linear -> relu -> dropout -> linear.
inline std::unique_ptr<Model> conv_bn_model() {
  return build_model_from_layers(nlohmann::json::parse(R"([
    {"type": "conv2d", "name": "c0", "out": 6, "kernel": 3, "padding": 1},
    {"type": "batchnorm2d", "name": "bn0", "eps": 0},
    {"type": "relu", "name": "r0"},
    {"type": "conv2d", "name": "c1", "out": 8, "kernel": 3, "padding": 1},
    {"type": "relu", "name": "r1"},
    {"type": "maxpool2d", "name": "p1", "kernel": 2},
    {"type": "flatten", "name": "f"},
    {"type": "linear", "name": "fc0", "out": 12},
    {"type": "relu", "name": "r2"},
    {"type": "dropout", "name": "d", "p": 0.3},
    {"type": "linear", "name": "fc1", "out": 5}])"),
                                 {3, 8, 8});
}

/// A residual block: c0 -> bn0 -> r0 -> c1 -> bn1 -> r1 -> c2 -> bn2, add(bn2, r0) -> relu -> c3 ...
/// c0 and c2 feed the Add, so they must keep the same channels.
inline std::unique_ptr<Model> residual_conv_model() {
  return build_model_from_layers(nlohmann::json::parse(R"([
    {"type": "conv2d", "name": "c0", "out": 8, "kernel": 3, "padding": 1},
    {"type": "batchnorm2d", "name": "bn0", "eps": 0},
    {"type": "relu", "name": "r0"},
    {"type": "conv2d", "name": "c1", "out": 8, "kernel": 3, "padding": 1},
    {"type": "batchnorm2d", "name": "bn1", "eps": 0},
    {"type": "relu", "name": "r1"},
    {"type": "conv2d", "name": "c2", "out": 8, "kernel": 3, "padding": 1},
    {"type": "batchnorm2d", "name": "bn2", "eps": 0},
    {"type": "add", "name": "sum", "inputs": ["bn2", "r0"]},
    {"type": "relu", "name": "r2"},
    {"type": "conv2d", "name": "c3", "out": 6, "kernel": 1},
    {"type": "relu", "name": "r3"},
    {"type": "maxpool2d", "name": "p", "kernel": 2},
    {"type": "flatten", "name": "f"},
    {"type": "linear", "name": "fc", "out": 5}])"),
                                 {2, 6, 6});
}

/// A residual connection between Linear layers: add(l1, r0).
inline std::unique_ptr<Model> residual_linear_model() {
  return build_model_from_layers(nlohmann::json::parse(R"([
    {"type": "linear", "name": "l0", "out": 16},
    {"type": "relu", "name": "r0"},
    {"type": "linear", "name": "l1", "out": 16},
    {"type": "add", "name": "sum", "inputs": ["l1", "r0"]},
    {"type": "relu", "name": "r1"},
    {"type": "linear", "name": "l2", "out": 4}])"),
                                 {10});
}

/// Parameters from `seed`; BatchNorm running statistics, scale and shift random too (so a BatchNorm
/// that kept the wrong channels would show).
inline void init_model(Model& m, Backend& be, DType dt, uint64_t seed) {
  Rng rng(seed);
  m.create_params(be, dt, rng);
  Rng extra(seed + 1000);
  for (size_t i = 0; i < m.size(); ++i) {
    if (m.layer(i).kind() != "batchnorm2d")
      continue;
    for (Param* p : m.layer(i).params()) {
      Tensor h = random_tensor(p->value.shape(), extra, dt, MemoryFormat::contiguous, p->name == "weight" ? 0.5 : -0.5,
                               p->name == "weight" ? 1.5 : 0.5);
      be.copy(h, p->value);
    }
    for (Buffer* b : m.layer(i).buffers()) {
      if (b->name == "num_batches_tracked")
        continue;
      const bool var = b->name == "running_var";
      Tensor h = random_tensor(b->value.shape(), extra, dt, MemoryFormat::contiguous, var ? 0.5 : -0.3, var ? 2 : 0.3);
      be.copy(h, b->value);
    }
  }
}

/// Every parameter, statistic and input a small dyadic rational (k / 16, |k| <= 4; BatchNorm
/// variances 1/4, 1 or 4 with eps 0), so that every product and partial sum of a forward pass is
/// exact in f64 and the result does not depend on summation order or FMA contraction: then the
/// pruned model and the zeroed oracle must agree bit for bit on any CPU.
inline double dyadic(Rng& rng, int max_k = 4) { return std::floor(rng.uniform(-max_k, max_k + 1)) / 16.0; }
inline void init_model_dyadic(Model& m, Backend& be, uint64_t seed) {
  Rng rng(seed);
  m.create_params(be, DType::f64, rng);
  for (size_t i = 0; i < m.size(); ++i) {
    const bool bn = m.layer(i).kind() == "batchnorm2d";
    for (Param* p : m.layer(i).params()) {
      Tensor h = Tensor::empty(p->value.shape(), DType::f64);
      for (int64_t k = 0; k < h.numel(); ++k)
        h.set_flat(k, bn && p->name == "weight" ? std::ldexp(1.0, static_cast<int>(std::floor(rng.uniform(-1, 2))))
                                                : dyadic(rng));
      be.copy(h, p->value);
    }
    for (Buffer* b : m.layer(i).buffers()) {
      if (b->name == "num_batches_tracked")
        continue;
      Tensor h = Tensor::empty(b->value.shape(), DType::f64);
      for (int64_t k = 0; k < h.numel(); ++k)
        h.set_flat(k, b->name == "running_var" ? std::ldexp(1.0, 2 * static_cast<int>(std::floor(rng.uniform(-1, 2))))
                                               : dyadic(rng));
      be.copy(h, b->value);
    }
  }
}
inline Tensor dyadic_input(const Shape& shape, Rng& rng) {
  Tensor t = Tensor::empty(shape, DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_flat(i, dyadic(rng, 15));
  return t;
}

/// The oracle: zeros, in `m` itself, every channel that `plan` removes.
inline void zero_removed_channels(Model& m, Backend& be, const StructuredPlan& plan) {
  for (size_t g = 0; g < plan.graph.groups.size(); ++g) {
    const ChannelGroup& grp = plan.graph.groups[g];
    const std::set<int64_t> kept(plan.kept[g].begin(), plan.kept[g].end());
    std::vector<int> nodes = grp.producers;
    nodes.insert(nodes.end(), grp.batchnorms.begin(), grp.batchnorms.end());
    for (int node : nodes)
      for (Param* p : m.layer(node).params()) {  // weight rows and bias entries (BatchNorm: scale, shift)
        Tensor h = Tensor::empty(p->value.shape(), p->value.dtype());
        be.copy(p->value, h);
        const int64_t rows = h.dim(0), len = h.numel() / rows;
        for (int64_t r = 0; r < rows; ++r)
          if (!kept.count(r))
            for (int64_t k = 0; k < len; ++k)
              h.set_flat(r * len + k, 0.0);
        be.copy(h, p->value);
      }
  }
}

inline Tensor eval_forward(Model& m, Backend& be, const Tensor& input) {
  LayerContext ctx{be, false, 0};
  const Tensor& out = m.forward(ctx, input);
  Tensor host = Tensor::empty(out.shape(), out.dtype());
  be.copy(out, host);
  return host;
}

/// Output channels of a named Linear/Conv2d (its weight's first dimension).
inline int64_t out_channels(Model& m, const std::string& node) {
  return m.layer(m.find(node)).params().at(0)->value.dim(0);
}
inline int64_t in_channels(Model& m, const std::string& node) {
  return m.layer(m.find(node)).params().at(0)->value.dim(1);
}

}  // namespace lathe::test
