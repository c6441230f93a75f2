// The cpu backend's bf16 convolution of a single-channel input (a network's first conv on grey
// images) for mixed-precision training: the forward and the weight gradient. oneDNN 2.6 runs both at
// ~2% of the bf16 peak (its kernels vectorise over input channels, and there is one): together they
// were a fifth of the cnn's bf16 training step. Here the output channels are the vector (16 f32
// lanes per block): the forward broadcasts each tap of a padded f32 copy of the image against the
// tap's weights of 16 channels, adds the bias, applies the fused ReLU and rounds to bf16 (or keeps
// f32); the weight gradient sums x[tap] * dy[channels] over every output pixel in f32, the bias
// gradient sums dy, per thread over whole images, then the threads' sums are added in thread order.
// The same sums as the reference (bf16 operands widened exactly, f32 accumulation) up to the order
// of the additions. The data gradient is never needed (the input is the model's).
#pragma once

#include "engine/backend/backend.h"

namespace lathe::cpu {

/// True when these kernels take the conv on this CPU: src [N, 1, H, W] bf16 dense, weights
/// [O, 1, 3, 3] bf16 dense with O a multiple of 16, any stride/padding, the output
/// (dst or diff_dst) dense channels-last, and AVX512-BF16. f32 operands stay with oneDNN.
bool bf16_conv_c1_applies(const ConvParams& p, const Tensor& src, const Tensor& weights_or_grad, const Tensor& out);

/// dst = conv(src, weights) + bias, ReLU where post says; dst bf16 or f32, bias f32 or null.
void bf16_conv_c1_forward(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                          Tensor& dst, PostOp post);

/// diff_weights [O, 1, 3, 3] f32 (dense) and diff_bias [O] f32 (or null) from src and diff_dst (bf16).
void bf16_conv_c1_backward_weights(const ConvParams& p, const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                                   Tensor* diff_bias);

}  // namespace lathe::cpu
