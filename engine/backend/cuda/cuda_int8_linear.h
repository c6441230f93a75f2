// CudaInt8Linear: the INT8 linear layer (engine/backend/formats/int8_layer_data.h arithmetic) on an
// NVIDIA GPU: s8 weights x u8/s8 activations -> int32 on cuBLASLt's int8 tensor-core GEMM, then our
// epilogue kernel (zero-point compensation, bias, per-channel output scale, fused ReLU, requantize
// to u8/s8 or f32 out). It takes the layer as the CPU side prepared it (Int8LayerData: the same
// quantized weights and folded scales), so GPU and CPU results are the same integers; the CPU
// reference int8_linear_reference is the oracle (tests/backend/op_parity_test.cpp, the cuda backend).
//
// cuBLASLt's int8 GEMM wants signed operands, K and the row count of A in multiples of 4 and
// 16-byte aligned leading dimensions: activations are packed as s8 (u8 - 128, the shift corrected
// by comp[o] = (128 - z_x) * sum_k w[o, k]), and K and O are padded to multiples of 16 with zeros.
#pragma once

#include <memory>

#include "engine/backend/formats/int8_layer_data.h"

namespace lathe::cuda {

class CudaBackend;

class CudaInt8Linear {
 public:
  /// `layer` from make_int8_layer (host). Uploads the padded weights and the epilogue vectors.
  CudaInt8Linear(CudaBackend& backend, const Int8LayerData& layer);
  ~CudaInt8Linear();
  CudaInt8Linear(const CudaInt8Linear&) = delete;
  CudaInt8Linear& operator=(const CudaInt8Linear&) = delete;

  /// src: device [N, K] in the layer's src dtype (u8 or s8, row-major); returns device [N, O] in the
  /// layer's dst dtype (u8/s8, or f32 for the last layer).
  Tensor forward(const Tensor& src);
  /// The same, writing [N, O] row-major into `dst` (device memory of N * O dst-dtype elements).
  void forward_into(const Tensor& src, void* dst);
  /// The same on raw device rows: `rows` rows of in_features() elements of `src_dtype`, row r at
  /// element r * ld_src of `src` (a channels-last batch read as [N, H*W*C] rows: flatten as a view).
  void forward_rows(const void* src, DType src_dtype, int64_t rows, int64_t ld_src, void* dst);

  int64_t in_features() const { return m_k; }
  int64_t out_features() const { return m_o; }

 private:
  struct Impl;
  CudaBackend& m_be;
  Int8LayerData m_layer;  // host copy: config and scales
  int64_t m_k, m_o, m_kp, m_op;
  std::unique_ptr<Impl> m_impl;
};

/// The INT8 convolution on the GPU as a GEMM: an im2col of the channels-last 8-bit input (padding
/// with the src zero point, a real 0), then CudaInt8Linear over weights reordered to the im2col
/// column order (kh, kw, c). Output channels-last [N, O, OH, OW], as Int8Conv2d on the CPU.
class CudaInt8Conv2d {
 public:
  /// `layer` from make_int8_layer with weights [O, C, KH, KW] (host).
  CudaInt8Conv2d(CudaBackend& backend, const Int8LayerData& layer, const ConvParams& params);
  ~CudaInt8Conv2d();

  /// src: device [N, C, H, W] channels-last in the layer's src dtype.
  Tensor forward(const Tensor& src);

 private:
  CudaBackend& m_be;
  ConvParams m_p;
  int64_t m_c, m_kh, m_kw;
  uint8_t m_pad;  // the src zero point's byte
  DType m_src_dtype, m_dst_dtype;
  std::unique_ptr<CudaInt8Linear> m_gemm;
  Tensor m_cols;  // device [N*OH*OW, KH*KW*C], reused
};

}  // namespace lathe::cuda
