// Making an INT8 layer: weight quantization (per output channel, symmetric) and scale folding into
// the Int8LayerData a backend runs (engine/backend/formats/int8_layer_data.h has the arithmetic).
#pragma once

#include "engine/backend/backend.h"
#include "engine/backend/cpu/int8_cpu.h"
#include "engine/backend/formats/int8_layer_data.h"

namespace lathe {

/// Symmetric signed parameters of f32 weights [O, ...] (host, contiguous) at `bits`, one scale per
/// output channel (axis 0); per_channel false: one range for the whole tensor, repeated per channel.
QuantParams int8_weight_params(const Tensor& weights, int bits, bool per_channel);

/// Quantizes f32 weights (per output channel, symmetric, effective_weight_bits(config.weight_bits,
/// config.weight_range)) and folds the scales.
/// weights: [O, K] or [O, C, KH, KW] f32; bias: [O] f32 or nullptr. Throws lathe::Error on
/// per-channel or non-8-bit activation parameters, or weights/bias of the wrong shape or type.
Int8LayerData make_int8_layer(const Tensor& weights, const Tensor* bias, const Int8LayerConfig& config);

}  // namespace lathe
