// A model graph resized to a set of saved weights: every Linear, Conv2d and BatchNorm2d takes its
// channel counts from the tensors named after it, so a structurally pruned run's weights file (its
// layers narrower than the config says) loads into the graph its config describes. Node names,
// inputs and every other setting are kept.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/nn/model.h"

namespace lathe {

/// A new Model (no params yet) like `model`, sized to `tensors` ("<node>.weight" of each Linear,
/// Conv2d and BatchNorm2d). DataError naming `source` and the node when a weight is missing or its
/// rank or kernel differs; shape mismatches downstream fail as ConfigError from Model::add.
std::unique_ptr<Model> resize_to_weights(Model& model, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                         const std::string& source);

}  // namespace lathe
