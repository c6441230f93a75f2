// A host (CPU) copy of a model the INT8 executor covers (a chain of conv2d, linear, relu, maxpool2d,
// flatten, dropout), with the same node names, settings and weights. The quantize stage runs the
// INT8 parts the GPU executor does not cover (dynamic, mixed precision) on the CPU from this copy
// while the experiment's model stays on its GPU.
#pragma once

#include <memory>

#include "engine/nn/model.h"

namespace lathe {

/// A copy of `model` (parameters on `from`'s device) with its parameters on `host` (a CPU backend).
/// Throws ConfigError for a layer kind outside the list above.
std::unique_ptr<Model> int8_host_model(Model& model, Backend& from, Backend& host);

}  // namespace lathe
