// The small CNN the low-rank tests factorize: one conv, two linears, on 1x8x8 inputs with 4 classes.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "engine/nn/zoo.h"

namespace lathe::test {

inline std::unique_ptr<Model> small_cnn() {
  return build_model_from_layers(nlohmann::json::parse(R"([
    {"type": "conv2d", "out": 8, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "maxpool2d", "kernel": 2},
    {"type": "flatten"}, {"type": "linear", "out": 12}, {"type": "relu"}, {"type": "linear", "out": 4}])"),
                                 {1, 8, 8});
}

}  // namespace lathe::test
