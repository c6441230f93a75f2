// Max pooling and ReLU directly on quantized (s8/u8) activations. Both commute with an affine
// quantizer of positive scale (q = round(x / s) + z is monotone), so they run on the integers and
// keep the input's quantization parameters: max-pool of q is q of max-pool, exactly.
#pragma once

#include <cstdint>

#include "engine/backend/backend.h"

namespace lathe {

/// src: host [N, C, H, W] s8 or u8, channels-last; returns [N, C, OH, OW] channels-last, same dtype.
/// Padding positions are ignored (as -inf would be). Throws lathe::Error on other inputs.
Tensor int8_maxpool2d(const Tensor& src, const PoolParams& p);

/// The same into dst [N, C, OH, OW] channels-last host (shapes checked by the caller: op_contract.h).
void int8_maxpool2d_into(const Tensor& src, const PoolParams& p, Tensor& dst);

/// The cpu backend's int8_maxpool2d: the 2x2 stride-2 unpadded window (every pooling of the zoo's
/// conv nets) as four whole rows of channels maxed at once, no bounds checks, the output written
/// once; any other window goes to int8_maxpool2d_into. The same integers as int8_maxpool2d_into
/// (the reference backend's), which the op-parity test checks.
void int8_maxpool2d_fast_into(const Tensor& src, const PoolParams& p, Tensor& dst);

/// max(q, zero_point) elementwise: ReLU on a quantized tensor (dense host s8/u8), in place.
void int8_relu_inplace(Tensor& t, int32_t zero_point);

}  // namespace lathe
