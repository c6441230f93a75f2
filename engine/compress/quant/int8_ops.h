// Int8Linear and Int8Conv2d: real INT8 inference on the CPU through oneDNN 2.x int8 primitives
// (matmul and convolution), s8 weights x u8/s8 activations -> s32 accumulation -> requantized to
// s8/u8 (or f32 for the last layer) with per-output-channel output scales, fused bias and ReLU.
// The arithmetic is int8_layer.h's; int8_reference.h implements the same in plain loops.
//
// oneDNN 2.x attributes used: set_output_scales(mask 1 << 1, s_x s_w[o] / s_y), runtime zero points
// for src and dst (only when non-zero), an eltwise ReLU post-op; bias passed in f32 accumulator
// units. Weights are reordered once per primitive into the layout oneDNN picks (format `any`,
// which carries the s8-src compensation). Conv activations are channels-last (NHWC), what the
// x86 int8 kernels run on without reorders. Primitives are cached per input shape.
// CPUs without VNNI: the weights are 7-bit (int8_cpu.h) so oneDNN's s16 pair sums cannot saturate,
// and where a convolution asks to halve s8 weights (s8 src, "scale_adjust" 0.5) it is handed 2 q_w
// with compensating power-of-two scales, so the results stay bit-exact with the reference.
#pragma once

#include <memory>
#include <string>

#include "engine/compress/quant/int8_layer.h"

namespace lathe {

class Int8Linear {
 public:
  /// weights [O, K] f32, bias [O] f32 or nullptr.
  Int8Linear(const Tensor& weights, const Tensor* bias, const Int8LayerConfig& config);
  ~Int8Linear();
  Int8Linear(Int8Linear&&) noexcept;
  Int8Linear& operator=(Int8Linear&&) noexcept;

  /// src [N, K] (any strides) in src_params().storage_dtype(), quantized with src_params();
  /// returns [N, O] contiguous in dst_dtype().
  Tensor forward(const Tensor& src);
  /// The same arithmetic in plain integer loops (int8_linear_reference).
  Tensor forward_reference(const Tensor& src) const;

  const QuantParams& src_params() const { return m_layer.config.src; }
  DType dst_dtype() const { return m_layer.dst_dtype(); }
  const Int8LayerData& layer() const { return m_layer; }
  /// oneDNN's implementation name of the last primitive run (e.g. "brg:avx512_core_vnni").
  std::string implementation() const;

 private:
  struct Impl;
  Int8LayerData m_layer;
  std::unique_ptr<Impl> m_impl;
};

class Int8Conv2d {
 public:
  /// weights [O, C, KH, KW] f32, bias [O] f32 or nullptr.
  Int8Conv2d(const ConvParams& p, const Tensor& weights, const Tensor* bias, const Int8LayerConfig& config);
  ~Int8Conv2d();
  Int8Conv2d(Int8Conv2d&&) noexcept;
  Int8Conv2d& operator=(Int8Conv2d&&) noexcept;

  /// src [N, C, H, W] channels-last in src_params().storage_dtype() (quantize() of a channels-last
  /// f32 tensor keeps the layout); returns [N, O, OH, OW] channels-last in dst_dtype(). Other
  /// layouts are rejected, not silently reordered.
  Tensor forward(const Tensor& src);
  /// The same arithmetic in plain integer loops (int8_conv2d_reference); any src layout.
  Tensor forward_reference(const Tensor& src) const;

  const ConvParams& conv_params() const { return m_params; }
  const QuantParams& src_params() const { return m_layer.config.src; }
  DType dst_dtype() const { return m_layer.dst_dtype(); }
  const Int8LayerData& layer() const { return m_layer; }
  /// oneDNN's implementation name of the last primitive run (e.g. "jit_int8:avx512_core_vnni").
  std::string implementation() const;

 private:
  struct Impl;
  ConvParams m_params;
  Int8LayerData m_layer;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace lathe
