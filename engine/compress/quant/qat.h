// Quantization-aware training support: puts fake quantization (fake_quant.h) on the Linear/Conv2d
// layers of a Model exactly where an Int8Model plan quantizes them (each layer's input with the
// parameters the executor will quantize it with, the weights per channel at the executor's weight
// bits), and takes it off again. The training itself is an ordinary phase (engine/run/pipeline.h).
#pragma once

#include "engine/compress/quant/int8_model.h"

namespace lathe {

/// Attaches a FakeQuantOperands to every INT8 layer of `plan` (built on `model`); returns how many.
/// Throws lathe::Error when a planned node is not a layer that takes a transform.
int attach_fake_quant(Model& model, const Int8Model& plan);
/// Removes every operand transform from `model`'s layers.
void detach_fake_quant(Model& model);

}  // namespace lathe
