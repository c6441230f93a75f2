// Small pieces the INT8 planners (int8_model.cpp's chain plan, int8_graph_plan.cpp's graph plan) and
// the QDQ export (engine/run/int8_onnx.cpp) share: step-text words, a host copy of a parameter, and
// the column order of a linear layer after a channels-last flatten.
#pragma once

#include <string>

#include "engine/backend/backend.h"
#include "engine/backend/formats/quant_params.h"

namespace lathe {

/// "s8" or "u8": a quantized value's storage word in step texts.
inline const char* int8_dtype_word(const QuantParams& q) { return q.is_signed ? "s8" : "u8"; }

/// A layer kind the INT8 plans quantize (conv2d, linear).
inline bool is_int8_compute_kind(const std::string& kind) { return kind == "conv2d" || kind == "linear"; }

/// A host copy of a parameter; a device parameter (a model trained on a GPU) comes down through its
/// backend, so an INT8 plan can be made on the host from a model on any device.
Tensor int8_host_copy(const Tensor& t, Backend& be);

/// Linear weights [O, C*H*W] (f32 or s8) with their columns reordered between the (C, H, W) order of
/// an NCHW flatten and the (H, W, C) order of a channels-last flatten: to_hwc true goes C,H,W ->
/// H,W,C (the INT8 executor's order), false back. Throws when the columns do not flatten [C, H, W].
Tensor permute_flat_columns(const Tensor& w, const Shape& chw, bool to_hwc);

}  // namespace lathe
