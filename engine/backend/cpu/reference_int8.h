// Plain reference INT8 linear and conv2d: integer loops implementing exactly the arithmetic in
// formats/int8_layer_data.h, the oracle for the oneDNN and cuBLASLt INT8 kernels (Backend::make_int8_kernel).
#pragma once

#include "engine/backend/formats/int8_layer_data.h"

namespace lathe {

/// src [N, K] quantized with layer.config.src (its dtype); returns [N, O] in layer.dst_dtype().
Tensor int8_linear_reference(const Int8LayerData& layer, const Tensor& src);

/// src [N, C, H, W] (any layout) quantized with layer.config.src; returns [N, O, OH, OW]
/// channels-last in layer.dst_dtype().
Tensor int8_conv2d_reference(const Int8LayerData& layer, const ConvParams& p, const Tensor& src);

}  // namespace lathe
