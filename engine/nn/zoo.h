// The reference models by name (DESIGN.md) and models from a JSON layer list.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/nn/model.h"

namespace lathe {

/// "mlp", "cnn", "teacher", "student": the same layers as the nn.Sequential in bench/peers/torch_train.py,
/// for 1 x 28 x 28 images and 10 classes.
std::unique_ptr<Model> build_zoo_model(const std::string& name);
/// The same models for `input` = {C, H, W} images and `num_classes` outputs: the first layer takes
/// C channels (mlp, student: C*H*W features) and the cnn's / teacher's first linear layer
/// c2 * (H/4) * (W/4) features (two 2x2 pools, rounding down). ConfigError naming model.zoo when
/// the shape cannot be taken (cnn, teacher: H or W below 4).
std::unique_ptr<Model> build_zoo_model(const std::string& name, const Shape& input, int num_classes);
std::vector<std::string> zoo_model_names();

/// A model from a layer list such as
///   [{"type": "conv2d", "out": 16, "kernel": 3, "padding": 1}, {"type": "relu"}, {"type": "flatten"},
///    {"type": "linear", "out": 10}]
/// Input sizes are inferred. Keys per type: linear {out, bias}; conv2d {out, kernel, stride, padding,
/// bias}; maxpool2d {kernel, stride, padding}; batchnorm2d {eps, momentum}; dropout {p}; relu; flatten;
/// add {inputs: [a, b]}. Every layer may have "name" (default: its index) and "input" (default: the
/// previous layer). Errors name the layer's position (model.layers[i]) and the allowed keys.
std::unique_ptr<Model> build_model_from_layers(const nlohmann::json& layers, const Shape& input_shape);
/// ConfigError unless the model ends in one flat score vector with at least `num_classes` entries.
void check_model_outputs(const Model& model, int num_classes);

}  // namespace lathe
