// Int8LayerData: one INT8 layer (linear or conv2d) as a backend runs it: the quantized weights and
// folded scales compress/quant/int8_layer.h makes, and the integer arithmetic every backend's s8/u8
// linear and conv2d (Backend::make_int8_kernel) implements: the reference backend's plain loops are
// the oracle of oneDNN's (cpu) and cuBLASLt's (cuda).
//
// Per output element, with src quantized per tensor (scale s_x, zero point z_x, u8 or s8) and
// weights s8 per output channel, symmetric (scale s_w[o], zero point 0):
//   acc = sum (q_x - z_x) * q_w                     int32; padding contributes 0 (real zero)
//   y   = output_scale[o] * (float(acc) + bias_acc[o])     f32, in this order (oneDNN 2.x order:
//                                                           bias is added in accumulator units)
//   y   = max(y, 0)                                  when the post-op is ReLU
//   dst = y                                          f32 output (the last layer), or
//   dst = saturate(nearbyint(y + z_y))               s8/u8 output, round half to even
// where bias_acc[o] = b[o] / (s_x s_w[o]) and output_scale[o] = s_x s_w[o] / s_y (s_x s_w[o] for
// f32 output), both computed once in double and stored as f32, the exact values handed to oneDNN.
#pragma once

#include <optional>
#include <vector>

#include "engine/backend/formats/quant_params.h"
#include "engine/backend/op_params.h"

namespace lathe {

/// How INT8 layers choose their weight range (see backend/cpu/int8_cpu.h).
enum class Int8WeightRange {
  auto_for_cpu,  // reduced on CPUs whose int8 dot product saturates, full where it is exact
  full,          // always the requested bits (results may saturate on CPUs without VNNI)
  reduced,       // always at most 7 bits
};

struct Int8LayerConfig {
  QuantParams src;                 // per tensor; u8 (e.g. after ReLU) or s8; a zero point is allowed
  std::optional<QuantParams> dst;  // per tensor; nullopt: f32 output (the last layer)
  PostOp post = PostOp::none;      // fused ReLU, applied before the dst zero point
  int weight_bits = 8;             // requested bits of the per-output-channel symmetric s8 weights
  /// auto: 7-bit weights on CPUs whose int8 dot product saturates (int8_cpu.h), else weight_bits.
  Int8WeightRange weight_range = Int8WeightRange::auto_for_cpu;
  /// false: one weight scale for the whole tensor (stored per channel, all equal).
  bool per_channel_weights = true;
};

struct Int8LayerData {
  Int8LayerConfig config;
  Tensor weights_q;                  // s8, contiguous PyTorch layout ([O, K] or [O, C, KH, KW])
  QuantParams weights;               // per channel along axis 0, symmetric; .bits = the bits used
  std::vector<float> bias_acc;       // [O], zeros when the layer has no bias
  std::vector<float> output_scales;  // [O]
  bool has_bias = false;

  int64_t out_channels() const { return weights_q.dim(0); }
  DType src_dtype() const { return config.src.storage_dtype(); }
  DType dst_dtype() const { return config.dst ? config.dst->storage_dtype() : DType::f32; }
};

}  // namespace lathe
