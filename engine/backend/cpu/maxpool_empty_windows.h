// oneDNN 2.6's max pooling starts each window at the dtype's lowest value (-FLT_MAX for f32) and
// takes a tap only when it is greater, so a window with no tap above -FLT_MAX (every tap -inf, NaN
// or -FLT_MAX) comes out -FLT_MAX (f32) or -inf (bf16) with its argmax on the kernel's position 0,
// where the reference (the oracle) gives the window's first valid tap: -inf for a window of -inf,
// NaN for a window of NaN. This finds those windows after oneDNN ran, in one vector pass over dst
// that compares and writes nothing in the common case, and rewrites each found window by the
// reference's rule: its value in dst and its argmax in oneDNN's workspace (a byte per output
// element, kh * KW + kw over the whole kernel). A NaN that oneDNN passed over in a window with a
// tap above -FLT_MAX stays passed over (the reference keeps a NaN that is the window's first tap):
// finding those would read all of src again.
#pragma once

#include <array>
#include <cstdint>

#include "engine/backend/backend.h"

namespace lathe::cpu {

/// After oneDNN's max pooling forward of host f32/bf16 src into dst: every window whose result is
/// not above -FLT_MAX gets the reference's value and argmax. ws: oneDNN's u8 workspace, the byte of
/// output (n, c, oh, ow) at ws[n * ws_strides[0] + c * ws_strides[1] + oh * ws_strides[2] + ow * ws_strides[3]].
void fix_empty_max_windows(const PoolParams& p, const Tensor& src, Tensor& dst, uint8_t* ws,
                           const std::array<int64_t, 4>& ws_strides);

}  // namespace lathe::cpu
