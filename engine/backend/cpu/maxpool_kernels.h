// The cpu backend's max pooling for training on channels-last f32 and bf16 activations, when the
// windows do not overlap (kernel == stride, no padding: every pooling of the zoo's conv nets).
// oneDNN 2.6's pooling ran these at 25-40% of the cnn's bf16 training step. Here the forward reads
// each input once, channels innermost (a vector of channels per tap, the taps compared as f32,
// first maximum wins as in the reference and PyTorch, NaN kept where it comes first) and records,
// per output element, the window position of its maximum in one byte (kh * KW + kw); the backward
// writes every input gradient exactly once from those bytes (the output's gradient where the byte
// points, 0 elsewhere and in rows/columns no window covers), with no zero fill and no scatter.
#pragma once

#include "engine/backend/backend.h"

namespace lathe::cpu {

/// True when these kernels take the pooling: host tensors, src/dst (or diff_src/diff_dst) both f32
/// or both bf16, dense channels-last, kernel == stride, no padding, at most 255 taps per window.
bool maxpool_nhwc_applies(const PoolParams& p, const Tensor& src, const Tensor& dst);

/// dst = max over each window of src; index (made u8 with dst's shape, contiguous, when it is not)
/// gets each output element's window position. Call only where maxpool_nhwc_applies.
void maxpool_nhwc_forward(const PoolParams& p, const Tensor& src, Tensor& dst, Tensor& index);

/// True when index looks like maxpool_nhwc_forward's (u8, diff_dst's shape).
bool is_maxpool_nhwc_index(const Tensor& index, const Tensor& diff_dst);

/// diff_src = diff_dst routed to the recorded maxima, 0 elsewhere. Call only where
/// maxpool_nhwc_applies(p, diff_src, diff_dst) and is_maxpool_nhwc_index(index, diff_dst).
void maxpool_nhwc_backward(const PoolParams& p, const Tensor& diff_dst, const Tensor& index, Tensor& diff_src);

}  // namespace lathe::cpu
