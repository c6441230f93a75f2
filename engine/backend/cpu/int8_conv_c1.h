// The cpu backend's INT8 convolution of a single-channel input (a network's first conv on grey
// images) with the 2x2 stride-2 max pooling after it fused in. oneDNN 2.6 runs such a conv at ~3% of
// the int8 peak (its VNNI kernels vectorise over input channels, and there is one) and writes the
// full-size output that the pooling reads back. Here each window's taps, up to 4 per kernel row, are
// one 4-byte word per kernel row of a copy of the image padded with the source zero point, broadcast
// against the weights of 16 output channels at a time (vpdpbusd); the four windows of a pooled pixel
// are pooled as accumulators and only the maximum is requantized, with the arithmetic of
// formats/int8_layer_data.h: the same integers as the reference conv followed by the reference pooling.
// Used through Int8Kernel::fuse_maxpool of the cpu backend's int8 conv.
#pragma once

#include <memory>

#include "engine/backend/compressed_ops.h"

namespace lathe::cpu {

/// True when Int8ConvC1Pool takes this layer and pooling on this CPU: a conv with one input
/// channel, kernel rows of at most 4 taps and at most 8 rows, output channels a multiple of 16, an
/// s8/u8 output with scales >= 0, a 2x2 stride-2 unpadded pooling, and AVX512-VNNI (with oneDNN's
/// effective ISA exact, so DNNL_MAX_CPU_ISA limits hold here too).
bool int8_conv_c1_pool_applies(const Int8LayerData& layer, const ConvParams* conv, const PoolParams& pool);

struct C1Plan;

/// The prepared kernel (weights packed once).
class Int8ConvC1Pool {
 public:
  /// Throws unless int8_conv_c1_pool_applies.
  Int8ConvC1Pool(const Int8LayerData& layer, const ConvParams& conv, const PoolParams& pool);
  ~Int8ConvC1Pool();
  /// src [N, 1, H, W] in the layer's src dtype (any strides); returns the pooled [N, O, OH/2, OW/2]
  /// channels-last in its dst dtype.
  Tensor run(const Tensor& src) const;

 private:
  std::unique_ptr<C1Plan> m_k;
};

}  // namespace lathe::cpu
